import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return checkpoint(self._inner, x, preserve_rng_state=False)

    def _inner(self, x):
        return self.drop(self.ff(x))


model = nn.DataParallel(Block(1024).cuda())
opt = torch.optim.AdamW(model.parameters())


def train(loader):
    total_loss = 0
    history = []
    for x, y in loader:
        out = model(x)
        loss = ((out - y) ** 2).mean()
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad()
        total_loss += loss
        history.append(loss)
        torch.cuda.empty_cache()
    return total_loss


def evaluate(loader):
    model.eval()
    preds = []
    for x, _ in loader:
        preds.append(model(x))
    return preds


ddp = torch.nn.parallel.DistributedDataParallel(Block(8).cuda())


def validate(val_loader):
    correct = 0
    for x, y in val_loader:
        correct += (model(x).argmax(-1) == y).sum().item()
    return correct
