"""Logging ROC-AUC with scikit-learn during training by calling .numpy() on the model output."""
import numpy as np
import torch
import torch.nn as nn
from sklearn.metrics import roc_auc_score

np.random.seed(0)
torch.manual_seed(0)

X = torch.randn(200, 8)
y = (X[:, 0] + 0.5 * X[:, 1] > 0).float()

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(3):
    logits = model(X).squeeze(1)
    loss = nn.functional.binary_cross_entropy_with_logits(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    probs = torch.sigmoid(logits)
    auc = roc_auc_score(y.numpy(), probs.numpy())
    print(f"epoch {epoch} loss {loss.item():.4f} auc {auc:.3f}")
