"""A checkpoint copy that was interrupted half-way (e.g. a killed rsync / partial download)."""
import os
import shutil
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)


def copy_checkpoint(src, dst, max_bytes=None):
    # the transfer job was killed after max_bytes
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        if max_bytes is None:
            shutil.copyfileobj(fin, fout)
        else:
            fout.write(fin.read(max_bytes))


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
    with tempfile.TemporaryDirectory() as tmp:
        remote = os.path.join(tmp, "remote_model.pt")
        local = os.path.join(tmp, "model.pt")
        torch.save(model.state_dict(), remote)
        copy_checkpoint(remote, local, max_bytes=os.path.getsize(remote) // 2)

        model.load_state_dict(torch.load(local, map_location="cpu"))
