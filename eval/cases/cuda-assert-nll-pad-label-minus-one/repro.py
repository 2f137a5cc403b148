"""BiGRU part-of-speech tagger with padded batches.

collate_fn pads the tag sequences with -1 and the loss is
F.nll_loss(log_probs, tags) with the default ignore_index (-100), so the
padding positions are real targets of value -1: a device-side assert in the
CUDA nll_loss kernel.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("tagger")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

VOCAB, N_TAGS, PAD_TOKEN, PAD_TAG = 5000, 17, 0, -1


class TaggedSentences(Dataset):
    def __init__(self, n=1024):
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(5, 40, (n,), generator=g)
        self.data = [(torch.randint(1, VOCAB, (int(L),), generator=g),
                      torch.randint(0, N_TAGS, (int(L),), generator=g)) for L in lengths]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def collate(batch):
    words, tags = zip(*batch)
    return (pad_sequence(words, batch_first=True, padding_value=PAD_TOKEN),
            pad_sequence(tags, batch_first=True, padding_value=PAD_TAG))


class BiGRUTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 128, padding_idx=PAD_TOKEN)
        self.rnn = nn.GRU(128, 256, batch_first=True, bidirectional=True)
        self.out = nn.Linear(512, N_TAGS)

    def forward(self, words):
        h, _ = self.rnn(self.emb(words))
        return F.log_softmax(self.out(h), dim=-1)


def main():
    loader = DataLoader(TaggedSentences(), batch_size=32, shuffle=True, collate_fn=collate)
    model = BiGRUTagger().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (words, tags) in enumerate(loader):
        words, tags = words.to(device), tags.to(device)
        log_probs = model(words)
        loss = F.nll_loss(log_probs.reshape(-1, N_TAGS), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
