"""DQN agent on a GPU-vectorised environment with a replay buffer sized to
"use all the free GPU memory".

The script first smoke-tests the env and the buffer plumbing on a tiny
buffer, then allocates the real replay buffer from torch.cuda.mem_get_info()
leaving only 32 MiB of headroom, fills it with random-policy transitions
(no network involved) and starts training. The first matrix multiply of the
Q-network must create the cuBLAS handle, which cannot get the device memory
it needs: the failure is reported as a cuBLAS status, not as PyTorch's
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

OBS_DIM, N_ACTIONS, N_ENVS = 64, 6, 4096
HEADROOM = 32 * 2**20   # "the networks are tiny, 32 MiB is plenty"


class GpuVecEnv:
    """Toy batched environment living on the GPU (Isaac-Gym style)."""

    def __init__(self, n):
        self.n = n
        self.obs = torch.empty(n, OBS_DIM, device=device).normal_()

    def sample_actions(self):
        return torch.randint(0, N_ACTIONS, (self.n,), device=device)

    def step(self, actions):
        next_obs = torch.empty_like(self.obs).normal_()
        reward = torch.empty(self.n, device=device).uniform_()
        done = torch.empty(self.n, device=device).uniform_() < 0.01
        self.obs = next_obs
        return next_obs, reward, done


class ReplayBuffer:
    def __init__(self, capacity):
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.obs = torch.empty(capacity, OBS_DIM, device=device)
        self.next_obs = torch.empty(capacity, OBS_DIM, device=device)
        self.action = torch.empty(capacity, dtype=torch.int64, device=device)
        self.reward = torch.empty(capacity, device=device)
        self.done = torch.empty(capacity, dtype=torch.bool, device=device)

    @staticmethod
    def bytes_per_transition():
        return 2 * OBS_DIM * 4 + 8 + 4 + 1

    def add(self, obs, action, reward, next_obs, done):
        n = obs.shape[0]
        sl = slice(self.pos, self.pos + n)
        self.obs[sl].copy_(obs)
        self.action[sl].copy_(action)
        self.reward[sl].copy_(reward)
        self.next_obs[sl].copy_(next_obs)
        self.done[sl].copy_(done)
        self.pos = (self.pos + n) % (self.capacity - n + 1)
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size):
        idx = torch.randint(0, self.size, (batch_size,), device=device)
        return self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx], self.done[idx]


def collect_random(env, buf, steps):
    for _ in range(steps):
        obs = env.obs
        a = env.sample_actions()
        next_obs, r, d = env.step(a)
        buf.add(obs, a, r, next_obs, d)


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, N_ACTIONS))

    def forward(self, obs):
        return self.net(obs)


def main():
    env = GpuVecEnv(N_ENVS)

    # smoke test of env + buffer plumbing before allocating the big buffer
    test_buf = ReplayBuffer(4 * N_ENVS)
    collect_random(env, test_buf, 4)
    o, a, r, o2, d = test_buf.sample(256)
    assert o.shape == (256, OBS_DIM) and a.dtype == torch.int64 and d.dtype == torch.bool
    del test_buf, o, a, r, o2, d

    q, target_q = QNet().to(device), QNet().to(device)
    target_q.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)

    free, _ = torch.cuda.mem_get_info()
    capacity = (free - HEADROOM) // ReplayBuffer.bytes_per_transition()
    buf = ReplayBuffer(capacity)
    collect_random(env, buf, 64)
    log.info("replay buffer: capacity %d transitions, %d collected, GPU free now %.1f MiB",
             capacity, buf.size, torch.cuda.mem_get_info()[0] / 2**20)

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
