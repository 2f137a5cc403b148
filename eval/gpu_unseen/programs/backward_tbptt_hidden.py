# Character-level LSTM language model with truncated BPTT
import torch
import torch.nn as nn

device = "cuda"
vocab, emb, hid, bptt, bs = 96, 64, 256, 35, 32
corpus = torch.randint(0, vocab, (bs, 35 * 20), device=device)


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hid, num_layers=2, batch_first=True)
        self.out = nn.Linear(hid, vocab)

    def forward(self, x, state):
        h, state = self.rnn(self.emb(x), state)
        return self.out(h), state


lm = CharLM().to(device)
opt = torch.optim.Adam(lm.parameters(), lr=2e-3)
state = None
for i in range(0, corpus.size(1) - bptt - 1, bptt):
    inp = corpus[:, i:i + bptt]
    tgt = corpus[:, i + 1:i + 1 + bptt]
    logits, state = lm(inp, state)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(lm.parameters(), 0.25)
    opt.step()
    print(f"chunk {i // bptt}: loss {loss.item():.3f}")
