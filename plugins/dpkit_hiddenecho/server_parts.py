"""Pieces of HiddenEcho's server: its maps and critics, its own random state, its body pass."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from dpkit import bf16_autocast
from dpkit_hiddenecho.body import block_outputs
from dpkit_hiddenecho.denoiser import Downsampler
from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache
from dpkit_hiddenecho.layout import Layout
from dpkit_hiddenecho.mine import MineEstimator, ib_term, sample_tokens, token_rows


class ServerModules(nn.Module):
    """The learned down-sampling maps (Eq. 4) and the I(E'; H^dn) critics."""

    def __init__(self, layout: Layout, dim: int) -> None:
        super().__init__()
        n = len(layout.layers)
        self.layout = layout
        self.down = Downsampler(n, dim, layout.width) if layout.reduce_on_server else None
        self.mine_in = nn.ModuleList(MineEstimator(dim, layout.width, layout.mine_hidden)
                                     for _ in range(n if layout.ib_alpha > 0 else 0))

    def ib_term(self, received: torch.Tensor, states: list[torch.Tensor], mask: torch.Tensor,
                generator: torch.Generator, bounds: list[float]) -> torch.Tensor | None:
        """The server's IB term I(E'; H^dn) on token positions drawn from ``mask`` (None
        without critics); each critic is fitted first and its bound logged in ``bounds``."""
        if not len(self.mine_in):
            return None
        idx = sample_tokens(mask, self.layout.mine_tokens, generator)
        return ib_term(self.mine_in, token_rows(received, idx), states, idx,
                       self.layout.mine_steps, generator, bounds)


def body_states(model, layers: tuple[int, ...], x: torch.Tensor, mask: torch.Tensor,
                frozen: FrozenBlockCache | None, precision: str) -> list[torch.Tensor]:
    """The outputs of blocks ``layers`` on inputs ``x`` (cast to fp32); the body runs under
    bfloat16 autocast with ``precision="bf16"`` and replays frozen blocks through ``frozen``."""
    with bf16_autocast(x.device.type, enabled=precision == "bf16"):
        if frozen is None:
            states = block_outputs(model, x, mask.long())
        else:
            with frozen.batch(x, mask):
                states = block_outputs(model, x, mask.long())
    return [states[i].float() for i in layers]


def trained_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """Copies of ``module``'s trainable parameters and its buffers, by name."""
    state = {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}
    state.update({name: b.detach().clone() for name, b in module.named_buffers()})
    return state


class OwnRandom:
    """The server's own torch random state (CPU, and CUDA on a GPU), seeded from its seed and
    swapped in around its work, so its draws neither depend on nor disturb anyone else's in the
    process (the same whether the server has a process of its own or runs in-process in a test)."""

    def __init__(self, seed: int, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.depth = 0
        with torch.random.fork_rng(devices=[self.device] if self.cuda else []):
            torch.manual_seed(seed)
            self.state = torch.get_rng_state()
            self.cuda_state = torch.cuda.get_rng_state(self.device) if self.cuda else None

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within this block torch's global generators are the server's own."""
        if self.depth:  # already active: one state, not a copy of it
            yield
            return
        self.depth += 1
        try:
            with torch.random.fork_rng(devices=[self.device] if self.cuda else []):
                torch.set_rng_state(self.state)
                if self.cuda:
                    torch.cuda.set_rng_state(self.cuda_state, self.device)
                try:
                    yield
                finally:
                    self.state = torch.get_rng_state()
                    if self.cuda:
                        self.cuda_state = torch.cuda.get_rng_state(self.device)
        finally:
            self.depth -= 1


def process_id() -> str:
    """This process, as host and pid (tells the client whether its server shares its process)."""
    return f"{socket.gethostname()}:{os.getpid()}"
