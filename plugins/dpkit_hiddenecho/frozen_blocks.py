"""The server's frozen lower blocks: run without dropout and computed once per example.

Below the first LoRA adapter nothing is trained and the received noisy embeddings are drawn once
and reused every epoch, so with dropout off those blocks return the same states for an example
in every epoch. :class:`FrozenBlockCache` keeps each example's outputs of those blocks (real
positions only, keyed by the bytes of the embeddings the server received) and replays them on
later passes instead of running the blocks again. This is server-side computation only: what
crosses the wire is unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn


def example_keys(received: torch.Tensor, mask: torch.Tensor) -> list[bytes]:
    """One digest per example of its received embedding rows at real (masked-in) positions."""
    rows = received.detach().cpu()
    lengths = mask.long().sum(1).tolist()
    keys = []
    for row, keep, n in zip(rows, mask.bool().cpu(), lengths):
        digest = hashlib.blake2b(row[keep].contiguous().numpy().tobytes(), digest_size=16)
        digest.update(str(n).encode())
        keys.append(digest.digest())
    return keys


class FrozenBlockCache:
    """Per-example outputs of ``blocks[:n_frozen]`` (frozen, evaluation mode), replayed on reuse.

    Install it once on the server body; wrap every server forward in :meth:`batch` (with
    ``reuse`` off it only keeps the blocks in evaluation mode). A forward
    outside :meth:`batch`, or one where some example of the batch is new, runs the blocks; a
    forward where every example was seen replays their stored states (zeros at padding
    positions, which the attention mask hides from every later block).
    """

    def __init__(self, body: nn.Module, blocks: nn.ModuleList, n_frozen: int,
                 reuse: bool = True) -> None:
        if not 0 < n_frozen <= len(blocks):
            raise ValueError(f"FrozenBlockCache needs 0 < n_frozen ≤ {len(blocks)} blocks, got "
                             f"{n_frozen}")
        self.blocks = list(blocks)[:n_frozen]
        adapted = {id(m) for block in list(blocks)[n_frozen:] for m in block.modules()}
        # the embedding layer's dropout feeds the first block, so it must be off as well
        self.dropouts = [m for m in body.modules()
                         if isinstance(m, nn.Dropout) and id(m) not in adapted]
        for block in self.blocks:
            if any(p.requires_grad for p in block.parameters()):
                raise ValueError("FrozenBlockCache: a block below the adapters has trainable "
                                 "parameters, so its outputs change during training; cache "
                                 "only frozen blocks")
        self.store: dict[bytes, list[torch.Tensor]] = {}
        self.keys: list[bytes] | None = None
        self.masks = torch.zeros(0, 0, dtype=torch.bool)
        self.reuse = reuse
        self.replay = False
        self.as_tuple = False
        self.disabled = False  # a block returned more than its states: nothing is replayed
        self.hits = 0
        self.misses = 0
        for index, block in enumerate(self.blocks):
            block.forward = self._wrap(index, block.forward)

    def evaluation_mode(self) -> None:
        """Put the frozen blocks and every dropout outside the adapted blocks in evaluation
        mode, whatever the body's mode."""
        for module in (*self.blocks, *self.dropouts):
            module.eval()

    @contextmanager
    def batch(self, received: torch.Tensor, mask: torch.Tensor) -> Iterator[None]:
        """Within this block, forwards of the body may replay the examples' stored states."""
        if not self.reuse:
            yield
            return
        self.keys, self.masks = example_keys(received, mask), mask.bool()
        self.replay = (not self.disabled and not any(b.training for b in self.blocks)
                       and all(key in self.store for key in self.keys))
        self.hits += len(self.keys) if self.replay else 0
        self.misses += 0 if self.replay else len(self.keys)
        try:
            yield
        finally:
            self.keys = None

    def _wrap(self, index: int, forward: Callable) -> Callable:
        def cached_forward(hidden_states: torch.Tensor, *args, **kwargs):
            keys = self.keys
            if keys is None or self.blocks[index].training:
                return forward(hidden_states, *args, **kwargs)
            if self.replay:
                return self._replay(index, hidden_states, keys)
            out = forward(hidden_states, *args, **kwargs)
            self.as_tuple = isinstance(out, tuple)
            self.disabled |= self.as_tuple and len(out) > 1
            states = out[0] if self.as_tuple else out
            for key, row, real in zip(keys, states.detach(), self.masks):
                entry = self.store.setdefault(key, [])
                if len(entry) == index:  # an example met again beside new ones keeps its states
                    entry.append(row[real].clone())
            return out

        return cached_forward

    def _replay(self, index: int, hidden_states: torch.Tensor, keys: list[bytes]):
        out = hidden_states.new_zeros(hidden_states.shape)
        for row, (key, real) in enumerate(zip(keys, self.masks)):
            out[row, real] = self.store[key][index]
        return (out,) if self.as_tuple else out
