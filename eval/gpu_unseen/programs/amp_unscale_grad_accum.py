# AMP + gradient accumulation + gradient clipping
import torch
import torch.nn as nn

device = "cuda"
ACCUM = 4
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True), 4).to(device)
head = nn.Linear(256, 1).to(device)
params = list(model.parameters()) + list(head.parameters())
opt = torch.optim.AdamW(params, lr=2e-4)
scaler = torch.amp.GradScaler("cuda")

opt.zero_grad()
for micro_step in range(16):
    x = torch.randn(16, 64, 256, device=device)
    target = torch.randn(16, 1, device=device)
    with torch.autocast("cuda", dtype=torch.float16):
        pred = head(model(x).mean(1))
        loss = nn.functional.mse_loss(pred.float(), target) / ACCUM
    scaler.scale(loss).backward()

    scaler.unscale_(opt)
    gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)

    if (micro_step + 1) % ACCUM == 0:
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        print(f"step {(micro_step + 1) // ACCUM}: loss {loss.item() * ACCUM:.4f} gnorm {gnorm:.3f}")
