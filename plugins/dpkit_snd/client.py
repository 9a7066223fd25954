"""SnD's view of a split model: client token lookup, server forward + pooling, the public table."""

from __future__ import annotations

from functools import cached_property

import torch

from dpkit import EmbeddingSpace, content_key, process_cache
from dpkit_snd.privatize import measured_clip_bound

SERVED_BATCHES = 2048
_SERVED = process_cache("snd.server_outputs",
                        "the server's pooled outputs by (encoder weights, batch received, mask)",
                        max_entries=SERVED_BATCHES)


class SplitClient:
    """Wraps a :class:`dpkit.models.SplitModel` for SnD: batches, clean embeddings, server calls."""

    def __init__(self, model, max_tokens: int):
        if getattr(model, "causal", False):
            raise ValueError(f"SnD needs an encoder split model; {model!r} is a causal LM — use an "
                             "encoder such as minilm or tiny-encoder")
        self.model = model
        self.max_tokens = max_tokens

    @property
    def device(self) -> torch.device:
        """Device of the model."""
        return self.model.device

    @cached_property
    def space(self) -> EmbeddingSpace:
        """The public vocabulary + input-embedding table (the attacker's knowledge)."""
        return self.model.as_space()

    @property
    def table(self) -> torch.Tensor:
        """Input-embedding table ``[V, d]``."""
        return self.model.embedding_table

    @cached_property
    def clip_bound(self) -> float:
        """C of Eq. 3: the largest token-embedding norm in the table."""
        return measured_clip_bound(self.table)

    @property
    def emb_dim(self) -> int:
        """Width of the pooled output embedding."""
        return self.model.hidden_size

    @property
    def tok_dim(self) -> int:
        """Width of the token embeddings sent to the server."""
        return int(self.table.shape[1])

    @cached_property
    def key(self) -> str:
        """Identifies the encoder (name + table fingerprint) in cache keys."""
        return f"{self.model.name}:{self.space.fingerprint}:{self.max_tokens}"

    @property
    def weights_key(self) -> str:
        """Content hash of every weight and buffer of the encoder (the server's function),
        recomputed whenever one of them has been changed in place since the last call."""
        tensors = {**dict(self.model.server.named_parameters()),
                   **dict(self.model.server.named_buffers())}
        versions = tuple(t._version for t in tensors.values())
        if getattr(self, "_weights", (None,))[0] != versions:
            self._weights = (versions, content_key(tensors))
        return self._weights[1]

    def batches(self, texts: list[str], batch_size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Tokenized ``(ids, mask)`` batches of ``texts`` (truncated to ``max_tokens``)."""
        out = []
        for start in range(0, len(texts), batch_size):
            batch = self.model.tokenize(texts[start:start + batch_size], self.max_tokens)
            out.append((batch.input_ids, batch.attention_mask))
        return out

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Client: clean token embeddings ``[B, n, d]``, outside autograd."""
        with torch.no_grad():  # a block, not a decorator: mutation testing reaches the body
            return self.model.embed(ids)

    @torch.no_grad()
    def server(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Server: encoder from ``inputs_embeds`` and pooling, ``[B, emb_dim]``."""
        return self.model.server_forward(x, mask, output_hidden_states=False).pooled

    def served(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``server(x, mask)``, computed once per distinct batch in the process and replayed after.

        The encoder runs in evaluation mode, so its output is a function of the bytes received:
        methods that send the same noisy batch (SnD and TokEmbPriv on one noise stream, the
        noiseless rows and the clean reference) share one forward. Server-side work only: the
        wire, the ledger and every number are those of a computed forward.
        """
        if self.model.server.training:  # dropout: not a function of the input, nothing to share
            return self.server(x, mask)
        key = (self.weights_key, content_key(x), content_key(mask))
        return _SERVED.get_or_build(key, lambda: self.server(x, mask)).clone()
