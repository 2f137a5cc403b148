# Token classification (NER); padded label positions are filled with -1.
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pad_sequence

device = "cuda"
NUM_TAGS = 9
PAD_LABEL = -1

sent_lens = [12, 7, 20, 15, 9, 18, 5, 11]
tokens = [torch.randint(1, 5000, (n,)) for n in sent_lens]
tags = [torch.randint(0, NUM_TAGS, (n,)) for n in sent_lens]
tok_batch = pad_sequence(tokens, batch_first=True, padding_value=0).to(device)
tag_batch = pad_sequence(tags, batch_first=True, padding_value=PAD_LABEL).to(device)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5000, 100, padding_idx=0)
        self.lstm = nn.LSTM(100, 128, batch_first=True, bidirectional=True)
        self.out = nn.Linear(256, NUM_TAGS)

    def forward(self, t):
        h, _ = self.lstm(self.emb(t))
        return self.out(h)


tagger = Tagger().to(device)
opt = torch.optim.Adam(tagger.parameters())
for epoch in range(3):
    logits = tagger(tok_batch)
    loss = nn.functional.cross_entropy(logits.view(-1, NUM_TAGS), tag_batch.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("epoch", epoch, "loss", loss.item())
