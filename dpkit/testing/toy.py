"""A toy plug-in (generated data, a random space, a noisy defense, an attack) for tests and demos.

Load it with ``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy`` or ``dpkit.contract.plugins.register_plugin``.
Nothing here is a research method; it exercises the runner, the ledger and the reports in seconds.
Its guarantee is still declared correctly (a test double that over-claims would teach the wrong
thing).
"""

from __future__ import annotations

import time

import dp_accounting
import torch
from pydantic import Field

from dpkit.accounting import DpGuarantee
from dpkit.contract.component import Component
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.contract.protocols import DefenseResult, ServerView
from dpkit.contract.releases import declare_releases
from dpkit.text.space import EmbeddingSpace
from dpkit.release.wire import Release

WORDS = [f"w{i}" for i in range(40)]


class ToyText(Component):
    """Generated sentences over 40 words, two labels."""

    name = "toy_text"

    class Params(Params):
        n_docs: int = Field(24, ge=2, le=10_000)
        seed: int = 0

    def load(self) -> TextDataset:
        """Seeded random documents split 50/50."""
        g = torch.Generator().manual_seed(self.params.seed)
        docs = [" ".join(WORDS[i] for i in torch.randint(0, 40, (8,), generator=g).tolist())
                for _ in range(self.params.n_docs)]
        labels = [i % 2 for i in range(self.params.n_docs)]
        half = self.params.n_docs // 2
        return TextDataset("toy_text", {"train": TextSplit(docs[:half], labels[:half]),
                                        "test": TextSplit(docs[half:], labels[half:])}, ("a", "b"))


class ToySpace(Component):
    """A random 40×8 embedding space."""

    name = "toy_space"

    class Params(Params):
        dim: int = Field(8, ge=1, le=512)

    def load(self, device: torch.device) -> EmbeddingSpace:
        """Seeded Gaussian vectors on ``device``."""
        g = torch.Generator().manual_seed(1)
        return EmbeddingSpace("toy_space", WORDS, torch.randn(40, self.params.dim, generator=g)
                              ).to(device)


class ToyNoise(Component):
    """Adds Gaussian noise of standard deviation 1/eta to token embeddings, declared (ε, δ)-DP.

    Gaussian noise gives no η-dχ guarantee (its privacy loss is unbounded in the tails), so each
    token release is declared as the Gaussian mechanism: ``GaussianDpEvent(σ/Δ)`` with σ = 1/eta
    and Δ the largest L2 distance between two vocabulary vectors (replacing one token moves its
    embedding by at most Δ). The ledger composes one event per released token.
    """

    name = "toy_noise"

    class Params(Params):
        eta: float = Field(1.0, gt=0)
        fail: bool = False
        sleep: float = Field(0.0, ge=0)

    def releases(self, ctx) -> list[Release]:
        """One Gaussian release per test token (the noisy embeddings sent to the server)."""
        space: EmbeddingSpace = ctx.model
        n = sum(len(d) for d in space.encode(ctx.dataset["test"].texts))
        return [Release("embeddings", self.guarantee(space), "toy_noise", count=n)]

    def run(self, ctx) -> DefenseResult:
        """Noise every test token, send it; utility is the share still nearest to itself."""
        if self.params.fail:
            raise RuntimeError("toy_noise was asked to fail")
        time.sleep(self.params.sleep)
        declare_releases(self, ctx)
        space: EmbeddingSpace = ctx.model
        ids = torch.cat(space.encode(ctx.dataset["test"].texts)).to(ctx.device)
        clean = space.vectors[ids]
        noise = torch.randn(clean.shape, generator=ctx.noise_generator("noise"), device=ctx.device)
        noisy = clean + noise / self.params.eta
        ctx.wire.send("embeddings", noisy)  # the passive dpkit.Server keeps every row
        nearest = torch.cdist(noisy, space.vectors).argmin(dim=1)
        return DefenseResult(metrics={"preserved": float((nearest == ids).float().mean())},
                             truth={"token_ids": ids})

    def guarantee(self, space: EmbeddingSpace) -> DpGuarantee:
        """The Gaussian mechanism on one token: noise multiplier σ/Δ (Δ: the space's diameter)."""
        diameter = float(torch.cdist(space.vectors.float(), space.vectors.float()).max())
        sigma = 1.0 / self.params.eta
        return DpGuarantee(dp_accounting.GaussianDpEvent(sigma / diameter),
                           f"Gaussian σ={sigma:.4g} on embeddings, L2 sensitivity {diameter:.4g}")


class ToyAttack(Component):
    """Guesses each token as the nearest vocabulary vector."""

    name = "toy_attack"
    requires = ("embeddings",)

    class Params(Params):
        pass

    def run(self, view: ServerView, ctx) -> torch.Tensor:
        """The nearest vocabulary id of each observed vector."""
        table = view.knowledge["space"].vectors
        return torch.cdist(view.observed["embeddings"], table).argmin(dim=1)

    def score(self, guesses: torch.Tensor, truth: dict) -> dict[str, float]:
        """Top-1 recovery rate."""
        return {"toy_top1": float((guesses == truth["token_ids"]).float().mean())}


@hookimpl
def dpkit_register_datasets(register):
    register(ToyText)


@hookimpl
def dpkit_register_models(register):
    register(ToySpace)


@hookimpl
def dpkit_register_defenses(register):
    register(ToyNoise)


@hookimpl
def dpkit_register_attacks(register):
    register(ToyAttack)
