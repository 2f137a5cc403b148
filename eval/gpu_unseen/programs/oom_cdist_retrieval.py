# Image retrieval evaluation: compute recall@1 of query embeddings vs a gallery.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

n_query, n_gallery, dim = 200_000, 500_000, 256
query = F.normalize(torch.randn(n_query, dim, device=device), dim=1)
gallery = F.normalize(torch.randn(n_gallery, dim, device=device), dim=1)
query_ids = torch.randint(0, 10_000, (n_query,), device=device)
gallery_ids = torch.randint(0, 10_000, (n_gallery,), device=device)


def recall_at_1(q, g, qid, gid):
    dists = torch.cdist(q, g)                # full query x gallery distance matrix
    nearest = dists.argmin(dim=1)
    return (gid[nearest] == qid).float().mean().item()


print("recall@1:", recall_at_1(query, gallery, query_ids, gallery_ids))
