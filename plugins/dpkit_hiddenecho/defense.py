"""HiddenEcho, HiddenEcho-Full and the LDP baseline as registered defenses: their client parts.

``run`` is the client: it tokenizes and privatizes the private texts, trains its modules and
evaluates, and reaches the server (:class:`~dpkit_hiddenecho.server.HiddenEchoServer`, built in
its own process from the spec's model and these params) only through ``ctx.wire``.
"""

from __future__ import annotations

import math

from types import SimpleNamespace
from typing import ClassVar

import torch

import dpkit
from dpkit import DOWN, accuracy, attach_curves, auc, cached, declare_releases, knn_recovery
from dpkit_hiddenecho.client import SplitClient, zero_padding
from dpkit_hiddenecho.data import (
    batches,
    hold_out,
    pad_batch,
    privatize_split,
    tokenize_unpadded,
    validation_size,
)
from dpkit_hiddenecho.fine_tune import SplitFineTuning
from dpkit_hiddenecho.layout import (
    Layout,
    attack_rows,
    layout_for,
    needs_filter,
    special_positions,
    training_steps,
)
from dpkit_hiddenecho.params import HiddenEchoFullParams, HiddenEchoParams, LdpParams
from dpkit_hiddenecho.server import HiddenEchoServer

GRADIENTS_REASON = ("training-time gradients of the returned hidden states, sent up every step, "
                    "computed from the clean embeddings and the private labels: not covered by the "
                    "η-dχ noise (the paper's own caveat)")
SCHEDULE_REASON = ("the number of training steps, sent before training so that the server builds "
                   "its learning-rate schedule (it follows from the number of training texts), "
                   "and with early stopping the epoch whose parameters are kept (chosen on the "
                   "private validation labels): numbers no guarantee covers")



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
    server: ClassVar[type[dpkit.Server]] = HiddenEchoServer

    def layout(self, model, train, ctx) -> Layout:
        """Send only the last layer at full width; no denoiser."""
        return layout_for(self.params, model.num_layers, model.hidden_size)

    def _prepared(self, ctx) -> SimpleNamespace:
        """Mechanism, space, texts and token ids for ``ctx``, computed once per run."""
        return ctx.prepared(self, lambda: self._prepare(ctx))

    def _prepare(self, ctx) -> SimpleNamespace:
        p, model = self.params, ctx.model
        dpkit.warn_if_bf16_is_emulated(ctx.device.type, p.precision, self.name)
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
        """Noisy token embeddings (η per token, reused each epoch; padding rows zero), the
        gradients, and the schedule's numbers."""
        p, st = self.params, self._prepared(ctx)
        n_tokens = sum(int(t.numel()) for s in st.ids for t in st.ids[s])
        steps = training_steps(p, len(st.ids["train"]) - st.n_val)
        return [
            dpkit.Release("embeddings", st.mechanism.guarantee(st.space),
                          f"{self.name}: laplace_dx η={p.eta:g} on every train (validation "
                          "included) and test token embedding, drawn once and reused across "
                          "epochs", count=n_tokens, reusable=True, padding=0.0),
            dpkit.Release.uncovered("gradients", GRADIENTS_REASON, count=steps, unit="send"),
            dpkit.Release.uncovered("schedule", SCHEDULE_REASON,
                                    count=1 + int(p.patience is not None), unit="send"),
        ]

    def run(self, ctx) -> dpkit.DefenseResult:
        """Privatize, fine-tune through ``ctx.wire``, evaluate; metrics and the attacks' truth."""
        declare_releases(self, ctx)
        model, st = ctx.model, self._prepared(ctx)
        space, texts, ids = st.space, st.texts, st.ids
        data = {s: privatize_split(model, ids[s], texts[s][1], st.mechanism, space,
                                   ctx.noise_generator(f"hiddenecho/noise/{s}")) for s in texts}
        fit, val = hold_out(data["train"], st.n_val)
        layout = self.layout(model, fit, ctx)
        client = self.split_client(layout, data["train"], ctx)
        metrics, curves = self.train(client, fit, val, ctx)
        scores, truth, sent = self.evaluate(client, data["test"])
        metrics.update(scores)
        metrics.update(ep=1.0 - self.inversion(sent, truth, space),
                       layers_sent=float(len(layout.layers)),
                       lowest_layer_sent=float(min(layout.layers)), width_sent=float(
                           layout.width if layout.reduce_on_server else model.hidden_size),
                       tokens_privatized=float(data["train"].n_tokens + data["test"].n_tokens))
        result = dpkit.DefenseResult(metrics, truth={"token_ids": truth},
                                     wire_bytes=ctx.wire.summary())
        attach_curves(result, curves)
        return result

    def split_client(self, layout: Layout, train, ctx) -> SplitClient:
        """The client's modules on ``ctx.wire``: the task's classes and pooling (training choices;
        its MINE critics sample tokens from a public training stream, no release's noise)."""
        p, model = self.params, ctx.model
        n_classes = len(ctx.dataset.label_names or ()) or int(train.labels.max()) + 1
        pooling = ("last" if model.causal else "mean") if p.pooling == "auto" else p.pooling
        return SplitClient(model, layout, n_classes, pooling, ctx.wire,
                           ctx.generator("hiddenecho/mine", "cpu"))

    def evaluate(self, client: SplitClient, split
                 ) -> tuple[dict[str, float], torch.Tensor, torch.Tensor]:
        """AUC, accuracy and inference bytes per batch on the test split; the ids and the sent
        noisy rows of the first ``attack_tokens`` test tokens the server keeps for the attacks
        (the template's special tokens left out, in sending order)."""
        model, wire, keep = client.model, client.wire, self.params.attack_tokens
        client.train(False)
        wire.phase = "eval"
        lead, trail = special_positions(model.tokenizer)
        probs, kept, rows = [], [], []
        for ids, noisy, clean, mask, _y in batches(model, split, self.params.batch_size,
                                                   model.tokenizer.pad_token_id):
            probs.append(client.predict(noisy, clean, mask))
            shown = attack_rows(mask, lead, trail)
            kept.append(ids[shown])
            rows.append(noisy[shown])
        probs_all = torch.cat(probs)
        truth = torch.cat(kept)[:keep] if kept else torch.zeros(0).long()
        sent = torch.cat(rows)[:keep] if rows else torch.zeros(0, model.hidden_size)
        return ({"auc": auc(probs_all, split.labels),
                 "accuracy": accuracy(probs_all.argmax(-1), split.labels),
                 "bytes_per_batch_eval": wire.per_batch("eval"),
                 "bytes_down_per_batch_eval": wire.per_batch("eval", DOWN)}, truth, sent)

    @staticmethod
    def inversion(sent: torch.Tensor, truth: torch.Tensor, space) -> float:
        """Top-1 nearest-neighbour inversion accuracy on the sent noisy test embeddings."""
        if truth.numel() == 0:
            return float("nan")
        return knn_recovery(sent, space.vectors.to(sent.device), truth, (1,))[1]


class HiddenEcho(HiddenEchoLdp):
    """HiddenEcho: server hidden states (filtered, reduced) corrected on the client (gated residual)."""

    name: ClassVar[str] = "hiddenecho"
    Params: ClassVar[type[dpkit.Params]] = HiddenEchoParams

    def layout(self, model, train, ctx) -> Layout:
        """Choose the layers to send (IG filter on the server, fixed or all) and the width."""
        filtered = self.filter_layers(model, train, ctx) if needs_filter(self.params) else None
        return layout_for(self.params, model.num_layers, model.hidden_size, filtered)

    def filter_layers(self, model, train, ctx) -> list[int]:
        """Send a few noisy training samples (phase ``layer_filter``); the server scores its
        blocks by integrated-gradient contribution on them and answers with its pick."""
        p = self.params
        pick = torch.randperm(len(train), generator=ctx.generator("hiddenecho/ig", "cpu"))
        _ids, noisy, _clean, mask, _y = pad_batch(model, train, pick[:p.ig_samples].tolist(),
                                                  model.tokenizer.pad_token_id)
        ctx.wire.phase = "layer_filter"
        answer = ctx.wire.send("embeddings", zero_padding(noisy, mask))
        layers = [int(i) for i in answer["layers"]]
        ctx.say(f"{self.name}: sending blocks {layers}; IG contributions "
                f"{[round(float(s), 4) for s in answer['contributions']]}")
        return layers


class HiddenEchoFull(HiddenEcho):
    """HiddenEcho-Full: all layers at full width go down, the client corrects them (no IB)."""

    name: ClassVar[str] = "hiddenecho_full"
    Params: ClassVar[type[dpkit.Params]] = HiddenEchoFullParams
