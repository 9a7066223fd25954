"""One split training / inference step of HiddenEcho; every crossing goes through ``dpkit.Wire``."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dpkit import Wire
from dpkit_hiddenecho.denoiser import Downsampler, GatedResidualDenoiser, TaskHead
from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache
from dpkit_hiddenecho.mine import MineEstimator, sample_tokens, token_rows
from dpkit_hiddenecho.server import block_outputs


@dataclass(frozen=True)
class Layout:
    """What is sent and how it is corrected: chosen layers, where they are reduced, which parts run."""

    layers: tuple[int, ...]
    width: int
    reduce_on_server: bool
    denoise: bool = True
    residual: bool = True
    ib_alpha: float = 0.0
    ib_beta: float = 0.5
    mine_steps: int = 1
    mine_tokens: int = 256
    mine_hidden: int = 64
    heads: int = 4
    dropout: float = 0.1


class ClientModules(nn.Module):
    """Client side: E^dn map (Eq. 5; clean E never leaves the client), denoiser, head, MINE critics."""

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


class ServerModules(nn.Module):
    """Server side extras: the learned down-sampling maps (Eq. 4) and the I(E'; H^dn) critics."""

    def __init__(self, layout: Layout, dim: int) -> None:
        super().__init__()
        n = len(layout.layers)
        self.down = Downsampler(n, dim, layout.width) if layout.reduce_on_server else None
        self.mine_in = nn.ModuleList(MineEstimator(dim, layout.width, layout.mine_hidden)
                                     for _ in range(n if layout.ib_alpha > 0 else 0))


class SplitProtocol:
    """Client and server parts of one HiddenEcho deployment talking only through ``wire``.

    ``precision="bf16"`` runs the server's transformer blocks under bfloat16 autocast; everything
    else (weights, the server's down maps, the client modules, the critics, the losses) and every
    tensor that crosses the wire stays fp32.
    """

    def __init__(self, model, layout: Layout, n_classes: int, pooling: str,
                 wire: Wire, generator: torch.Generator,
                 frozen: FrozenBlockCache | None = None, precision: str = "fp32") -> None:
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
        if frozen is not None and frozen.precision != precision:
            raise ValueError(f"the frozen-block cache is at precision {frozen.precision!r}, the "
                             f"protocol at {precision!r}; build both with the same one")
        self.model, self.layout, self.wire, self.generator = model, layout, wire, generator
        self.frozen, self.precision = frozen, precision
        dim = model.hidden_size
        self.client = ClientModules(layout, dim, n_classes, pooling).to(model.device)
        self.server = ServerModules(layout, dim).to(model.device)
        self.critic_bounds: dict[str, list[float]] = {"server": [], "client": []}

    def trainable(self, side: str) -> list[nn.Parameter]:
        """Trainable parameters of ``"client"`` or ``"server"`` (LoRA + down maps); no critics."""
        if side == "client":
            mods = [self.client.emb_down, self.client.down, self.client.denoiser, self.client.head]
        else:
            mods = [self.model.server, self.server.down]
        return [p for m in mods if m is not None for p in m.parameters() if p.requires_grad]

    def train(self, mode: bool = True) -> None:
        """Switch client, server extras and the model body between training and evaluation."""
        for m in (self.client, self.server, self.model.server):
            m.train(mode)
        if self.frozen is not None:
            self.frozen.evaluation_mode()

    def server_forward(self, noisy: torch.Tensor, mask: torch.Tensor):
        """Server: run the body on the received noisy embeddings (under bfloat16 autocast with
        ``precision="bf16"``); returns the fp32 states to send (down-sampled in fp32)."""
        with torch.autocast(noisy.device.type, dtype=torch.bfloat16,
                            enabled=self.precision == "bf16"):
            if self.frozen is None:
                states = block_outputs(self.model, noisy, mask.long())
            else:
                with self.frozen.batch(noisy, mask):
                    states = block_outputs(self.model, noisy, mask.long())
        chosen = [states[i].float() for i in self.layout.layers]
        return self.server.down(chosen) if self.server.down is not None else chosen

    def client_forward(self, clean: torch.Tensor, received: list[torch.Tensor],
                       mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Client: correct the received states with the clean embeddings; (states, logits)."""
        c = self.client
        if c.denoiser is None:
            out = received[-1]
        else:
            hidden = c.down(received) if c.down is not None else received
            out = c.denoiser(c.emb_down(clean), hidden, mask)
        return out, c.head(out, mask)

    def step(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor,
             labels: torch.Tensor) -> float:
        """One training step; returns the task loss. Gradients cross the wire like activations."""
        w = self.wire
        noisy_s = w.send("embeddings", noisy, rows=mask)
        mask_s = w.send("mask", mask)
        sent = self.server_forward(noisy_s, mask_s)
        idx = sample_tokens(mask, self.layout.mine_tokens, self.generator)
        server_ib = self.ib_term(self.server.mine_in, token_rows(noisy_s, idx), sent, idx,
                                 "server")
        received = [w.reply("hidden_states", h, requires_grad=h.requires_grad) for h in sent]
        out, logits = self.client_forward(clean, received, mask)
        task = nn.functional.cross_entropy(logits, labels)
        client_ib = self.ib_term(self.client.mine_out, token_rows(out, idx), received, idx,
                                 "client")
        (task - self.layout.ib_alpha * self.layout.ib_beta * client_ib).backward()
        # Gradients go back only for states with something trainable behind them on the server.
        tensors = [h for h in sent if h.requires_grad]
        grad_outputs = [w.send("gradients", r.grad)
                        for r in received if r.requires_grad]
        if server_ib.requires_grad:
            tensors.append(self.layout.ib_alpha * server_ib)
            grad_outputs.append(None)
        if tensors:
            torch.autograd.backward(tensors, grad_outputs)
        w.end_batch()
        return float(task.detach())

    def ib_term(self, critics: nn.ModuleList, x: torch.Tensor, states: list[torch.Tensor],
                idx: torch.Tensor, side: str) -> torch.Tensor:
        """Mean MINE estimate of I(x; H_i^dn) over the sent layers (critics fitted first); the
        critics' mean bound after fitting is logged in ``critic_bounds[side]``."""
        if not len(critics):
            return torch.zeros((), device=x.device)
        total, fitted = 0.0, 0.0
        for critic, h in zip(critics, states):
            y = token_rows(h, idx)
            fitted += critic.fit(x, y, self.layout.mine_steps, self.generator)
            total = total + critic.estimate(x, y, self.generator)
        self.critic_bounds[side].append(fitted / len(critics))
        return total / len(critics)

    @torch.no_grad()
    def logits(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor,
               observe_rows: torch.Tensor | None = None, observe: bool = True) -> torch.Tensor:
        """Inference: class logits ``[B, C]``; with ``observe``, the attacks' view keeps the sent
        rows ``observe_rows`` (under ``"embeddings"``)."""
        w = self.wire
        noisy_s = w.send("embeddings", noisy, rows=mask,
                         observe="embeddings" if observe else None, observe_rows=observe_rows)
        mask_s = w.send("mask", mask)
        received = [w.reply("hidden_states", h) for h in self.server_forward(noisy_s, mask_s)]
        _, logits = self.client_forward(clean, received, mask)
        w.end_batch()
        return logits

    def predict(self, noisy: torch.Tensor, clean: torch.Tensor, mask: torch.Tensor,
                observe_rows: torch.Tensor | None = None) -> torch.Tensor:
        """Inference: class probabilities ``[B, C]`` (see :meth:`logits`)."""
        return self.logits(noisy, clean, mask, observe_rows).softmax(-1)
