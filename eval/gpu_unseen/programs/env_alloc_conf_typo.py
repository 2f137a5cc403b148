# Reduce fragmentation for variable-length batches, as suggested in the OOM message.
import os
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments=True"

import torch
import torch.nn as nn

model = nn.LSTM(128, 512, num_layers=2, batch_first=True).cuda()
for seq_len in (50, 120, 300, 80):
    x = torch.randn(32, seq_len, 128, device="cuda")
    out, _ = model(x)
    out.mean().backward()
    print(seq_len, torch.cuda.max_memory_allocated() // 2**20, "MiB")
