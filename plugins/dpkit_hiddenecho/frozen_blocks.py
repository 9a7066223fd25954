"""The server's frozen lower blocks: run without dropout and computed once per example.

Below the first LoRA adapter nothing is trained and the received noisy embeddings are drawn once
and reused every epoch, so with dropout off those blocks return the same states for an example
in every epoch. :class:`FrozenBlockCache` keeps each example's outputs of those blocks (real
positions only, keyed by the bytes of the embeddings the server received) and replays them on
later passes instead of running the blocks again. The store belongs to one server, that is to
one cell: a server process never holds another cell's states. This is server-side computation
only: what crosses the wire is unchanged.

States computed under bfloat16 autocast (``precision="bf16"``) differ from fp32 ones by rounding,
so every store holds one precision: a cache refuses a store of the other precision and a forward
run at a precision other than its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

MAX_STORED_BYTES = 4 * 2**30
PRECISIONS = ("fp32", "bf16")


class StateStore(dict):
    """Example key -> that example's states after each frozen block, all computed at
    ``precision``; ``nbytes`` held in all."""

    nbytes: int = 0

    def __init__(self, precision: str = "fp32") -> None:
        super().__init__()
        self.precision = _checked(precision)


def _checked(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


def active_precision(device_type: str) -> str:
    """``"bf16"`` inside bfloat16 autocast on ``device_type``, ``"fp32"`` outside autocast
    (another autocast dtype is named by its torch dtype)."""
    if not torch.is_autocast_enabled(device_type):
        return "fp32"
    dtype = torch.get_autocast_dtype(device_type)
    return "bf16" if dtype == torch.bfloat16 else str(dtype)


def example_keys(received: torch.Tensor, mask: torch.Tensor) -> list[bytes]:
    """One digest per example of its received embedding rows at real (masked-in) positions and
    of where those positions are (absolute position embeddings see the offset)."""
    rows, keep = received.detach().cpu(), mask.bool().cpu()
    keys = []
    for row, real in zip(rows, keep):
        digest = hashlib.blake2b(row[real].contiguous().numpy().tobytes(), digest_size=16)
        digest.update(real.nonzero().flatten().numpy().tobytes())
        keys.append(digest.digest())
    return keys


class FrozenBlockCache:
    """Per-example outputs of ``blocks[:n_frozen]`` (frozen, evaluation mode), replayed on reuse.

    Install it once on the server body; wrap every server forward in :meth:`batch` (with
    ``reuse`` off it only keeps the blocks in evaluation mode). A forward
    outside :meth:`batch`, or one where some example of the batch is new, runs the blocks; a
    forward where every example was seen replays their stored states (zeros at padding
    positions, which the attention mask hides from every later block). ``precision`` is the
    one the body runs at (``"bf16"``: under bfloat16 autocast); :meth:`batch` refuses a forward
    at another one, and ``store`` must hold states of that precision.
    """

    def __init__(self, body: nn.Module, blocks: nn.ModuleList, n_frozen: int,
                 reuse: bool = True, store: StateStore | None = None,
                 max_bytes: int = MAX_STORED_BYTES, precision: str = "fp32") -> None:
        if not 0 < n_frozen <= len(blocks):
            raise ValueError(f"FrozenBlockCache needs 0 < n_frozen ≤ {len(blocks)} blocks, got "
                             f"{n_frozen}")
        self.precision = _checked(precision)
        if store is not None and store.precision != precision:
            raise ValueError(f"FrozenBlockCache at precision {precision!r} was given a store of "
                             f"{store.precision!r} states; use StateStore(precision="
                             f"{precision!r})")
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
        self.store = StateStore(precision) if store is None else store
        self.max_bytes = max_bytes
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
        active = active_precision(received.device.type)
        if active != self.precision:
            raise RuntimeError(f"FrozenBlockCache holds {self.precision} states but the body "
                               f"runs at {active}; run the forward at the cache's precision "
                               "(bf16: inside torch.autocast(..., dtype=torch.bfloat16))")
        self.keys, self.masks = example_keys(received, mask), mask.bool()
        n = len(self.blocks)
        self.replay = (not self.disabled and not any(b.training for b in self.blocks)
                       and all(len(self.store.get(key, ())) == n for key in self.keys))
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
                entry = self.store.get(key)
                if entry is None:
                    if self.store.nbytes > self.max_bytes:
                        continue  # full: later batches with this example run the blocks
                    entry = self.store[key] = []
                if len(entry) == index:  # an example met again beside new ones keeps its states
                    entry.append(row[real].clone())
                    self.store.nbytes += entry[-1].numel() * entry[-1].element_size()
            return out

        return cached_forward

    def _replay(self, index: int, hidden_states: torch.Tensor, keys: list[bytes]):
        # in the stored dtype: the block's output dtype when it was computed
        dtype = self.store[keys[0]][index].dtype if keys else None
        out = hidden_states.new_zeros(hidden_states.shape, dtype=dtype)
        for row, (key, real) in enumerate(zip(keys, self.masks)):
            out[row, real] = self.store[key][index]
        return (out,) if self.as_tuple else out
