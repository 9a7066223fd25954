"""Utility metrics of SnD (§4): similarity to the clean embedding and the downstream 2-layer MLP."""

from __future__ import annotations

import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from dpkit import TrainingCurve, Validation, fit_epochs


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
                     generator: torch.Generator, lr: float = 1e-3, batch_size: int = 128,
                     validation: tuple[torch.Tensor, torch.Tensor] | None = None,
                     patience: int | None = None
                     ) -> tuple[DownstreamMLP, torch.Tensor, torch.Tensor, TrainingCurve]:
    """Fit the MLP on standardized ``x``; returns the model, the standardization (mean, std) and
    the per-epoch curve (mean training loss; cross-entropy on ``validation`` when given). With
    ``patience``, stop once the validation loss has not improved for that many epochs and keep
    the best epoch's weights."""
    if patience is not None and (validation is None or len(validation[0]) == 0):
        raise ValueError(f"train_classifier: patience={patience} needs validation data")
    mean, std = x.mean(0), x.std(0).clamp_min(1e-6)
    xs = (x - mean) / std
    seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=generator.device))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DownstreamMLP(x.shape[1], n_classes)
    model = model.to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)

    def train_epoch(_epoch: int) -> float:
        order = torch.randperm(len(xs), generator=generator, device=generator.device)
        total = 0.0
        for rows in order.to(x.device).split(batch_size):
            loss = nn.functional.cross_entropy(model(xs[rows]), y[rows])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(rows)
        return total / len(xs)

    curve = fit_epochs(TrainingCurve("downstream classifier"), epochs, train_epoch,
                       lambda: Validation(loss=_loss(model, validation, mean, std)),
                       modules=(model,), patience=patience)
    return model.eval(), mean, std, curve


@torch.no_grad()
def _loss(model: nn.Module, data: tuple[torch.Tensor, torch.Tensor] | None, mean: torch.Tensor,
          std: torch.Tensor) -> float:
    """Cross-entropy of ``model`` on ``data`` (standardized like the training inputs); nan if None."""
    if data is None or len(data[0]) == 0:
        return float("nan")
    return float(nn.functional.cross_entropy(model((data[0] - mean) / std), data[1]))


def held_out_rows(n: int, share: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded split of ``range(n)`` into (training rows, validation rows); the validation part
    holds ``round(share · n)`` rows, at least 1, leaving at least 2 to train on."""
    n_val = max(1, round(share * n))
    if n - n_val < 2:
        raise ValueError(f"holding out {n_val} of {n} downstream training texts for validation "
                         "leaves fewer than 2 to train on; raise train_examples or lower "
                         "classifier_validation")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return order[n_val:].sort().values, order[:n_val].sort().values


def downstream(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor,
               test_y: torch.Tensor, n_classes: int, *, epochs: int, generator: torch.Generator,
               validation_share: float, split_seed: int, patience: int | None = None
               ) -> tuple[dict[str, float], TrainingCurve]:
    """Accuracy and (macro one-vs-rest) AUC of the MLP trained on ``train_x`` less a held-out
    ``validation_share`` (its validation curve), tested on ``test_x``; returns metrics and curve."""
    fit, val = held_out_rows(len(train_x), validation_share, split_seed)
    fit, val = fit.to(train_x.device), val.to(train_x.device)
    model, mean, std, curve = train_classifier(train_x[fit], train_y[fit], n_classes,
                                               epochs=epochs, generator=generator,
                                               validation=(train_x[val], train_y[val]),
                                               patience=patience)
    with torch.no_grad():
        probs = torch.softmax(model((test_x - mean) / std), dim=-1)
    acc = float((probs.argmax(-1) == test_y).float().mean())
    return ({"accuracy": acc, "auc": _auc(test_y.cpu().numpy(), probs.cpu().numpy(), n_classes),
             "classifier_train_texts": float(len(fit)), "classifier_val_texts": float(len(val))},
            curve)


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
