"""The noiseless row of a method built on a noisy embedding mechanism: nothing drawn, ε = ∞."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.text.noise import clip_norms

if TYPE_CHECKING:
    import torch


class Noiseless:
    """The noiseless ceiling (η = ∞) of a method built on a noisy embedding mechanism: rows pass
    unchanged (clipped to ``bound`` when given), nothing is drawn, and the guarantee is none
    (ε = ∞, with ``reason``)."""

    def __init__(self, reason: str, bound: float | None = None):
        self.reason = reason
        self.bound = bound

    def guarantee(self, space: Any = None) -> NoGuarantee:
        """No guarantee: nothing is added."""
        return NoGuarantee(self.reason)

    def privatize(self, x: torch.Tensor, *, space: Any = None,
                  generator: torch.Generator | None = None) -> torch.Tensor:
        """The rows of ``x`` unchanged (clipped to ``bound``); ``generator`` is not used."""
        return clip_norms(x.float().clone(), self.bound).reshape(x.shape)
