"""HiddenEcho, HiddenEcho-Full and the LDP baseline as registered defenses."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import ClassVar

import torch

import dpkit
from dpkit import DOWN, accuracy, attach_curves, auc, cached, declare_releases, knn_recovery
from dpkit_hiddenecho.data import (
    batches,
    hold_out,
    pad_batch,
    privatize_split,
    tokenize_unpadded,
    validation_size,
)
from dpkit_hiddenecho.fine_tune import SplitFineTuning
from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache, shared_store
from dpkit_hiddenecho.layer_filter import (
    evenly_spaced_layers,
    layer_contributions,
    select_layers,
)
from dpkit_hiddenecho.params import HiddenEchoFullParams, HiddenEchoParams, LdpParams
from dpkit_hiddenecho.protocol import Layout, SplitProtocol
from dpkit_hiddenecho.server import attach_lora, private_copy, transformer_blocks

GRADIENTS_REASON = ("training-time gradients of the returned hidden states, sent up every step, "
                    "computed from the clean embeddings and the private labels: not covered by the "
                    "η-dχ noise (the paper's own caveat)")


def dx_mechanism(ctx, who: str, eta: float, clip_bound: float | None = None):
    """The registered ``laplace_dx`` at ``eta`` (with ``clip_bound``), or the noiseless ceiling
    (:class:`dpkit.Noiseless`: nothing drawn, ε = ∞) when η is ∞."""
    if math.isinf(eta):
        return dpkit.Noiseless(f"{who} at η = ∞ sends the token embeddings without noise",
                               clip_bound)
    raw = {"eta": eta} if clip_bound is None else {"eta": eta, "clip_bound": clip_bound}
    return ctx.build("mechanism", "laplace_dx", raw)


def split_of(dataset, name: str, cap: int | None) -> tuple[list[str], list[int]]:
    """Texts and labels of a labelled split, the first ``cap`` of them."""
    split = dataset[name]
    if split.labels is None:
        raise ValueError(f"dataset {dataset.name!r} split {name!r} has no labels; HiddenEcho "
                         "trains a classifier, so use a labelled dataset")
    stop = len(split) if cap is None else min(cap, len(split))
    return list(split.texts[:stop]), list(split.labels[:stop])


class HiddenEchoLdp(SplitFineTuning, dpkit.Component):
    """LDP baseline: dχ-noisy embeddings up, last hidden state down, LoRA + head, no correction."""

    name: ClassVar[str] = "hiddenecho_ldp"
    Params: ClassVar[type[dpkit.Params]] = LdpParams

    def layout(self, model, train, ctx) -> Layout:
        """Send only the last layer at full width; no denoiser."""
        return Layout(layers=(model.num_layers - 1,), width=model.hidden_size,
                      reduce_on_server=False, denoise=False)

    def _prepared(self, ctx) -> SimpleNamespace:
        """Mechanism, space, texts and token ids for ``ctx``, computed once per run."""
        return ctx.prepared(self, lambda: self._prepare(ctx))

    def _prepare(self, ctx) -> SimpleNamespace:
        p, model = self.params, ctx.model
        if model is None or not hasattr(model, "server_forward"):
            raise ValueError(f"{self.name} needs a split model (spec `model:`, e.g. minilm or "
                             f"tiny-encoder), got {type(model).__name__}")
        mechanism = dx_mechanism(ctx, self.name, p.eta, p.clip_bound)
        texts = {s: split_of(ctx.dataset, getattr(p, f"{s}_split"), getattr(p, f"{s}_examples"))
                 for s in ("train", "test")}
        space = model.as_space()
        ids = {s: cached("hiddenecho_tokens", {"vocabulary": space.fingerprint,
                                               "texts": texts[s][0], "max_length": p.max_length},
                         lambda s=s: tokenize_unpadded(model, texts[s][0], p.max_length))
               for s in texts}  # the same texts for every seed, η and ablation of a spec
        n_val = validation_size(len(ids["train"]), p.val_fraction)
        return SimpleNamespace(mechanism=mechanism, space=space, texts=texts, ids=ids,
                               n_val=n_val)

    def releases(self, ctx) -> list[dpkit.Release]:
        """Noisy token embeddings (η per token, reused each epoch), masks, and the gradients."""
        p, st = self.params, self._prepared(ctx)
        n_tokens = sum(int(t.numel()) for s in st.ids for t in st.ids[s])
        steps = p.epochs * -(-(len(st.ids["train"]) - st.n_val) // p.batch_size)
        return [
            dpkit.Release("embeddings", st.mechanism.guarantee(st.space),
                          f"{self.name}: laplace_dx η={p.eta:g} on every train (validation "
                          "included) and test token embedding, drawn once and reused across "
                          "epochs", count=n_tokens,
                          reusable=True),
            dpkit.Release("mask", None, "attention masks: token counts, public under dχ's "
                          "equal-length neighbours", covered_by="embeddings"),
            dpkit.Release.uncovered("gradients", GRADIENTS_REASON, count=steps, unit="send"),
        ]

    def run(self, ctx) -> dpkit.DefenseResult:
        """Privatize, fine-tune through ``ctx.wire``, evaluate; report metrics and the view."""
        declare_releases(self, ctx)
        p, model, st = self.params, ctx.model, self._prepared(ctx)
        space, texts, ids = st.space, st.texts, st.ids
        data = {s: privatize_split(model, ids[s], texts[s][1], st.mechanism, space,
                                   ctx.generator(f"hiddenecho/noise/{s}")) for s in texts}
        work = private_copy(model)
        n_classes = len(ctx.dataset.label_names or ()) or int(data["train"].labels.max()) + 1
        fit, val = hold_out(data["train"], st.n_val)
        layout = self.layout(work, fit, ctx)
        attach_lora(work, p.lora_rank, p.lora_alpha, 0.0, p.lora_targets, p.lora_layers)
        pooling = ("last" if model.causal else "mean") if p.pooling == "auto" else p.pooling
        proto = SplitProtocol(work, layout, n_classes, pooling, ctx.wire,
                              ctx.generator("hiddenecho/mine", "cpu"), self.frozen_blocks(work),
                              precision=p.precision)
        metrics, curves = self.train(proto, fit, val, ctx)
        scores, truth = self.evaluate(proto, data["test"], ctx, model.special_token_ids())
        metrics.update(scores)
        observed = ctx.wire.observed.get("embeddings", torch.zeros(0, model.hidden_size))
        metrics.update(ep=1.0 - self.inversion(observed, truth, space),
                       layers_sent=float(len(layout.layers)),
                       lowest_layer_sent=float(min(layout.layers)), width_sent=float(
                           layout.width if layout.reduce_on_server else model.hidden_size),
                       tokens_privatized=float(data["train"].n_tokens + data["test"].n_tokens))
        view = ctx.wire.view(knowledge={"space": space}, truth={"token_ids": truth})
        result = dpkit.DefenseResult(metrics, view, ctx.wire.summary())
        attach_curves(result, curves)
        return result

    def frozen_blocks(self, work) -> FrozenBlockCache | None:
        """The blocks below the first adapter, run without dropout and (``reuse_frozen``) replayed
        across epochs, from a store shared by the cells with the same frozen weights and
        ``precision``; None with ``frozen_dropout`` or when every block is adapted."""
        p = self.params
        n_frozen = 0 if p.lora_layers is None else max(work.num_layers - p.lora_layers, 0)
        if p.frozen_dropout or n_frozen == 0:
            return None
        store = shared_store(work.server, n_frozen, p.precision) if p.reuse_frozen else None
        return FrozenBlockCache(work.server, transformer_blocks(work.server, work.num_layers),
                                n_frozen, reuse=p.reuse_frozen, store=store,
                                precision=p.precision)

    def evaluate(self, proto: SplitProtocol, split, ctx,
                 specials: torch.Tensor) -> tuple[dict[str, float], torch.Tensor]:
        """AUC, accuracy and inference bytes per batch on the test split, and the ids of the
        first ``attack_tokens`` non-special test tokens the view keeps (in sending order)."""
        proto.train(False)
        proto.wire.phase = "eval"
        proto.wire.keep("embeddings", self.params.attack_tokens)
        pad = proto.model.tokenizer.pad_token_id
        probs, kept = [], []
        for ids, noisy, clean, mask, _y in batches(proto.model, split, self.params.batch_size, pad):
            shown = mask & ~torch.isin(ids, specials.to(ids.device))
            probs.append(proto.predict(noisy, clean, mask, observe_rows=shown))
            kept.append(ids[shown])
        probs_all = torch.cat(probs)
        truth = torch.cat(kept)[:self.params.attack_tokens] if kept else torch.zeros(0).long()
        return ({"auc": auc(probs_all, split.labels),
                 "accuracy": accuracy(probs_all.argmax(-1), split.labels),
                 "bytes_per_batch_eval": proto.wire.per_batch("eval"),
                 "bytes_down_per_batch_eval": proto.wire.per_batch("eval", DOWN)}, truth)

    @staticmethod
    def inversion(observed: torch.Tensor, truth: torch.Tensor, space) -> float:
        """Top-1 nearest-neighbour inversion accuracy on the sent noisy test embeddings."""
        if truth.numel() == 0:
            return float("nan")
        return knn_recovery(observed, space.vectors.to(observed.device), truth, (1,))[1]


class HiddenEcho(HiddenEchoLdp):
    """HiddenEcho: server hidden states (filtered, reduced) corrected on the client (gated residual)."""

    name: ClassVar[str] = "hiddenecho"
    Params: ClassVar[type[dpkit.Params]] = HiddenEchoParams

    def layout(self, model, train, ctx) -> Layout:
        """Choose the layers to send (IG filter, fixed or all) and the reduced width."""
        p, n_layers = self.params, model.num_layers
        if p.layers == "all":
            layers = list(range(n_layers))
        elif p.layers == "fixed":
            layers = evenly_spaced_layers(p.top_k + int(p.keep_last), n_layers)
        else:
            layers = self.filter_layers(model, train, ctx)
        if model.hidden_size % p.reduction_factor:
            raise ValueError(f"{self.name}: reduction_factor={p.reduction_factor} must divide the "
                             f"model width {model.hidden_size}")
        return Layout(layers=tuple(layers), width=model.hidden_size // p.reduction_factor,
                      reduce_on_server=p.reduction != "none", residual=p.residual,
                      ib_alpha=p.ib_alpha if p.reduction == "ib" else 0.0, ib_beta=p.ib_beta,
                      mine_steps=p.mine_steps, mine_tokens=p.mine_tokens,
                      heads=p.denoiser_heads, dropout=p.dropout)

    def filter_layers(self, model, train, ctx) -> list[int]:
        """Top-k layers by integrated-gradient contribution on a few noisy training samples."""
        p = self.params
        pick = torch.randperm(len(train), generator=ctx.generator("hiddenecho/ig", "cpu"))
        _ids, noisy, _clean, mask, _y = pad_batch(model, train, pick[:p.ig_samples].tolist(),
                                                  model.tokenizer.pad_token_id)
        ctx.wire.phase = "layer_filter"
        noisy = ctx.wire.send("embeddings", noisy, rows=mask)  # the server scores received rows
        # HiddenEcho, −Res and −DR at one seed and η score the same samples on the same body
        key = {"weights": model.server.state_dict(), "noisy": noisy, "mask": mask,
               "steps": p.ig_steps, "baseline": p.ig_baseline}
        scores = cached("hiddenecho_ig_scores", key, lambda: layer_contributions(
            model, noisy, mask, p.ig_steps, baseline=p.ig_baseline))
        layers = select_layers(scores, p.top_k, model.num_layers, p.keep_last)
        ctx.say(f"{self.name}: sending blocks {layers}; IG contributions "
                f"{[round(float(s), 4) for s in scores]}")
        return layers


class HiddenEchoFull(HiddenEcho):
    """HiddenEcho-Full: all layers at full width go down, the client corrects them (no IB)."""

    name: ClassVar[str] = "hiddenecho_full"
    Params: ClassVar[type[dpkit.Params]] = HiddenEchoFullParams
