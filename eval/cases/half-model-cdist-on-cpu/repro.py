"""Prototypical-network evaluation run in fp16 on CPU 'to save memory'."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, d_in=32, d_emb=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, d_emb))

    def forward(self, x):
        return self.net(x)


def episode_accuracy(encoder, support, support_y, query, query_y, n_way):
    emb_s = encoder(support)
    emb_q = encoder(query)
    prototypes = torch.stack([emb_s[support_y == c].mean(0) for c in range(n_way)])
    dists = torch.cdist(emb_q, prototypes)
    pred = dists.argmin(dim=1)
    return (pred == query_y).float().mean().item()


if __name__ == "__main__":
    device = torch.device("cpu")
    encoder = Encoder().to(device).half().eval()
    n_way, k_shot, n_query = 5, 3, 4
    support = torch.randn(n_way * k_shot, 32, device=device).half()
    support_y = torch.arange(n_way).repeat_interleave(k_shot)
    query = torch.randn(n_way * n_query, 32, device=device).half()
    query_y = torch.arange(n_way).repeat_interleave(n_query)
    with torch.no_grad():
        acc = episode_accuracy(encoder, support, support_y, query, query_y, n_way)
    print("episode accuracy", acc)
