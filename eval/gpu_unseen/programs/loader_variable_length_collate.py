import random
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

random.seed(0)


class ReviewDataset(Dataset):
    """Tokenised reviews of different lengths."""

    def __init__(self, n=500):
        self.samples = []
        for _ in range(n):
            length = random.randint(5, 60)
            self.samples.append((torch.randint(1, 20000, (length,)), random.randint(0, 1)))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        toks, label = self.samples[idx]
        return toks, torch.tensor(label)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20000, 128, padding_idx=0)
        self.rnn = nn.GRU(128, 128, batch_first=True)
        self.fc = nn.Linear(128, 2)

    def forward(self, x):
        _, h = self.rnn(self.emb(x))
        return self.fc(h[-1])


dev = "cuda"
model = Model().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
dl = DataLoader(ReviewDataset(), batch_size=32, shuffle=True)
for toks, labels in dl:
    toks, labels = toks.to(dev), labels.to(dev)
    loss = nn.functional.cross_entropy(model(toks), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained one epoch")
