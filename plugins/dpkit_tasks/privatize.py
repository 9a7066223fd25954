"""The generic ``privatize_text`` defense: run a registered token mechanism over a text dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from dpkit import (
    Component,
    DefenseResult,
    EmbeddingSpace,
    FitsCounts,
    Release,
    VocabIndex,
    attach_curves,
    declare_releases,
    is_sequence_level,
    token_releases,
)
from dpkit_tasks.classifier import doc_features, train_text_classifier
from dpkit_tasks.params import PrivatizeTextParams
from dpkit_tasks.server import TextServer


@dataclass
class _Prepared:
    """What ``releases`` and ``run`` share for one context (built once)."""

    ctx: Any
    mechanism: Any
    space: EmbeddingSpace
    split: Any
    texts: list[str]
    docs: list[torch.Tensor]
    train: tuple[list[torch.Tensor], list[int] | None] | None


def padded(rows: torch.Tensor, lengths: list[int], value: float) -> torch.Tensor:
    """Consecutive ``rows`` grouped per document into ``[documents, longest, ...]``, each document
    closed by ``value`` (the release's declared padding)."""
    out = torch.full((len(lengths), max(lengths, default=0), *rows.shape[1:]), value,
                     dtype=rows.dtype, device=rows.device)
    start = 0
    for i, n in enumerate(lengths):
        out[i, :n] = rows[start:start + n]
        start += n
    return out


def wire_message(docs: list[torch.Tensor], substituted: torch.Tensor, noisy: torch.Tensor | None
                 ) -> tuple[str, torch.Tensor, list[int]]:
    """What crosses the wire for the privatized ``docs``: the message's name, its tensor (each
    document's in-vocabulary tokens, noisy vectors or substituted ids, padded) and how many
    tokens of each document it carries; out-of-vocabulary words do not cross."""
    known = torch.cat(docs).to(substituted.device) >= 0 if docs else substituted >= 0
    per_doc = [int((d >= 0).sum()) for d in docs]
    if noisy is not None:
        return "embeddings", padded(noisy[known], per_doc, 0.0), per_doc
    return "substituted_ids", padded(substituted[known], per_doc, -1), per_doc


def space_of(model: Any) -> EmbeddingSpace:
    """The EmbeddingSpace of ``ctx.model``: itself, or ``model.as_space()``."""
    if isinstance(model, EmbeddingSpace):
        return model
    if hasattr(model, "as_space"):
        return model.as_space()
    raise ValueError(f"privatize_text needs ctx.model to be an EmbeddingSpace or to have as_space(); "
                     f"got {type(model).__name__}; set model: in the spec (e.g. glove-6b-50d)")


def encode_docs(space: EmbeddingSpace, texts: list[str], oov: str, cap: int | None
                ) -> list[torch.Tensor]:
    """Token ids per document (−1 for kept OOV words), truncated to ``cap`` tokens."""
    return [ids[:cap] for ids in space.encode(texts, oov=oov)]


class PrivatizeText(Component):
    """Privatize a dataset split token by token with a registered mechanism; report what leaks."""

    name: ClassVar[str] = "privatize_text"
    runs_mechanisms: ClassVar[bool] = True  # what a spec's mechanism: cells run (dpkit.RunsMechanisms)
    Params = PrivatizeTextParams
    params: PrivatizeTextParams
    server = TextServer

    def _prepared(self, ctx) -> _Prepared:
        """Mechanism, space and tokenized documents for ``ctx``, computed once per cell."""
        return ctx.prepared(self, lambda: self._prepare(ctx))

    def _prepare(self, ctx) -> _Prepared:
        p = self.params
        mechanism = ctx.build("mechanism", p.mechanism, p.mechanism_params)
        if mechanism.domain not in ("embedding", "token"):
            raise ValueError(f"privatize_text runs token or embedding mechanisms; {p.mechanism!r} "
                             f"has domain {mechanism.domain!r}")
        space = space_of(ctx.model).to(ctx.device)
        split = ctx.dataset[p.split]
        texts = split.texts[:p.max_docs] if p.max_docs else split.texts
        docs = encode_docs(space, texts, p.oov, p.max_tokens_per_doc)
        train = self._train_docs(ctx, space)
        if isinstance(mechanism, FitsCounts) and train is not None:
            flat = torch.cat(train[0]) if train[0] else torch.zeros(0, dtype=torch.long)
            mechanism.fit_counts(torch.bincount(flat[flat >= 0], minlength=space.size))
        return _Prepared(ctx, mechanism, space, split, texts, docs, train)

    def releases(self, ctx) -> list[Release]:
        """What the client sends: privatized tokens (or noisy vectors), lengths, verbatim words."""
        st = self._prepared(ctx)
        return token_releases(st.mechanism, st.space, st.docs,
                              "embeddings" if st.mechanism.domain == "embedding" else "substituted_ids")

    def run(self, ctx) -> DefenseResult:
        """Privatize each document and send it over ``ctx.wire`` (the server decodes and keeps
        what the attacks see); measure what leaks and the utility here."""
        declare_releases(self, ctx)
        p, st = self.params, self._prepared(ctx)
        mechanism, space, docs = st.mechanism, st.space, st.docs
        truth = torch.cat(docs).to(ctx.device) if docs else torch.zeros(0, dtype=torch.long)
        known = truth >= 0
        lengths = [len(d) for d in docs]
        substituted, noisy = self._privatize(ctx, mechanism, space, docs, truth)
        name, message, per_doc = wire_message(docs, substituted, noisy)
        ctx.wire.send(name, message)
        metrics = {"n_docs": float(len(docs)), "n_tokens": float(int(known.sum())),
                   "token_preservation": float((substituted[known] == truth[known]).float().mean())}
        out_docs = list(torch.split(substituted.cpu(), lengths))
        curves = []
        if p.utility == "classifier":
            scores, curve = self._utility(ctx, space, st.train, docs, out_docs, st.split,
                                          len(st.texts))
            metrics.update(scores)
            curves.append(curve)
        labels = st.split.labels[:len(st.texts)] if st.split.labels else None
        result = DefenseResult(metrics, truth={"token_ids": truth[known], "doc_lengths": per_doc,
                                               "attributes": labels})
        if curves:
            attach_curves(result, curves)
        return result

    def _train_docs(self, ctx, space) -> tuple[list[torch.Tensor], list[int] | None] | None:
        if "train" not in ctx.dataset.splits:
            return None
        split = ctx.dataset["train"]
        n = min(len(split), self.params.classifier_train_docs)
        docs = encode_docs(space, split.texts[:n], "drop", self.params.max_tokens_per_doc)
        return docs, (split.labels[:n] if split.labels is not None else None)

    def _privatize(self, ctx, mechanism, space, docs, truth):
        """Substituted ids ``[N]`` and, for embedding mechanisms, the noisy vectors ``[N, d]``.

        Mechanisms that declare a ``noise_stream`` (one draw per in-vocabulary token from one
        law, e.g. the multivariate Laplace of laplace_dx, NOISE and dχ-STENCIL) share that
        stream and are run document by document, so at one seed every such method of a spec
        perturbs token i of document j with the same standardized draw (common random numbers);
        the others draw from a stream of their own name."""
        shared = getattr(mechanism, "noise_stream", None)
        gen = ctx.noise_generator(f"privatize_text/{shared or mechanism.name}")
        known = truth >= 0
        per_document = is_sequence_level(mechanism) or shared is not None
        if mechanism.domain == "token":
            if per_document:
                parts = [mechanism.privatize(d.to(ctx.device), space=space, generator=gen) for d in docs]
                return (torch.cat(parts) if parts else truth.clone()), None
            return mechanism.privatize(truth, space=space, generator=gen), None
        noisy = torch.zeros(len(truth), space.dim, device=ctx.device)
        if per_document:
            offsets = torch.cumsum(torch.tensor([0] + [len(d) for d in docs]), 0).tolist()
            for doc, start in zip(docs, offsets):
                rows = torch.arange(start, start + len(doc), device=ctx.device)[doc.to(ctx.device) >= 0]
                if len(rows):
                    noisy[rows] = mechanism.privatize(space.vectors[truth[rows]], space=space,
                                                      generator=gen)
        elif bool(known.any()):
            noisy[known] = mechanism.privatize(space.vectors[truth[known]], space=space, generator=gen)
        substituted = truth.clone()
        if bool(known.any()):
            index = VocabIndex(space.vectors, self.params.decode_metric)
            substituted[known] = index.search(noisy[known], 1)[1][:, 0]
        return substituted, noisy

    def _utility(self, ctx, space, train, docs, out_docs, split, n):
        """Accuracy of a classifier trained on clean train text, on clean and privatized test text,
        and the classifier's training curve."""
        if train is None or split.labels is None:
            raise ValueError("utility: classifier needs a labelled 'train' split and labels on "
                             f"{self.params.split!r}; this dataset has splits {list(ctx.dataset.splits)}")
        p = self.params
        key = (ctx.dataset.fingerprint, space.fingerprint, p.classifier_features,
               p.max_tokens_per_doc, p.classifier_train_docs)
        model, curve = train_text_classifier(key, train[0], train[1], space,
                                             p.classifier_features, ctx.numpy_seed("classifier"))
        labels = split.labels[:n]
        clean = model.score(doc_features(docs, space, p.classifier_features), labels)
        private = model.score(doc_features(out_docs, space, p.classifier_features), labels)
        return {"accuracy": float(private), "clean_accuracy": float(clean)}, curve
