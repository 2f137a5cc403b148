"""DQN-style agent with a GPU replay buffer sized to "use all the free memory".

The replay buffer capacity is computed from torch.cuda.mem_get_info() leaving
only 32 MiB of headroom. The buffer is filled by a random-policy warm-up
(elementwise ops only), so the first matrix multiply happens in the first
training step: cuBLAS then cannot allocate the device memory it needs to
create its handle, and the error is a cuBLAS status rather than a PyTorch
"CUDA out of memory".
"""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("dqn")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda")

OBS_DIM, N_ACTIONS = 64, 6
HEADROOM = 32 * 2**20   # "the networks are tiny, 32 MiB is plenty"


class ReplayBuffer:
    def __init__(self, capacity):
        self.capacity, self.size = capacity, 0
        self.obs = torch.empty(capacity, OBS_DIM, device=device)
        self.next_obs = torch.empty(capacity, OBS_DIM, device=device)
        self.action = torch.empty(capacity, dtype=torch.int64, device=device)
        self.reward = torch.empty(capacity, device=device)
        self.done = torch.empty(capacity, dtype=torch.bool, device=device)

    @staticmethod
    def bytes_per_transition():
        return 2 * OBS_DIM * 4 + 8 + 4 + 1

    def random_warmup(self, n, chunk=1 << 22):
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            self.obs[start:end].normal_()
            self.next_obs[start:end].normal_()
            self.action[start:end].random_(0, N_ACTIONS)
            self.reward[start:end].uniform_()
            self.done[start:end].zero_()          # episodes rarely end
        self.size = n

    def sample(self, batch_size):
        idx = torch.randint(0, self.size, (batch_size,), device=device)
        return self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.done[idx]


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, N_ACTIONS))

    def forward(self, obs):
        return self.net(obs)


def main():
    q, target_q = QNet().to(device), QNet().to(device)
    target_q.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)

    free, total = torch.cuda.mem_get_info()
    capacity = (free - HEADROOM) // ReplayBuffer.bytes_per_transition()
    buf = ReplayBuffer(capacity)
    buf.random_warmup(min(capacity, 50_000_000))
    log.info("replay buffer: %d transitions, GPU free now %.1f MiB", capacity,
             torch.cuda.mem_get_info()[0] / 2**20)

    gamma = 0.99
    for step in range(100):
        obs, act, rew, nxt, done = buf.sample(256)
        q_sa = q(obs).gather(1, act.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target = rew + gamma * (~done) * target_q(nxt).max(dim=1).values
        loss = F.smooth_l1_loss(q_sa, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            log.info("step %d loss %.4f", step, loss.item())


if __name__ == "__main__":
    main()
