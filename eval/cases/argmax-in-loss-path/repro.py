"""Ordinal regression attempt: the predicted class (argmax) is compared to the label with MSE."""
import torch
import torch.nn as nn

torch.manual_seed(0)

N_LEVELS = 5  # e.g. star ratings 0..4


class RatingModel(nn.Module):
    def __init__(self, d=24):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 48), nn.ReLU(), nn.Linear(48, N_LEVELS))

    def forward(self, x):
        return self.net(x)


def rating_loss(logits, ratings):
    predicted_rating = logits.argmax(dim=1).float()
    return nn.functional.mse_loss(predicted_rating, ratings.float())


if __name__ == "__main__":
    model = RatingModel()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        x = torch.randn(32, 24)
        ratings = torch.randint(0, N_LEVELS, (32,))
        loss = rating_loss(model(x), ratings)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, loss.item())
