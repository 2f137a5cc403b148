"""Character-level LSTM trained with truncated BPTT; the hidden state is carried across
batches without detaching it."""
import torch
import torch.nn as nn

torch.manual_seed(0)

TEXT = "the quick brown fox jumps over the lazy dog. " * 20
chars = sorted(set(TEXT))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in TEXT])


class CharLSTM(nn.Module):
    def __init__(self, vocab, emb=16, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        out, state = self.lstm(self.emb(x), state)
        return self.head(out), state


if __name__ == "__main__":
    model = CharLSTM(len(chars))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    bptt, batch = 25, 4
    stream = data[: (len(data) - 1) // batch * batch + 1]
    state = None
    for i in range(0, 5 * bptt, bptt):
        x = torch.stack([stream[b * 100 + i: b * 100 + i + bptt] for b in range(batch)])
        y = torch.stack([stream[b * 100 + i + 1: b * 100 + i + bptt + 1] for b in range(batch)])
        logits, state = model(x, state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"chunk {i // bptt} loss {loss.item():.3f}")
