"""Server-side fine-tuning and inference of an (obfuscated) encoder with a classification head.

The server only ever receives token ids (obfuscated ids under ObfusLM), attention masks and
labels; it trains the whole model plus a linear head on mean-pooled states (MiniLM's pooling),
as the paper fine-tunes all BERT parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from dpkit import TrainingCurve, Validation, bf16_autocast, fit_epochs, mean_pool


@dataclass
class Encoded:
    """A tokenized split: ids and mask ``[N, T]`` (original or obfuscated ids) and labels ``[N]``."""

    ids: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def documents(self) -> list[torch.Tensor]:
        """Each document's ids without padding."""
        return [row[m.bool()] for row, m in zip(self.ids, self.mask)]


class EncoderClassifier(nn.Module):
    """A Hugging Face encoder body plus a linear head on mean-pooled last hidden states;
    ``precision="bf16"`` runs the body under bfloat16 autocast (the head and loss stay fp32)."""

    def __init__(self, body: nn.Module, hidden_size: int, num_labels: int,
                 precision: str = "fp32"):
        super().__init__()
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
        self.body = body
        self.head = nn.Linear(hidden_size, num_labels)
        self.precision = precision

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Class logits ``[B, C]`` (fp32)."""
        with bf16_autocast(ids.device.type, enabled=self.precision == "bf16"):
            hidden = self.body(input_ids=ids, attention_mask=mask).last_hidden_state
        return self.head(mean_pool(hidden.float(), mask))


GROUP_BATCHES = 8  # batches per length-sorted window of group_by_length


def epoch_batches(data: Encoded, batch_size: int, generator: torch.Generator,
                  group_by_length: bool = False) -> list[torch.Tensor]:
    """One epoch's batches of indices: a random permutation cut into batches. With
    ``group_by_length`` each window of GROUP_BATCHES batches of that permutation is sorted by
    length before cutting and the batches are shuffled (Hugging Face's ``group_by_length``, in
    small windows): every batch is still a random draw, with far less padding."""
    order = torch.randperm(len(data), generator=generator, device=generator.device).cpu()
    if not group_by_length:
        return list(order.split(batch_size))
    lengths = data.mask.sum(1)
    batches = []
    for window in order.split(batch_size * GROUP_BATCHES):
        window = window[torch.argsort(lengths[window], descending=True, stable=True)]
        batches.extend(window.split(batch_size))
    shuffle = torch.randperm(len(batches), generator=generator, device=generator.device).cpu()
    return [batches[int(i)] for i in shuffle]


def validation_rounds(data: Encoded, epochs: int, batch_size: int, generator: torch.Generator,
                      group_by_length: bool = False,
                      every: int | None = None) -> Iterator[list[torch.Tensor]]:
    """The batches of ``epochs`` epochs, grouped into validation rounds: one epoch each, or
    (``every``) the batches up to each multiple of ``every`` training texts, across epochs; a
    last partial round is kept. Each epoch's order is drawn when the epoch starts."""
    pending: list[torch.Tensor] = []
    seen, mark = 0, every
    for _ in range(epochs):
        for idx in epoch_batches(data, batch_size, generator, group_by_length):
            pending.append(idx)
            seen += len(idx)
            if mark is not None and seen >= mark:
                yield pending
                pending, mark = [], mark + every
        if every is None:
            yield pending
            pending = []
    if pending:
        yield pending


def fine_tune(model: EncoderClassifier, data: Encoded, *, epochs: int, batch_size: int,
              lr: float, head_lr: float, generator: torch.Generator, say=lambda msg: None,
              validation: Encoded | None = None, patience: int | None = None,
              stop_on: str = "loss", group_by_length: bool = False,
              validate_every: int | None = None) -> TrainingCurve:
    """Train body and head with AdamW on shuffled batches (see :func:`epoch_batches`) for at
    most ``epochs`` epochs; returns the curve with one point per validation round (each epoch,
    or every ``validate_every`` texts): mean training loss, and cross-entropy and accuracy on
    ``validation`` when given. With ``patience``, stop once the validation ``stop_on``
    (``"loss"`` or ``"accuracy"``) has not improved for that many rounds and keep the best
    round's model."""
    device = next(model.parameters()).device
    unit = "epoch" if validate_every is None else f"round of {validate_every} texts"
    curve = TrainingCurve("server fine-tuning", unit=unit, val_metric_name="accuracy")
    if patience is not None and (validation is None or len(validation) == 0):
        raise ValueError(f"fine_tune: patience={patience} stops on the validation texts, but no "
                         "validation texts were given")
    if stop_on not in ("loss", "accuracy"):
        raise ValueError(f"fine_tune: stop_on must be 'loss' or 'accuracy', got {stop_on!r}")
    opt = torch.optim.AdamW([{"params": model.body.parameters(), "lr": lr},
                             {"params": model.head.parameters(), "lr": head_lr}],
                            fused=device.type in ("cpu", "cuda"))
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def train_round(batches: list[torch.Tensor]) -> float:
        total, count = torch.zeros((), device=device), 0
        for idx in batches:
            ids, mask = _trim(data.ids[idx], data.mask[idx])
            loss = loss_fn(model(ids.to(device), mask.to(device)), data.labels[idx].to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach() * len(idx)
            count += len(idx)
        return float(total) / count

    def validate() -> Validation:
        val_loss, val_accuracy = validation_scores(model, validation)
        model.train()
        say(f"{unit} {len(curve.steps) + 1}: validation loss {val_loss:.4f}, "
            f"accuracy {val_accuracy:.4f}")
        return Validation(loss=val_loss, metric=val_accuracy)

    fit_epochs(curve, validation_rounds(data, epochs, batch_size, generator, group_by_length,
                                        validate_every),
               train_round, validate, modules=(model,), patience=patience,
               watch="loss" if stop_on == "loss" else "metric")
    if curve.stopped_early:
        say(f"validation {stop_on} not improved for {patience} rounds; keeping {unit} "
            f"{curve.best_step}")
    model.eval()
    return curve


@torch.no_grad()
def validation_scores(model: EncoderClassifier, data: Encoded | None,
                      batch_size: int = 128) -> tuple[float, float]:
    """Mean cross-entropy and accuracy over ``data`` in eval mode (``nan`` when there is none)."""
    if data is None or len(data) == 0:
        return float("nan"), float("nan")
    if data.labels is None:
        raise ValueError("validation loss needs labelled validation texts; these have no labels")
    device = next(model.parameters()).device
    model.eval()
    total, right = 0.0, 0
    for idx in _by_length(data, batch_size):
        ids, mask = _trim(data.ids[idx], data.mask[idx])
        logits = model(ids.to(device), mask.to(device))
        labels = data.labels[idx].to(device)
        total += float(nn.functional.cross_entropy(logits, labels, reduction="sum"))
        right += int((logits.argmax(1) == labels).sum())
    return total / len(data), right / len(data)


@torch.no_grad()
def predict(model: EncoderClassifier, data: Encoded, batch_size: int = 128) -> torch.Tensor:
    """Predicted labels ``[N]`` (on CPU)."""
    device = next(model.parameters()).device
    model.eval()
    out = torch.empty(len(data), dtype=torch.long)
    for idx in _by_length(data, batch_size):
        ids, mask = _trim(data.ids[idx], data.mask[idx])
        out[idx] = model(ids.to(device), mask.to(device)).argmax(1).cpu()
    return out


def accuracy(model: EncoderClassifier, data: Encoded) -> float:
    """Share of correctly predicted labels."""
    return float((predict(model, data) == data.labels.cpu()).float().mean())


def _by_length(data: Encoded, batch_size: int) -> list[torch.Tensor]:
    """Evaluation batches of texts of similar length (less padding; scores do not depend on it)."""
    return list(torch.argsort(data.mask.sum(1), stable=True).split(batch_size))


def _trim(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop padding columns no row of the batch uses (right padding)."""
    width = max(int(mask.sum(1).max()), 1)
    return ids[:, :width], mask[:, :width]
