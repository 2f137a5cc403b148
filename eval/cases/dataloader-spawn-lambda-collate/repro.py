"""DataLoader with the 'spawn' start method (as on macOS/Windows) and a lambda collate_fn."""
import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class TokenDataset(Dataset):
    def __init__(self, n=32):
        g = torch.Generator().manual_seed(0)
        self.seqs = [torch.randint(1, 100, (int(torch.randint(3, 12, (1,), generator=g)),), generator=g)
                     for _ in range(n)]

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i]


def main():
    loader = DataLoader(
        TokenDataset(),
        batch_size=8,
        num_workers=2,
        multiprocessing_context="spawn",
        collate_fn=lambda batch: pad_sequence(batch, batch_first=True, padding_value=0),
    )
    emb = torch.nn.Embedding(100, 16, padding_idx=0)
    for batch in loader:
        print(emb(batch).shape)


if __name__ == "__main__":
    main()
