"""CIFAR-style CNN training loop: the model is moved to the GPU, the batches are not."""
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    images = torch.randn(1024, 3, 32, 32)
    labels = torch.randint(0, 10, (1024,))
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)

    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(2):
        for inputs, targets in loader:
            opt.zero_grad()
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            loss.backward()
            opt.step()
        log.info("epoch %d loss %.4f", epoch, loss.item())


if __name__ == "__main__":
    main()
