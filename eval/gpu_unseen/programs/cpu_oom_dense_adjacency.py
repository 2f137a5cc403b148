# Build a graph adjacency matrix for a GCN over a large user graph,
# then move it to the GPU.
import numpy as np
import torch

rng = np.random.default_rng(0)
num_users = 6_000_000
num_edges = 20_000_000
src = torch.from_numpy(rng.integers(0, num_users, num_edges))
dst = torch.from_numpy(rng.integers(0, num_users, num_edges))

# dense adjacency, normalised by degree
adj = torch.zeros(num_users, num_users)
adj[src, dst] = 1.0
deg = adj.sum(1, keepdim=True).clamp(min=1)
adj = (adj / deg).to("cuda" if torch.cuda.is_available() else "cpu")

feats = torch.randn(num_users, 64, device=adj.device)
weight = torch.randn(64, 64, device=adj.device)
h = torch.relu(adj @ feats @ weight)
print(h.shape)
