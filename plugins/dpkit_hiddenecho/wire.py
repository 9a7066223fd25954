"""A metered client–server wire: every tensor that crosses it is counted in bytes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import torch

UP = "up"
DOWN = "down"


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of ``tensor`` as sent: element count times element size."""
    return tensor.numel() * tensor.element_size()


@dataclass
class WireMeter:
    """Counts bytes client→server (``up``) and server→client (``down``) by phase, kind and batch.

    ``transfer`` is the only way data crosses between the two parties in this plug-in: it counts
    the tensor and hands the receiver a detached copy, so the receiver's autograd graph cannot
    reach back into the sender's (gradients must be sent back explicitly, and are metered too).
    """

    phase: str = "train"
    totals: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    batches: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def transfer(self, tensor: torch.Tensor, direction: str, kind: str,
                 requires_grad: bool = False) -> torch.Tensor:
        """Send ``tensor`` one way; returns the receiver's detached copy (a leaf if ``requires_grad``)."""
        if direction not in (UP, DOWN):
            raise ValueError(f"wire direction must be {UP!r} or {DOWN!r}, got {direction!r}")
        self.totals[(self.phase, direction, kind)] += tensor_bytes(tensor)
        received = tensor.detach()
        return received.requires_grad_(True) if requires_grad else received

    def end_batch(self) -> None:
        """Mark the end of one batch of the current phase."""
        self.batches[self.phase] += 1

    def bytes(self, phase: str | None = None, direction: str | None = None,
              kind: str | None = None) -> int:
        """Total bytes so far, optionally restricted to a phase, a direction and/or a kind."""
        return sum(n for (p, d, k), n in self.totals.items()
                   if (phase is None or p == phase) and (direction is None or d == direction)
                   and (kind is None or k == kind))

    def per_batch(self, phase: str, direction: str | None = None) -> float:
        """Mean bytes per batch of ``phase`` (0 when no batch ran)."""
        n = self.batches.get(phase, 0)
        return self.bytes(phase, direction) / n if n else 0.0

    def summary(self) -> dict[str, int]:
        """Flat totals ``{"train_up_embeddings": bytes, ..., "total": bytes}``."""
        out = {f"{p}_{d}_{k}": n for (p, d, k), n in sorted(self.totals.items())}
        out["total"] = self.bytes()
        return out
