"""The evaluation every SnD-family defense shares: privatize, embed, score, build the server view."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from dpkit import (
    DefenseResult,
    TrainingCurve,
    Wire,
    attach_curves,
    content_key,
    kl_mutual_information,
    knn_recovery,
    process_cache,
)
from dpkit_snd.client import SplitClient
from dpkit_snd.evaluate import downstream, similarity
from dpkit_snd.privatize import token_correlation
from dpkit_snd.server import PAD_ID


@dataclass
class Step:
    """One batch through a method: what the server saw, what it returned, what the user keeps."""

    sent: torch.Tensor
    e_server: torch.Tensor
    e_user: torch.Tensor
    noise: torch.Tensor | None = None


Method = Callable[..., Step]


@dataclass
class Split:
    """A labelled evaluation split, tokenized into batches; ``key`` identifies its texts."""

    labels: torch.Tensor
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    key: str = ""

    @property
    def n_tokens(self) -> int:
        """Real (non-padding) tokens the client would send."""
        return int(sum(int(mask.sum()) for _, mask in self.batches))

    @property
    def doc_lengths(self) -> torch.Tensor:
        """Tokens per text."""
        return torch.cat([mask.sum(1) for _, mask in self.batches])


def load_split(ctx, client: SplitClient, split: str, limit: int | None,
               batch_size: int) -> Split:
    """A seeded subsample of ``ctx.dataset[split]`` (≤ ``limit`` texts; None: all), tokenized."""
    data = ctx.dataset[split]
    if data.labels is None:
        raise ValueError(f"dataset {ctx.dataset.name!r} split {split!r} has no labels; SnD's "
                         "downstream evaluation needs a labelled dataset such as rotten_tomatoes")
    order = np.random.default_rng(ctx.numpy_seed(f"snd-subsample-{split}")).permutation(len(data))
    keep = sorted(order[:limit].tolist())
    labels = torch.tensor([data.labels[i] for i in keep], device=ctx.device)
    key = f"{client.key}:{ctx.dataset.fingerprint}:{split}:{content_key(keep)}:{batch_size}"
    return Split(labels, client.batches([data.texts[i] for i in keep], batch_size), key)


_CLEAN = process_cache("snd.clean_embeddings",
                       "clean encoder outputs e_c by (encoder, dataset, split, texts kept, batch)",
                       max_entries=16)


def clean_embeddings(client: SplitClient, split: Split) -> torch.Tensor:
    """e_c = G(X) for every text of ``split``, memoized per process (cells share them)."""
    return _CLEAN.get_or_build(split.key, lambda: torch.cat(
        [client.served(client.embed(ids), mask) for ids, mask in split.batches]))


def n_classes(ctx, *splits: Split) -> int:
    """Number of label classes (from the dataset's label names, else the labels seen)."""
    if ctx.dataset.label_names:
        return len(ctx.dataset.label_names)
    return int(max(int(s.labels.max()) for s in splits)) + 1


@dataclass
class Outcome:
    """A split pushed through a method: pooled embeddings and the test tokens for the view."""

    clean: torch.Tensor
    server: torch.Tensor
    user: torch.Tensor
    tokens: torch.Tensor | None
    sent: torch.Tensor | None
    token_ids: torch.Tensor | None
    noise: torch.Tensor | None


def push(client: SplitClient, split: Split, method: Method, keep_tokens: int, wire: Wire,
         upload: str) -> Outcome:
    """Run ``method`` over every batch through ``wire``; keep up to ``keep_tokens`` token rows.

    The method gets an ``upload(tensor)`` callable — the only way its batch reaches the server —
    which sends the batch with its padding rows blanked (zeros, or −1 for ids: the wire verifies
    them and the server restores the public padding) and returns the server's pooled outputs.
    """
    server, user, toks, sent, ids_kept, noise = [], [], [], [], [], []
    kept = 0
    for ids, mask in split.batches:
        x = client.embed(ids)
        rows = mask.bool()

        def send_up(tensor: torch.Tensor, rows=rows) -> torch.Tensor:
            blank = PAD_ID if not tensor.is_floating_point() else 0
            return wire.send(upload, tensor.masked_fill(~rows.unsqueeze(-1) if tensor.ndim == 3
                                                        else ~rows, blank))

        step = method(ids, mask, x, send_up)
        server.append(step.e_server)
        user.append(step.e_user)
        wire.end_batch()
        if kept < keep_tokens:
            toks.append(x[rows])
            sent.append(step.sent[rows])
            ids_kept.append(ids[rows])
            if step.noise is not None:
                noise.append(step.noise[rows])
            kept += int(rows.sum())

    def first(parts: list[torch.Tensor]) -> torch.Tensor | None:
        return torch.cat(parts)[:keep_tokens] if parts else None

    return Outcome(clean_embeddings(client, split), torch.cat(server), torch.cat(user), first(toks),
                   first(sent), first(ids_kept), first(noise))


def evaluate(ctx, client: SplitClient, params, train: Split, test: Split, method: Method,
             mi: bool = True) -> tuple[dict[str, float], dict, TrainingCurve]:
    """Utility and MI metrics for ``method``, the truth the attacks are scored against, and the
    downstream classifier's training curve (validated on held-out training texts, never test).

    ``inversion_cosine_top1`` decodes the transmitted embeddings by cosine: clipping (Eq. 3)
    shrinks vectors, which misleads the L2 decoder of ``nn_inversion`` but not this one.

    The server (:mod:`dpkit_snd.server`) keeps the first ``view_tokens`` transmitted test token
    embeddings for ``nn_inversion`` (truth ``token_ids``) and its pooled test outputs for
    ``attribute_inference`` (truth ``attributes`` = labels; its pooled training outputs are the
    attacker's auxiliary data, labelled by ``aux_attributes`` when scored). ``mi=False`` skips
    the k-NN MI estimate (meaningless for discrete outputs such as substituted tokens).
    """
    k = n_classes(ctx, train, test)
    keep = max(params.view_tokens, params.mi_tokens)
    wire, upload = ctx.wire, ("substituted_ids" if "substituted_ids" in ctx.wire.releases
                              else "embeddings")
    wire.phase = "train"
    tr = push(client, train, method, 0, wire, upload)
    wire.phase = "test"
    te = push(client, test, method, keep, wire, upload)
    metrics = similarity(te.user, te.clean)
    scores, curve = downstream(tr.user, train.labels, te.user, test.labels, k,
                               epochs=params.classifier_epochs,
                               generator=ctx.generator("snd-classifier"),
                               validation_share=params.classifier_validation,
                               split_seed=ctx.numpy_seed("snd-classifier-validation"),
                               patience=params.classifier_patience)
    metrics.update(scores)
    metrics["token_corr"] = token_correlation(te.tokens, te.sent)
    if mi:
        n_mi = min(params.mi_tokens, len(te.tokens))
        metrics["mi"] = kl_mutual_information(te.tokens[:n_mi].float(), te.sent[:n_mi].float(),
                                              params.mi_k)
    shown = slice(0, params.view_tokens)
    metrics["inversion_cosine_top1"] = knn_recovery(te.sent[shown], client.table,
                                                    te.token_ids[shown], (1,), "cosine")[1]
    truth = {"token_ids": te.token_ids[shown], "attributes": test.labels,
             "aux_attributes": train.labels}
    return metrics, truth, curve


def result(metrics: dict[str, float], truth: dict, wire: dict[str, int],
           curves: list[TrainingCurve]) -> DefenseResult:
    """Package metrics, truth, bytes and the training curves (the classifier's first)."""
    out = DefenseResult(metrics={k: float(v) for k, v in metrics.items()}, truth=truth,
                        wire_bytes=wire)
    attach_curves(out, curves)
    return out
