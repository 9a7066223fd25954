"""Client-side data preparation: tokenize once, draw the dχ noise once per token, batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass
class PrivateSplit:
    """Unpadded token ids, their noisy embeddings (noise drawn once) and the labels of one split."""

    ids: list[torch.Tensor]
    noisy: list[torch.Tensor]
    labels: torch.Tensor

    @property
    def n_tokens(self) -> int:
        """Real (non-padding) tokens released, i.e. noisy embeddings that may cross the wire."""
        return sum(int(t.numel()) for t in self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def validation_size(n: int, fraction: float) -> int:
    """Examples held out for validation from ``n`` training examples (0 when ``fraction`` is 0)."""
    if fraction <= 0:
        return 0
    held = max(1, round(fraction * n))
    if n - held < 2:
        raise ValueError(f"val_fraction={fraction} of {n} training examples leaves {n - held} to "
                         "train on; use more training examples or a smaller val_fraction")
    return held


def hold_out(split: PrivateSplit, n_val: int) -> tuple[PrivateSplit, PrivateSplit]:
    """The first ``len - n_val`` examples to train on and the last ``n_val`` to validate on."""
    cut = len(split) - n_val
    return (PrivateSplit(split.ids[:cut], split.noisy[:cut], split.labels[:cut]),
            PrivateSplit(split.ids[cut:], split.noisy[cut:], split.labels[cut:]))


def tokenize_unpadded(model, texts: list[str], max_length: int,
                      chunk: int = 256) -> list[torch.Tensor]:
    """Token ids of each text (truncated to ``max_length``) without padding."""
    out: list[torch.Tensor] = []
    for start in range(0, len(texts), chunk):
        ids, mask = model.tokenize(texts[start:start + chunk], max_length)
        out.extend(row[m.bool()] for row, m in zip(ids, mask))
    return out


def privatize_split(model, ids: list[torch.Tensor], labels: list[int], mechanism, space,
                    generator: torch.Generator) -> PrivateSplit:
    """Embed every token on the client and perturb it once with ``mechanism`` (batched)."""
    lengths = [int(t.numel()) for t in ids]
    flat = torch.cat(ids) if ids else torch.empty(0, dtype=torch.long, device=model.device)
    with torch.no_grad():  # a block, not a decorator: mutation testing skips decorated functions
        clean = model.embed(flat)
        noisy = mechanism.privatize(clean, space=space, generator=generator).to(clean.dtype)
    return PrivateSplit(list(ids), list(noisy.split(lengths)),
                        torch.tensor(labels, dtype=torch.long, device=model.device))


def pad_batch(model, split: PrivateSplit, index: list[int], pad_id: int):
    """Padded ``(ids, noisy, clean, mask, labels)`` for the examples in ``index``."""
    ids = torch.nn.utils.rnn.pad_sequence([split.ids[i] for i in index], batch_first=True,
                                          padding_value=pad_id)
    noisy = torch.nn.utils.rnn.pad_sequence([split.noisy[i] for i in index], batch_first=True)
    lengths = torch.tensor([split.ids[i].numel() for i in index], device=ids.device)
    mask = torch.arange(ids.shape[1], device=ids.device) < lengths.unsqueeze(1)
    with torch.no_grad():
        clean = model.embed(ids)
    return ids, noisy, clean, mask, split.labels[index]


def batches(model, split: PrivateSplit, batch_size: int, pad_id: int,
            generator: torch.Generator | None = None) -> Iterator[tuple]:
    """Batches in a shuffled order when ``generator`` is given, else in order."""
    n = len(split)
    order = (torch.randperm(n, generator=generator, device=generator.device).tolist()
             if generator is not None else list(range(n)))
    for start in range(0, n, batch_size):
        yield pad_batch(model, split, order[start:start + batch_size], pad_id)
