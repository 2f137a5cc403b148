"""Debug print left in forward() of a model compiled with fullgraph=True."""
import torch
import torch.nn as nn

torch.manual_seed(0)

DEBUG = True


class Encoder(nn.Module):
    def __init__(self, d_model=32, n_layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x):
        h = self.encoder(x)
        if DEBUG:
            print("encoder output stats:", h.mean(), h.std())
        return self.norm(h)


if __name__ == "__main__":
    model = torch.compile(Encoder(), fullgraph=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(2):
        x = torch.randn(4, 10, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
