"""Example dpkit plug-in: k-ary randomized response on tokens (ε-DP per token).

Copy this folder, rename the package and the entry point, replace the mechanism.
"""

from __future__ import annotations

import math

import dp_accounting
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import DpGuarantee


class RandomizedResponse:
    """Keep each token with probability e^ε/(e^ε+V−1), else draw another token uniformly."""

    name = "randomized_response"
    domain = "token"

    class Params(dpkit.Params):
        epsilon: float = Field(1.0, gt=0, le=50, description="ε per token")

    def __init__(self, params: Params):
        self.params = params

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> DpGuarantee:
        """Pure ε-DP per token (δ = 0), whatever the vocabulary."""
        event = dp_accounting.EpsilonDeltaDpEvent(self.params.epsilon, 0.0)
        return DpGuarantee(event, f"{self.params.epsilon}-DP k-ary randomized response per token")

    def keep_probability(self, vocab_size: int) -> float:
        """Probability of returning the input token."""
        return 1.0 / (1.0 + (vocab_size - 1) * math.exp(-self.params.epsilon))

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace | None,
                  generator: torch.Generator) -> torch.Tensor:
        """Randomize a sequence of token ids ``[n]`` (batched; no loop over tokens)."""
        if space is None:
            raise ValueError("randomized_response needs the vocabulary (space) to draw from")
        v = space.size
        keep = torch.rand(x.shape, generator=generator, device=x.device) < self.keep_probability(v)
        # a uniform draw among the V-1 other tokens: shift by 1..V-1 modulo V
        shift = torch.randint(1, v, x.shape, generator=generator, device=x.device)
        return torch.where(keep, x, (x + shift) % v)

    def output_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Exact ``[n, V]`` log-probabilities of each output token (for the auditor)."""
        v = space.size
        p_keep = self.keep_probability(v)
        out = torch.full((ids.numel(), v), math.log((1 - p_keep) / (v - 1)))
        out[torch.arange(ids.numel()), ids.flatten().cpu()] = math.log(p_keep)
        return out


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    register(RandomizedResponse)
