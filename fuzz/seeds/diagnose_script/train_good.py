import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return checkpoint(self._inner, x, use_reentrant=False)

    def _inner(self, x):
        return self.drop(self.ff(x))


model = Block(1024).cuda()
opt = torch.optim.AdamW(model.parameters())


def train(loader):
    total_loss = 0.0
    history = []
    for x, y in loader:
        loss = 0
        out = model(x)
        loss += ((out - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        total_loss += loss.item()
        history.append(loss.detach().cpu())
    torch.cuda.empty_cache()
    return total_loss


@torch.no_grad()
def evaluate(loader):
    model.eval()
    preds = []
    for x, _ in loader:
        preds.append(model(x))
    return preds


def evaluate2(loader):
    model.eval()
    with torch.inference_mode():
        return [model(x) for x, _ in loader]


def validate(val_loader):
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(-1) == y).sum().item()
    return correct


def validate2(val_loader):
    correct = 0
    for x, y in val_loader:
        with torch.inference_mode():
            correct += (model(x).argmax(-1) == y).sum().item()
    return correct
