"""DP-SGD's untrusted side: the model, trained in the server process from the noisy gradients.

Each step's noisy gradient crosses the wire (:mod:`dpkit_dped.releases`); :class:`GradientServer`
applies it, as it arrived, to its own copy of the model — the recipe's start (the public
skip-gram, trained in the server as DPED's is, or a random table drawn from a seed the server
derives) and optimiser — and returns the model it trained, which the client's evaluator scores.
The client applies the same steps to its own copy, which it needs to compute the next step's
per-document gradients (post-processing of what it released).
"""

from __future__ import annotations

from typing import Any

import torch

import dpkit
from dpkit_dped.releases import GRADIENT, TRAINED
from dpkit_dped.server import public_start
from dpkit_dped.skipgram import WordModel


INIT_STREAM = "dped-dpsgd-init"  # DP-SGD's random start, on the server's seed


def random_start(vocab_size: int, dim: int, seed: int) -> WordModel:
    """DP-SGD's random start (the recipe's uniform input table, zero output table), drawn from
    ``seed`` (a public number both sides derive from the server's seed)."""
    from dpkit_dped.sgd import SkipGramNS

    return SkipGramNS(vocab_size, dim, torch.Generator().manual_seed(seed)).word_model()


class GradientServer(dpkit.Server):
    """DP-SGD's server: applies each step's noisy gradient, as it arrived, to its own copy of the
    model (the same start and optimiser as the recipe's), keeps the gradients for the attacks and
    returns the model it trained on request."""

    @classmethod
    def public_data(cls, params: Any) -> list[tuple[str, dict]]:
        """The public corpus (the public start) when the recipe starts from it."""
        if params.init != "public":
            return []
        return [(params.public_data, dict(params.public_data_params))]

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.tables: list[torch.Tensor] = []
        self.optimizer: torch.optim.Optimizer | None = None
        self.steps = 0

    def start(self, vocab_size: int, dim: int) -> None:
        """The recipe's start, on the shape of the first gradient."""
        p = self.params
        if p.init == "public":
            start = public_start(self.public, p)[1]
        else:
            start = random_start(vocab_size, dim, self.public.numpy_seed(INIT_STREAM))
        if tuple(start.vectors.shape) != (vocab_size, dim):
            raise ValueError(f"a gradient of {vocab_size} × {dim} does not fit the public start "
                             f"of shape {tuple(start.vectors.shape)}")
        self.tables = [start.vectors.clone().to(self.public.device).requires_grad_(),
                       start.out_vectors.clone().to(self.public.device).requires_grad_()]
        self.optimizer = (torch.optim.SGD(self.tables, lr=p.lr, momentum=p.momentum)
                          if p.optimizer == "sgd" else torch.optim.Adam(self.tables, lr=p.lr))

    @dpkit.handles(GRADIENT)
    def step(self, message: dpkit.Message) -> None:
        """One optimiser step on a ``[2, V, d]`` noisy gradient (input and output tables)."""
        grads = message.tensor
        if grads.ndim != 3 or grads.shape[0] != 2:
            raise ValueError(f"a DP-SGD gradient is [2, V, d] (input and output tables), got "
                             f"{tuple(grads.shape)}")
        self.observe(message.name, message.rows, self.keep_rows)
        if self.optimizer is None:
            self.start(int(grads.shape[1]), int(grads.shape[2]))
        for table, grad in zip(self.tables, grads):
            table.grad = grad
        self.optimizer.step()  # type: ignore[union-attr]
        self.steps += 1

    @dpkit.handles(TRAINED)
    def trained(self, message: dpkit.Message) -> dict[str, Any]:
        """The model after every step that arrived."""
        if not self.tables:
            raise ValueError("the trained model was asked for before any gradient arrived")
        return {"vectors": self.tables[0].detach(), "out_vectors": self.tables[1].detach(),
                "steps": self.steps}
