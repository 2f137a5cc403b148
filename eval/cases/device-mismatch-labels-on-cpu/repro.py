"""Text classifier: inputs are moved to the GPU, the labels are forgotten."""
import logging

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")


class ReviewDataset(Dataset):
    def __init__(self, n=512, seq_len=64, vocab=10000):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        self.labels = torch.randint(0, 5, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "label": self.labels[i]}


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab=10000, d=128, n_classes=5):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, d, mode="mean")
        self.fc = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, n_classes))

    def forward(self, input_ids):
        return self.fc(self.emb(input_ids))


def main():
    loader = DataLoader(ReviewDataset(), batch_size=32, shuffle=True)
    model = BagOfEmbeddings().to(device)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, batch in enumerate(loader):
        input_ids = batch["input_ids"].to(device)
        logits = model(input_ids)
        loss = criterion(logits, batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
