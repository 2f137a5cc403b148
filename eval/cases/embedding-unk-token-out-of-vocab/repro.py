"""Text classifier: the <unk> id is assigned after the embedding table was sized from the
training vocabulary."""
import torch
import torch.nn as nn

torch.manual_seed(0)

train_texts = ["the movie was great", "terrible plot and acting", "great acting", "the plot was thin"]
train_labels = [1, 0, 1, 0]
test_texts = ["the soundtrack was great"]

vocab = {"<pad>": 0}
for text in train_texts:
    for tok in text.split():
        vocab.setdefault(tok, len(vocab))


class TextClassifier(nn.Module):
    def __init__(self, vocab_size, dim=32, n_classes=2):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.fc = nn.Linear(dim, n_classes)

    def forward(self, ids):
        return self.fc(self.emb(ids).mean(dim=1))


model = TextClassifier(len(vocab))
vocab["<unk>"] = len(vocab)   # added later for unseen words


def encode(text, max_len=6):
    ids = [vocab.get(tok, vocab["<unk>"]) for tok in text.split()][:max_len]
    return torch.tensor(ids + [0] * (max_len - len(ids)))


opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.stack([encode(t) for t in train_texts])
y = torch.tensor(train_labels)
for epoch in range(5):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    print(model(torch.stack([encode(t) for t in test_texts])).softmax(-1))
