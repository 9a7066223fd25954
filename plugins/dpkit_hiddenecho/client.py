"""The client's half of a HiddenEcho deployment: its modules and its side of every wire exchange.

The client holds the clean embeddings (they never leave it), the labels, the E^dn map, the
denoiser, the task head and its MINE critics. Per training step it sends the batch's noisy
embeddings up (padding rows zeroed), gets the server's hidden states back as its answer, trains
its own modules, and sends up the gradients of the states the server has trainable parts behind;
the server steps its own optimizer on them (:mod:`dpkit_hiddenecho.server`).
"""

from __future__ import annotations

import torch
from torch import nn

from dpkit import Wire
from dpkit_hiddenecho.denoiser import Downsampler, GatedResidualDenoiser, TaskHead
from dpkit_hiddenecho.layout import Layout
from dpkit_hiddenecho.mine import MineEstimator, ib_term, sample_tokens, token_rows

PADDING = 0.0
"""The value of the padding rows of an embeddings upload (the wire verifies them)."""


def zero_padding(noisy: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``noisy`` ``[B, n, d]`` with the rows outside ``mask`` set to :data:`PADDING`."""
    return noisy.masked_fill(~mask.bool().unsqueeze(-1), PADDING)


class ClientModules(nn.Module):
    """E^dn map (Eq. 5; clean E never leaves the client), denoiser, head, I(H^den; H^dn) critics."""

    def __init__(self, layout: Layout, dim: int, n_classes: int, pooling: str) -> None:
        super().__init__()
        n = len(layout.layers)
        self.emb_down = nn.Linear(dim, layout.width) if layout.denoise else None
        self.down = (Downsampler(n, dim, layout.width)
                     if layout.denoise and not layout.reduce_on_server else None)
        self.denoiser = (GatedResidualDenoiser(n, layout.width, dim, layout.heads, layout.dropout,
                                               layout.residual) if layout.denoise else None)
        self.head = TaskHead(dim, n_classes, pooling)
        self.mine_out = nn.ModuleList(MineEstimator(dim, layout.width, layout.mine_hidden)
                                      for _ in range(n if layout.ib_alpha > 0 else 0))


class SplitClient:
    """Client modules and the conversation with the server over ``wire`` (see the module);
    ``model`` is the client's own copy of the public model (tokenizer, input embeddings)."""

    def __init__(self, model, layout: Layout, n_classes: int, pooling: str, wire: Wire,
                 generator: torch.Generator) -> None:
        self.model, self.layout, self.wire, self.generator = model, layout, wire, generator
        self.modules = ClientModules(layout, model.hidden_size, n_classes, pooling).to(model.device)
        self.critic_bounds: list[float] = []

    def trainable(self) -> list[nn.Parameter]:
        """The client's trainable parameters (the critics have their own optimizers)."""
        m = self.modules
        return [p for part in (m.emb_down, m.down, m.denoiser, m.head) if part is not None
                for p in part.parameters() if p.requires_grad]

    def train(self, mode: bool = True) -> None:
        """Switch the client modules between training and evaluation."""
        self.modules.train(mode)

    def upload(self, noisy: torch.Tensor, mask: torch.Tensor) -> tuple[list[torch.Tensor], list[int]]:
        """Send the noisy embeddings ``[B, n, d]`` (padding rows zeroed) in the wire's current
        phase; the server's hidden states and which of them it wants gradients for."""
        answer = self.wire.send("embeddings", zero_padding(noisy, mask))
        return list(answer["states"]), [int(i) for i in answer["needs_grad"]]

    def forward(self, clean: torch.Tensor, received: list[torch.Tensor],
                mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Correct the received states with the clean embeddings; (states, logits)."""
        m = self.modules
        if m.denoiser is None:
            out = received[-1]
        else:
            hidden = m.down(received) if m.down is not None else received
            out = m.denoiser(m.emb_down(clean), hidden, mask)
        return out, m.head(out, mask)

    def step(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor,
             labels: torch.Tensor) -> float:
        """One training step of the client's side; returns the task loss. The gradients of the
        states the server asked for go up in one send (the server steps its optimizer)."""
        received, needs_grad = self.upload(noisy, mask)
        for i in needs_grad:
            received[i].requires_grad_(True)
        task, objective = self.objective(clean, received, mask, labels)
        objective.backward()
        grads = [received[i].grad if received[i].grad is not None
                 else torch.zeros_like(received[i]) for i in needs_grad]
        self.wire.send("gradients", torch.stack(grads) if grads else torch.zeros(0))
        self.wire.end_batch()
        return float(task.detach())

    def objective(self, clean: torch.Tensor, received: list[torch.Tensor], mask: torch.Tensor,
                  labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The task loss and what the client minimises: the task loss less α·β·I(H^den; H^dn)
        (MINE, on tokens sampled from the client's training generator)."""
        out, logits = self.forward(clean, received, mask)
        task = nn.functional.cross_entropy(logits, labels)
        idx = sample_tokens(mask, self.layout.mine_tokens, self.generator)
        client_ib = ib_term(self.modules.mine_out, token_rows(out, idx), received, idx,
                            self.layout.mine_steps, self.generator, self.critic_bounds)
        return task, task - self.layout.ib_alpha * self.layout.ib_beta * client_ib

    @torch.no_grad()
    def logits(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Inference: class logits ``[B, C]`` (the server keeps what the attacks see in phase
        ``eval``)."""
        received, _ = self.upload(noisy, mask)
        _, logits = self.forward(clean, received, mask)
        self.wire.end_batch()
        return logits

    def predict(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Inference: class probabilities ``[B, C]``."""
        return self.logits(noisy, clean, mask).softmax(-1)
