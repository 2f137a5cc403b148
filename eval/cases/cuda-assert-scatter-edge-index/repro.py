"""Mean-aggregation GNN layer over a mini-batch of graphs.

Graphs are merged into one big disconnected graph by offsetting each graph's
edge_index by the number of nodes seen so far. The offset is computed with
the *inclusive* cumulative sum instead of the exclusive one, so every graph's
edges are shifted by one graph too many and the last graph's edges point past
the end of the merged node tensor: gathering/scattering the messages goes out
of range -> device-side assert in the CUDA index kernels.
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("gnn")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")
FEAT = 64


def random_graph(g):
    n = int(torch.randint(10, 30, (1,), generator=g))
    e = 4 * n
    edge_index = torch.randint(0, n, (2, e), generator=g)
    x = torch.randn(n, FEAT, generator=g)
    y = torch.randint(0, 2, (1,), generator=g)
    return x, edge_index, y


def collate_graphs(graphs):
    sizes = torch.tensor([x.shape[0] for x, _, _ in graphs])
    offsets = torch.cumsum(sizes, 0)            # BUG: should be exclusive (cumsum - sizes)
    xs, eis, batch, ys = [], [], [], []
    for i, ((x, ei, y), off) in enumerate(zip(graphs, offsets)):
        xs.append(x)
        eis.append(ei + off)
        batch.append(torch.full((x.shape[0],), i))
        ys.append(y)
    return torch.cat(xs), torch.cat(eis, dim=1), torch.cat(batch), torch.cat(ys)


class MeanConv(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)
        self.root = nn.Linear(d_in, d_out)

    def forward(self, x, edge_index):
        src, dst = edge_index
        msg = self.lin(x)[src]
        agg = torch.zeros(x.shape[0], msg.shape[1], device=x.device)
        agg.scatter_add_(0, dst.unsqueeze(1).expand_as(msg), msg)
        deg = torch.zeros(x.shape[0], device=x.device).scatter_add_(
            0, dst, torch.ones_like(dst, dtype=torch.float))
        return agg / deg.clamp(min=1).unsqueeze(1) + self.root(x)


class GraphClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = MeanConv(FEAT, 128), MeanConv(128, 128)
        self.head = nn.Linear(128, 2)

    def forward(self, x, edge_index, batch, n_graphs):
        h = F.relu(self.conv1(x, edge_index))
        h = F.relu(self.conv2(h, edge_index))
        pooled = torch.zeros(n_graphs, h.shape[1], device=h.device).index_add_(0, batch, h)
        return self.head(pooled)


def main():
    g = torch.Generator().manual_seed(0)
    dataset = [random_graph(g) for _ in range(256)]
    model = GraphClassifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(0, len(dataset), 16):
        x, ei, batch, y = collate_graphs(dataset[step:step + 16])
        x, ei, batch, y = x.to(device), ei.to(device), batch.to(device), y.to(device)
        loss = F.cross_entropy(model(x, ei, batch, 16), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("step %d loss %.4f", step // 16, loss.item())


if __name__ == "__main__":
    main()
