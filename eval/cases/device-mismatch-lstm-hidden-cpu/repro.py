"""Character-level LSTM language model with an explicit initial hidden state.

init_hidden() builds the (h0, c0) zeros without a device, so they live on the
CPU while the model and the input are on the GPU.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("charlm")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

TEXT = ("the quick brown fox jumps over the lazy dog. " * 200)
VOCAB = sorted(set(TEXT))
STOI = {c: i for i, c in enumerate(VOCAB)}


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, emb=64, hidden=256, layers=2):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.emb = nn.Embedding(vocab_size, emb)
        self.lstm = nn.LSTM(emb, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def init_hidden(self, batch_size):
        return (torch.zeros(self.layers, batch_size, self.hidden),
                torch.zeros(self.layers, batch_size, self.hidden))

    def forward(self, x, state):
        y, state = self.lstm(self.emb(x), state)
        return self.out(y), state


def batches(data, batch_size=32, seq_len=64):
    n = (len(data) - 1) // (batch_size * seq_len) * batch_size * seq_len
    x = data[:n].view(batch_size, -1)
    y = data[1:n + 1].view(batch_size, -1)
    for i in range(0, x.shape[1], seq_len):
        yield x[:, i:i + seq_len], y[:, i:i + seq_len]


def main():
    data = torch.tensor([STOI[c] for c in TEXT])
    model = CharLSTM(len(VOCAB)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        state = model.init_hidden(32)
        for x, y in batches(data):
            x, y = x.to(device), y.to(device)
            logits, state = model(x, state)
            state = tuple(s.detach() for s in state)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        log.info("epoch %d loss %.4f", epoch, loss.item())


if __name__ == "__main__":
    main()
