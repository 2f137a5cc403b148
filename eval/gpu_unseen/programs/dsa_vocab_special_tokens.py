# Text classifier: vocabulary built from the corpus, special tokens appended afterwards.
import torch
import torch.nn as nn

corpus = ["the movie was great", "terrible plot and acting", "great acting",
          "i loved the soundtrack", "worst movie of the year"] * 40
words = sorted({w for s in corpus for w in s.split()})
stoi = {w: i for i, w in enumerate(words)}
VOCAB_SIZE = len(stoi)
stoi["<pad>"] = len(stoi)
stoi["<unk>"] = len(stoi)
MAX_LEN = 8


def encode(s):
    ids = [stoi.get(w, stoi["<unk>"]) for w in s.split()][:MAX_LEN]
    return ids + [stoi["<pad>"]] * (MAX_LEN - len(ids))


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB_SIZE, 64)
        self.fc = nn.Linear(64, 2)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(1))


model = BagClassifier().cuda()
ids = torch.tensor([encode(s) for s in corpus]).cuda()
y = torch.tensor([int("great" in s or "loved" in s) for s in corpus]).cuda()
opt = torch.optim.Adam(model.parameters(), 1e-2)
for epoch in range(5):
    loss = nn.functional.cross_entropy(model(ids), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(epoch, loss.item())
