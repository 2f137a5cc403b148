"""Sequence classifier whose forward takes (ids, mask); the training loop only passes ids."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class PaddedTextDataset(Dataset):
    def __init__(self, n=32, max_len=12, vocab=200):
        self.ids = torch.randint(1, vocab, (n, max_len))
        lengths = torch.randint(3, max_len + 1, (n,))
        self.mask = torch.arange(max_len)[None, :] < lengths[:, None]
        self.ids[~self.mask] = 0
        self.labels = torch.randint(0, 3, (n,))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "label": self.labels[i]}


class MeanPoolClassifier(nn.Module):
    def __init__(self, vocab=200, d=32, n_classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=0)
        self.head = nn.Linear(d, n_classes)

    def forward(self, input_ids, attention_mask):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        pooled = h.sum(1) / attention_mask.sum(1, keepdim=True)
        return self.head(pooled)


if __name__ == "__main__":
    model = MeanPoolClassifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch in DataLoader(PaddedTextDataset(), batch_size=8, shuffle=True):
        logits = model(batch["input_ids"])
        loss = nn.functional.cross_entropy(logits, batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
