"""Shared pieces of the ObfusLM defenses: params, the client's obfuscation step, the releases, and
how the obfuscated model is laid out on the wire (both ends use the same layout)."""

from __future__ import annotations

import copy
import time
from typing import Any

import torch

import dpkit
from dpkit import NoGuarantee, Release
from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden
from dpkit_obfuslm.obfuscate import ObfuscatedTables, install_tables, obfuscate_tables
from dpkit_obfuslm.params import ObfuscationParams

ID_PADDING = -1
"""Padding of the id streams on the wire: real ids are ≥ 0, so the wire verifies the padding and
the server gets the lengths (and never learns the obfuscated id of the tokenizer's [PAD])."""

PLAINTEXT_REASON = ("plaintext baseline: the server receives the real token ids and the original "
                    "embedding table, so nothing is hidden")
IDS_REASON = ("the obfuscated id stream is deterministic: every occurrence of a token gets the same "
              "id, so token frequencies and co-occurrences cross unchanged (a substitution cipher "
              "that the (k, ε) of the tables does not cover)")
LABELS_REASON = "task labels are sent to the server in plaintext for fine-tuning"
HIDDEN_REASON = ("ObfusLM+ sends the whole model transformed over its hidden dimension (k*, ε*): "
                 "LayerNorm gains and biases cannot be mixed, only permuted by the secret σ*, so "
                 "matching them with the public model's recovers σ* exactly and the (k*, ε*) of "
                 "the dimension mixing does not hold for the model as sent; the client's tokens "
                 "stay covered by the tables' entry, as these layers are computed from the "
                 "obfuscated table, public weights and fresh noise only")




def obfuscation_knowledge(p: Any) -> dict:
    """The public algorithm parameters an attacker is assumed to know ({} when ``p`` does not
    obfuscate: the plaintext baselines)."""
    if not isinstance(p, ObfuscationParams) or not getattr(p, "obfuscate", True):
        return {}
    return {"k": p.k, "beta": p.beta, "epsilon": p.epsilon, "calibration": p.calibration,
            "mix": p.mix, "plus": p.plus, "k_star": p.k_star, "epsilon_star": p.epsilon_star}


def untied_head(model: torch.nn.Module) -> torch.nn.Parameter | None:
    """The LM head's weight when it is not the input table itself (None for encoders and tied
    heads, whose table is the input table)."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if out is None or out.weight is model.get_input_embeddings().weight:
        return None
    return out.weight


def table_params(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters sent as ``tables``: the input table, then the untied LM head if any."""
    head = untied_head(model)
    return [model.get_input_embeddings().weight, *([] if head is None else [head])]


def layer_params(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """Every other parameter, in ``model.parameters()`` order (ObfusLM+'s ``hidden_layers``)."""
    tables = {id(t) for t in table_params(model)}
    return [q for q in model.parameters() if id(q) not in tables]


def obfuscate_model(ctx, model, p: ObfuscationParams
                    ) -> tuple[ObfuscatedTables, dict[str, float], dict[str, torch.Tensor]]:
    """Obfuscate the public model's tables on the client (release noise: the run's noise secret)
    and, with ``plus``, transform a copy of the whole model; returns the tables (the client
    keeps the key), metrics, and what crosses the wire: ``tables`` ``[n, V, d]`` (input table,
    untied LM head) and, with ``plus``, ``hidden_layers`` (every other parameter, flat)."""
    started = time.perf_counter()
    gen = ctx.noise_generator("obfuslm.obfuscate")
    head = untied_head(model.server)
    table = model.embedding_table.float()
    tables = obfuscate_tables(table, None if head is None else head.detach().float(), k=p.k,
                              beta=p.beta, epsilon=p.epsilon, generator=gen,
                              calibration=p.calibration, mix=p.mix)
    clusters, w = tables.clusters, tables.weights
    sizes = clusters.sizes.float()
    real = w.clusters.members >= 0
    metrics = {"k_achieved": float(clusters.k_achieved),
               "share_below_k": clusters.share_below_k,
               "anonymity_epsilon": tables.epsilon,
               "clusters": float(sizes.numel()), "mean_cluster_size": float(sizes.mean()),
               "singleton_share": float((sizes == 1).sum()) / table.shape[0],
               "mean_noise_scale": float(w.noise_scale[real].mean()),
               "paper_noise_scale": float(w.paper_scale[real].mean())}
    dtype = model.server.get_input_embeddings().weight.dtype
    sent = {"tables": torch.stack([t.to(dtype) for t in (tables.embeddings, tables.head)
                                   if t is not None])}
    if p.plus:
        transformed = copy.deepcopy(model.server)
        install_tables(transformed, tables)
        key = hidden_key(tables.embeddings, k=p.k_star, beta=p.beta, epsilon=p.epsilon_star,
                         generator=gen)
        obfuscate_hidden(transformed, key)
        sent = {"tables": torch.stack([t.detach() for t in table_params(transformed)]),
                "hidden_layers": torch.cat([t.detach().reshape(-1)
                                            for t in layer_params(transformed)])}
        metrics.update({"plus_k_achieved": float(key.clusters.k_achieved),
                        "plus_epsilon": key.epsilon})
    metrics["obfuscate_s"] = time.perf_counter() - started
    ctx.say(f"obfuscated {table.shape[0]} rows into {sizes.numel()} clusters "
            f"(achieved k={clusters.k_achieved}, {clusters.share_below_k:.1%} below k)")
    return tables, metrics, sent


def releases(tables: ObfuscatedTables | None, p: ObfuscationParams | None, n_ids: int,
             n_labels: int) -> list[Release]:
    """What the client sends: the obfuscated tables ((k, ε)), the id stream (padded with
    :data:`ID_PADDING`, which the wire verifies and does not count) and the labels (∞).

    The plaintext baseline (``tables=None``) sends the real ids: one ∞ entry with its reason.
    """
    out = []
    if tables is None:
        out.append(Release("token_ids", NoGuarantee(PLAINTEXT_REASON),
                           "obfuslm plaintext baseline: real token ids", count=max(1, n_ids),
                           unit="element", padding=ID_PADDING))
    else:
        assert p is not None
        out.append(Release("tables", tables.guarantee(), f"obfuslm tables (k={p.k}, "
                           f"eps={p.epsilon}, {p.calibration} noise; per token)", unit="send"))
        if p.plus:
            out.append(Release.uncovered("hidden_layers", HIDDEN_REASON, unit="send"))
        out.append(Release.uncovered("token_ids", IDS_REASON, count=max(1, n_ids), unit="element",
                                     padding=ID_PADDING))
    if n_labels:
        out.append(Release.uncovered("labels", LABELS_REASON, count=n_labels))
    return out


def padded_ids(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``ids`` with every padding position set to :data:`ID_PADDING` (what crosses the wire)."""
    return ids.masked_fill(mask == 0, ID_PADDING)


def received_ids(message: dpkit.Message) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids (padding set to 0: masked out, any id does) and the attention mask of an id stream
    message, the mask from the padding the wire verified."""
    mask = message.mask if message.mask is not None else \
        torch.ones_like(message.tensor, dtype=torch.bool)
    return message.tensor.long().masked_fill(~mask, 0), mask.long()
