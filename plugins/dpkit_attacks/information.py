"""Kozachenko–Leonenko k-NN entropy and the mutual information of a noise mechanism (SnD App. A.6)."""

from __future__ import annotations

from typing import ClassVar

import torch

from dpkit import Component, ServerView, kl_mutual_information
from dpkit_attacks.params import MutualInformationParams


class MutualInformation(Component):
    """Mutual information between clean and privatized token embeddings (k-NN estimate, nats)."""

    name: ClassVar[str] = "mutual_information"
    requires: ClassVar[tuple[str, ...]] = ("embeddings",)
    Params = MutualInformationParams

    params: MutualInformationParams

    def run(self, view: ServerView, ctx) -> dict[str, torch.Tensor | None]:
        """What the measurement needs from the view: the noisy vectors and the public table."""
        space = view.knowledge.get("space")
        return {"noisy": view.observed["embeddings"],
                "table": None if space is None else space.vectors}

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """``mutual_information``: needs ``truth['embeddings']`` (clean) or the table + true ids."""
        noisy = guesses["noisy"]
        clean = truth.get("embeddings")
        if clean is None:
            ids = truth["token_ids"].to(noisy.device)
            keep = ids >= 0
            clean = guesses["table"].to(noisy.device)[ids[keep]]
            noisy = noisy[keep]
        n = min(len(noisy), self.params.max_samples)
        return {"mutual_information": kl_mutual_information(clean[:n].float(), noisy[:n].float(),
                                                            self.params.k)}
