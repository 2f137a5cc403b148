"""REINFORCE on a toy bandit-like environment.

Rollouts are collected with the policy on the GPU, but the actions are stored
in a CPU replay buffer (sampled with numpy). The policy-gradient loss picks
log pi(a|s) with log_probs.gather(1, actions): the index tensor is on the CPU
while log_probs is on the GPU.
"""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("reinforce")

np.random.seed(0)
torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")
OBS_DIM, N_ACTIONS = 8, 4


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.Tanh(), nn.Linear(64, N_ACTIONS))

    def forward(self, obs):
        return F.log_softmax(self.net(obs), dim=-1)


class RolloutBuffer:
    def __init__(self):
        self.obs, self.actions, self.rewards = [], [], []

    def add(self, obs, action, reward):
        self.obs.append(obs)
        self.actions.append(action)
        self.rewards.append(reward)

    def tensors(self):
        return (torch.as_tensor(np.stack(self.obs), dtype=torch.float32),
                torch.as_tensor(self.actions, dtype=torch.long).unsqueeze(1),
                torch.as_tensor(self.rewards, dtype=torch.float32))


def collect(policy, rng, n=256):
    buf = RolloutBuffer()
    with torch.no_grad():
        for _ in range(n):
            obs = rng.standard_normal(OBS_DIM).astype(np.float32)
            probs = policy(torch.from_numpy(obs).to(device)).exp().cpu().numpy()
            a = int(rng.choice(N_ACTIONS, p=probs / probs.sum()))
            buf.add(obs, a, float(obs[a] > 0))
    return buf


def main():
    rng = np.random.default_rng(0)
    policy = Policy().to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for it in range(5):
        obs, actions, rewards = collect(policy, rng).tensors()
        log_probs = policy(obs.to(device))
        chosen = log_probs.gather(1, actions).squeeze(1)
        adv = rewards.to(device) - rewards.mean().to(device)
        loss = -(chosen * adv).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.info("iter %d mean reward %.3f", it, rewards.mean().item())


if __name__ == "__main__":
    main()
