"""The generic ``privatize_text`` defense: run a registered token mechanism over a text dataset."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from pydantic import Field

from dpkit.accounting import DpGuarantee, NoGuarantee
from dpkit.params import Params
from dpkit.protocols import DefenseResult, ServerView
from dpkit.search import VocabIndex
from dpkit.space import EmbeddingSpace
from dpkit.tasks.classifier import doc_features, train_text_classifier


class PrivatizeTextParams(Params):
    """Which mechanism, on which split, with which OOV policy, and how utility is measured."""

    mechanism: str = Field(description="registered mechanism name (domain 'embedding' or 'token')")
    mechanism_params: dict[str, Any] = Field(default_factory=dict)
    split: str = "test"
    oov: Literal["drop", "keep"] = Field(default="drop", description="unknown words: drop, or keep "
                                         "verbatim (released without protection)")
    max_tokens_per_doc: int | None = Field(default=128, ge=1)
    max_docs: int | None = Field(default=None, ge=1)
    decode_metric: Literal["l2", "cosine"] = "l2"
    utility: Literal["none", "classifier"] = "none"
    classifier_features: Literal["mean_vectors", "bow"] = "mean_vectors"
    classifier_train_docs: int = Field(default=5000, ge=2)


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


class PrivatizeText:
    """Privatize a dataset split token by token with a registered mechanism; report what leaks."""

    name: ClassVar[str] = "privatize_text"
    Params = PrivatizeTextParams

    def __init__(self, params: PrivatizeTextParams):
        self.params = params

    def run(self, ctx) -> DefenseResult:
        """Spend on the ledger, privatize each document, decode, and measure preservation/utility."""
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
        if hasattr(mechanism, "fit_counts") and train is not None:
            flat = torch.cat(train[0]) if train[0] else torch.zeros(0, dtype=torch.long)
            mechanism.fit_counts(torch.bincount(flat[flat >= 0], minlength=space.size))
        self._spend(ctx, mechanism, space, docs)
        truth = torch.cat(docs).to(ctx.device) if docs else torch.zeros(0, dtype=torch.long)
        substituted, noisy = self._privatize(ctx, mechanism, space, docs, truth)
        known = truth >= 0
        metrics = {"n_docs": float(len(docs)), "n_tokens": float(int(known.sum())),
                   "token_preservation": float((substituted[known] == truth[known]).float().mean())}
        lengths = [len(d) for d in docs]
        out_docs = list(torch.split(substituted.cpu(), lengths))
        if p.utility == "classifier":
            metrics.update(self._utility(ctx, space, train, docs, out_docs, split, len(texts)))
        observed = {"substituted_ids": substituted,
                    "representations": torch.as_tensor(doc_features(out_docs, space, "mean_vectors"))}
        if noisy is not None:
            observed["embeddings"] = noisy
            observed["representations"] = self._mean_rows(noisy, lengths, known)
        view = ServerView(observed=observed, knowledge={"space": space},
                          truth={"token_ids": truth, "doc_lengths": lengths,
                                 "attributes": split.labels[:len(texts)] if split.labels else None})
        width = 4 * space.dim if noisy is not None else 8
        return DefenseResult(metrics, view, {"client_to_server": int(known.sum()) * width})

    def _train_docs(self, ctx, space) -> tuple[list[torch.Tensor], list[int] | None] | None:
        if "train" not in ctx.dataset.splits:
            return None
        split = ctx.dataset["train"]
        n = min(len(split), self.params.classifier_train_docs)
        docs = encode_docs(space, split.texts[:n], "drop", self.params.max_tokens_per_doc)
        return docs, (split.labels[:n] if split.labels is not None else None)

    def _spend(self, ctx, mechanism, space, docs) -> None:
        """Record the spends before anything is released: per token, or per document (sequence unit)."""
        guarantee = mechanism.guarantee(space)
        n_known = sum(int((d >= 0).sum()) for d in docs)
        per_doc = getattr(guarantee, "unit", "token") == "sequence"
        if isinstance(guarantee, DpGuarantee):
            # (ε, δ) per token: a document's tokens compose, so the unit reported is one document
            # and the count the longest document's released tokens (DP-Prompt's n·ε).
            count = max((int((d >= 0).sum()) for d in docs), default=0)
            label = f"{mechanism.name} (per document: up to {count} tokens composed)"
        else:
            count = sum(1 for d in docs if bool((d >= 0).any())) if per_doc else n_known
            label = f"{mechanism.name} ({'documents' if per_doc else 'tokens'})"
        if count:
            ctx.ledger.spend(guarantee, label=label, count=count)
        if hasattr(mechanism, "verbatim_mask") and docs:
            n_verbatim = int(mechanism.verbatim_mask(torch.cat(docs).to(space.vectors.device),
                                                     space).sum())
            if n_verbatim:
                ctx.ledger.spend(NoGuarantee(f"{n_verbatim} tokens released verbatim by "
                                             f"{mechanism.name}'s policy (stop words)"),
                                 label=f"{mechanism.name} verbatim tokens", count=n_verbatim)
        n_oov = sum(int((d < 0).sum()) for d in docs)
        if n_oov:
            ctx.ledger.spend(NoGuarantee(f"{n_oov} out-of-vocabulary tokens released verbatim "
                                         "(oov: keep)"), label="oov kept verbatim", count=n_oov)

    def _privatize(self, ctx, mechanism, space, docs, truth):
        """Substituted ids ``[N]`` and, for embedding mechanisms, the noisy vectors ``[N, d]``."""
        gen = ctx.generator(f"privatize_text/{mechanism.name}")
        known = truth >= 0
        sequence_level = getattr(mechanism, "sequence_level", False)
        if mechanism.domain == "token":
            if sequence_level:
                parts = [mechanism.privatize(d.to(ctx.device), space=space, generator=gen) for d in docs]
                return (torch.cat(parts) if parts else truth.clone()), None
            return mechanism.privatize(truth, space=space, generator=gen), None
        noisy = torch.zeros(len(truth), space.dim, device=ctx.device)
        if sequence_level:
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

    @staticmethod
    def _mean_rows(noisy, lengths, known) -> torch.Tensor:
        doc_of = torch.repeat_interleave(torch.arange(len(lengths), device=noisy.device),
                                         torch.tensor(lengths, device=noisy.device))
        sums = torch.zeros(len(lengths), noisy.shape[1], device=noisy.device)
        sums.index_add_(0, doc_of[known], noisy[known])
        counts = torch.bincount(doc_of[known], minlength=len(lengths)).clamp_min(1)
        return sums / counts.unsqueeze(1)

    def _utility(self, ctx, space, train, docs, out_docs, split, n) -> dict[str, float]:
        """Accuracy of a classifier trained on clean train text, on clean and privatized test text."""
        if train is None or split.labels is None:
            raise ValueError("utility: classifier needs a labelled 'train' split and labels on "
                             f"{self.params.split!r}; this dataset has splits {list(ctx.dataset.splits)}")
        p = self.params
        key = (ctx.dataset.fingerprint, space.fingerprint, p.classifier_features,
               p.max_tokens_per_doc, p.classifier_train_docs)
        model = train_text_classifier(key, train[0], train[1], space, p.classifier_features,
                                      ctx.numpy_seed("classifier"))
        labels = split.labels[:n]
        clean = model.score(doc_features(docs, space, p.classifier_features), labels)
        private = model.score(doc_features(out_docs, space, p.classifier_features), labels)
        return {"accuracy": float(private), "clean_accuracy": float(clean)}
