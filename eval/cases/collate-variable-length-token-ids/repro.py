"""Sentiment dataset returning token-id tensors of different lengths, batched with the
default collate function."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

SENTENCES = [
    ("a wonderful little film", 1),
    ("boring", 0),
    ("i would not watch it again", 0),
    ("great cast and a clever script", 1),
]


class ReviewDataset(Dataset):
    def __init__(self, pairs):
        words = sorted({w for s, _ in pairs for w in s.split()})
        self.vocab = {w: i + 1 for i, w in enumerate(words)}
        self.pairs = pairs

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, idx):
        text, label = self.pairs[idx]
        ids = torch.tensor([self.vocab[w] for w in text.split()])
        return ids, label


class BagModel(nn.Module):
    def __init__(self, vocab_size, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab_size + 1, dim, padding_idx=0)
        self.out = nn.Linear(dim, 2)

    def forward(self, ids):
        return self.out(self.emb(ids).mean(1))


if __name__ == "__main__":
    ds = ReviewDataset(SENTENCES)
    model = BagModel(len(ds.vocab))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for ids, labels in DataLoader(ds, batch_size=2, shuffle=False):
        loss = nn.functional.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
