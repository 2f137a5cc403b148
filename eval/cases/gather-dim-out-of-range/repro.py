"""DQN update: selecting Q(s, a) with gather along the wrong dimension."""
import random

import torch
import torch.nn as nn

random.seed(0)
torch.manual_seed(0)

N_ACTIONS, OBS_DIM, BATCH, GAMMA = 4, 8, 32, 0.99


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.ReLU(), nn.Linear(64, N_ACTIONS))

    def forward(self, obs):
        return self.net(obs)


q_net, target_net = QNet(), QNet()
target_net.load_state_dict(q_net.state_dict())
opt = torch.optim.Adam(q_net.parameters(), lr=1e-3)

replay = [(torch.randn(OBS_DIM), random.randrange(N_ACTIONS), random.random(), torch.randn(OBS_DIM), False)
          for _ in range(256)]

for update in range(3):
    batch = random.sample(replay, BATCH)
    obs = torch.stack([b[0] for b in batch])
    actions = torch.tensor([b[1] for b in batch]).unsqueeze(1)   # (B, 1)
    rewards = torch.tensor([b[2] for b in batch])
    next_obs = torch.stack([b[3] for b in batch])
    dones = torch.tensor([b[4] for b in batch], dtype=torch.float32)

    q_values = q_net(obs)                                          # (B, N_ACTIONS)
    q_taken = q_values.gather(2, actions).squeeze(1)
    with torch.no_grad():
        target = rewards + GAMMA * (1 - dones) * target_net(next_obs).max(1).values
    loss = nn.functional.smooth_l1_loss(q_taken, target)
    opt.zero_grad()
    loss.backward()
    opt.step()
