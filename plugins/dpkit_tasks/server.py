"""The server part of ``privatize_text``: it receives the privatized documents and keeps what the
attacks see — the substituted words (decoded from the noisy vectors with the public space when the
mechanism sends vectors), the vectors themselves, and each document's mean representation."""

from __future__ import annotations

import torch

import dpkit
from dpkit import EmbeddingSpace, VocabIndex
from dpkit_tasks.classifier import doc_features
from dpkit_tasks.params import PrivatizeTextParams


def mean_rows(rows: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """Mean of each group of consecutive ``rows`` (``lengths`` rows each; zeros for an empty one)."""
    doc_of = torch.repeat_interleave(torch.arange(len(lengths), device=rows.device),
                                     torch.tensor(lengths, device=rows.device))
    sums = torch.zeros(len(lengths), rows.shape[1], device=rows.device, dtype=rows.dtype)
    sums.index_add_(0, doc_of, rows)
    counts = torch.tensor(lengths, device=rows.device).clamp_min(1)
    return sums / counts.unsqueeze(1)


class TextServer(dpkit.Server):
    """Keeps the privatized tokens and derives from them only what the public space allows."""

    params: PrivatizeTextParams

    def _space(self) -> EmbeddingSpace:
        space = self.knowledge().get("space")
        if space is None:
            raise ValueError("privatize_text's server needs the spec's model as an embedding space")
        return space

    @dpkit.handles("embeddings")
    def embeddings(self, message: dpkit.Message) -> None:
        """Noisy vectors: keep them, their nearest words and each document's mean vector."""
        space = self._space()
        noisy, lengths = message.rows.float(), message.lengths
        ids = VocabIndex(space.vectors, self.params.decode_metric).search(
            noisy.to(space.vectors.device), 1)[1][:, 0] if len(noisy) else \
            torch.zeros(0, dtype=torch.long)
        self.observe("embeddings", noisy)
        self.observe("substituted_ids", ids.cpu())
        self.observe("representations", mean_rows(noisy, lengths))

    @dpkit.handles("substituted_ids")
    def substituted(self, message: dpkit.Message) -> None:
        """Substituted words: keep them and each document's mean word vector."""
        space = self._space()
        ids, lengths = message.rows.long(), message.lengths
        self.observe("substituted_ids", ids)
        docs = list(torch.split(ids, lengths))
        self.observe("representations", torch.as_tensor(
            doc_features(docs, space, "mean_vectors"), dtype=torch.float32))
