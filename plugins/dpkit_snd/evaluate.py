"""Utility metrics of SnD (§4): similarity to the clean embedding and the downstream 2-layer MLP."""

from __future__ import annotations

import torch
from sklearn.metrics import roc_auc_score
from torch import nn


def similarity(e: torch.Tensor, e_clean: torch.Tensor) -> dict[str, float]:
    """Mean squared error (per coordinate) and mean cosine between ``e`` and the clean ``e_clean``."""
    mse = torch.mean((e - e_clean) ** 2)
    cos = nn.functional.cosine_similarity(e, e_clean, dim=-1).mean()
    return {"mse": float(mse), "cosine": float(cos)}


class DownstreamMLP(nn.Module):
    """Two fully connected layers with ReLU, hidden size = input size (App. A.5.4)."""

    def __init__(self, dim: int, n_classes: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                                 nn.Linear(dim, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for ``x [B, dim]``."""
        return self.net(x)


def train_classifier(x: torch.Tensor, y: torch.Tensor, n_classes: int, *, epochs: int,
                     generator: torch.Generator, lr: float = 1e-3,
                     batch_size: int = 128) -> tuple[DownstreamMLP, torch.Tensor, torch.Tensor]:
    """Fit the MLP on standardized ``x``; returns the model and the standardization (mean, std)."""
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    xs = (x - mean) / std
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=generator.device))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DownstreamMLP(x.shape[1], n_classes)
    model = model.to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    for _ in range(epochs):
        order = torch.randperm(len(xs), generator=generator, device=generator.device)
        for rows in order.to(x.device).split(batch_size):
            loss = nn.functional.cross_entropy(model(xs[rows]), y[rows])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval(), mean, std


def downstream(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
               test_y: torch.Tensor, n_classes: int, *, epochs: int,
               generator: torch.Generator) -> dict[str, float]:
    """Accuracy and (macro one-vs-rest) AUC of the MLP trained on ``train_x``, tested on ``test_x``."""
    model, mean, std = train_classifier(train_x, train_y, n_classes, epochs=epochs,
                                        generator=generator)
    with torch.no_grad():
        probs = torch.softmax(model((test_x - mean) / std), dim=-1)
    acc = float((probs.argmax(-1) == test_y).float().mean())
    return {"accuracy": acc, "auc": _auc(test_y.cpu().numpy(), probs.cpu().numpy(), n_classes)}


def _auc(y, probs, n_classes: int) -> float:
    """ROC AUC; NaN when the test labels hold a single class."""
    if len(set(y.tolist())) < 2:
        return float("nan")
    if n_classes == 2:
        return float(roc_auc_score(y, probs[:, 1]))
    present = sorted(set(y.tolist()))
    p = probs[:, present]
    p = p / p.sum(1, keepdims=True)
    if len(present) == 2:
        return float(roc_auc_score(y == present[1], p[:, 1]))
    return float(roc_auc_score(y, p, multi_class="ovr", average="macro", labels=present))
