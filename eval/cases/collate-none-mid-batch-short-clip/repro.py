"""Speech-command dataset that returns None for clips shorter than the model's window;
one such clip lands in the middle of a batch."""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

np.random.seed(0)
torch.manual_seed(0)

SAMPLE_RATE = 1600
WINDOW = SAMPLE_RATE  # 1 s


class SpeechCommands(Dataset):
    def __init__(self, n=16):
        lengths = np.full(n, SAMPLE_RATE + 200)
        lengths[5] = SAMPLE_RATE // 3  # a clipped recording
        self.clips = [np.random.randn(L).astype(np.float32) for L in lengths]
        self.labels = np.random.randint(0, 4, size=n)

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, idx):
        wav = self.clips[idx]
        if len(wav) < WINDOW:
            return None  # too short, drop it
        return torch.from_numpy(wav[:WINDOW]), int(self.labels[idx])


class KeywordNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 8, kernel_size=80, stride=40)
        self.head = nn.Linear(8, 4)

    def forward(self, wav):
        h = torch.relu(self.conv(wav.unsqueeze(1)))
        return self.head(h.mean(-1))


if __name__ == "__main__":
    model = KeywordNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for wav, label in DataLoader(SpeechCommands(), batch_size=4, shuffle=False):
        loss = nn.functional.cross_entropy(model(wav), label)
        opt.zero_grad()
        loss.backward()
        opt.step()
