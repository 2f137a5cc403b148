"""Binary classifier trained with BCEWithLogitsLoss on integer (int64) 0/1 labels."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class SpamDataset(Dataset):
    def __init__(self, n=96, vocab=50):
        self.bags = torch.rand(n, vocab)
        self.labels = (self.bags[:, 0] > 0.5).long()  # 0 = ham, 1 = spam

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.bags[i], self.labels[i]


class BagOfWords(nn.Module):
    def __init__(self, vocab=50):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(vocab, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.fc(x).squeeze(1)


if __name__ == "__main__":
    model = BagOfWords()
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for x, y in DataLoader(SpamDataset(), batch_size=16, shuffle=True):
            loss = criterion(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(epoch, loss.item())
