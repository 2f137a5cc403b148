# REINFORCE update for a discrete policy with a low softmax temperature
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda")

policy = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 16)).to(device)
optimizer = torch.optim.Adam(policy.parameters(), lr=3e-4)
TEMPERATURE = 0.01

with torch.autograd.detect_anomaly():
    for update in range(10):
        obs = torch.randn(256, 32, device=device) * 10
        probs = torch.softmax(policy(obs) / TEMPERATURE, dim=-1)
        actions = torch.multinomial(probs, 1)
        returns = torch.randn(256, 1, device=device)
        advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
        log_probs = torch.log(probs).gather(1, actions)
        loss = -(log_probs * advantages).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"update {update}: loss={loss.item():.4f}")
