"""GAN loop: the generator loss is computed before the discriminator's optimizer step and
backpropagated after it."""
import torch
import torch.nn as nn

torch.manual_seed(0)

Z_DIM, X_DIM, BATCH = 8, 2, 64

G = nn.Sequential(nn.Linear(Z_DIM, 32), nn.ReLU(), nn.Linear(32, X_DIM))
D = nn.Sequential(nn.Linear(X_DIM, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()


def real_batch():
    return torch.randn(BATCH, X_DIM) * 0.5 + torch.tensor([2.0, -1.0])


for step in range(3):
    real = real_batch()
    fake = G(torch.randn(BATCH, Z_DIM))
    d_fake = D(fake)
    ones, zeros = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)

    d_loss = bce(D(real), ones) + bce(d_fake, zeros)
    g_loss = bce(d_fake, ones)

    opt_d.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_d.step()

    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step}: d_loss={d_loss.item():.3f} g_loss={g_loss.item():.3f}")
