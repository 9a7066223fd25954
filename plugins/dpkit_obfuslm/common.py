"""Shared pieces of the ObfusLM defenses: params, data selection, the obfuscation step, the view."""

from __future__ import annotations

import time

import torch

import dpkit
from dpkit import NoGuarantee, Release
from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden
from dpkit_obfuslm.obfuscate import ObfuscatedTables, install_tables, obfuscate_tables
from dpkit_obfuslm.params import ObfuscationParams

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


def obfuscation_knowledge(p: ObfuscationParams) -> dict:
    """The public algorithm parameters an attacker is assumed to know."""
    return {"k": p.k, "beta": p.beta, "epsilon": p.epsilon, "calibration": p.calibration,
            "mix": p.mix, "plus": p.plus, "k_star": p.k_star, "epsilon_star": p.epsilon_star}


def obfuscate_model(ctx, server: torch.nn.Module, table: torch.Tensor, head: torch.Tensor | None,
                    p: ObfuscationParams) -> tuple[ObfuscatedTables, dict[str, float]]:
    """Obfuscate tables and install them (and ObfusLM+) in ``server`` (the copy the server will
    receive); nothing is sent here. Returns the tables and metrics; see :func:`releases`."""
    started = time.perf_counter()
    gen = ctx.generator("obfuslm.obfuscate")
    tables = obfuscate_tables(table, head, k=p.k, beta=p.beta, epsilon=p.epsilon, generator=gen,
                              calibration=p.calibration, mix=p.mix)
    install_tables(server, tables)
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
    if p.plus:
        key = hidden_key(tables.embeddings, k=p.k_star, beta=p.beta, epsilon=p.epsilon_star,
                         generator=gen)
        obfuscate_hidden(server, key)
        metrics.update({"plus_k_achieved": float(key.clusters.k_achieved),
                        "plus_epsilon": key.epsilon})
    metrics["obfuscate_s"] = time.perf_counter() - started
    ctx.say(f"obfuscated {table.shape[0]} rows into {sizes.numel()} clusters "
            f"(achieved k={clusters.k_achieved}, {clusters.share_below_k:.1%} below k)")
    return tables, metrics


def releases(tables: ObfuscatedTables | None, p: ObfuscationParams | None, n_ids: int,
             n_labels: int) -> list[Release]:
    """What the client sends: the obfuscated tables ((k, ε)), the id stream and the labels (∞).

    The plaintext baseline (``tables=None``) sends the real ids: one ∞ entry with its reason.
    """
    out = []
    if tables is None:
        out.append(Release("token_ids", NoGuarantee(PLAINTEXT_REASON),
                           "obfuslm plaintext baseline: real token ids", count=max(1, n_ids),
                           unit="element"))
    else:
        out.append(Release("tables", tables.guarantee(), f"obfuslm tables (k={p.k}, "
                           f"eps={p.epsilon}, {p.calibration} noise; per token)", unit="send"))
        if p.plus:
            out.append(Release.uncovered("hidden_layers", HIDDEN_REASON, unit="send"))
        out.append(Release.uncovered("token_ids", IDS_REASON, count=max(1, n_ids), unit="element"))
    if n_labels:
        out.append(Release.uncovered("labels", LABELS_REASON, count=n_labels))
    return out


def send_model(wire: dpkit.Wire, server: torch.nn.Module, p: ObfuscationParams) -> None:
    """Send what the server receives: the input table it holds and, for ObfusLM+, every other
    parameter of the model (all transformed over the hidden dimension), flattened into one."""
    table = server.get_input_embeddings().weight
    wire.send("tables", table.detach())
    if p.plus:
        layers = [t.detach().reshape(-1) for t in server.parameters() if t is not table]
        wire.send("hidden_layers", torch.cat(layers))


def public_documents(ctx, dataset: str | None, params: dict, fallback: list[str],
                     limit: int) -> list[str]:
    """Texts of the attacker's public corpus (a registered dataset, or held-out client-side data)."""
    if dataset is None:
        return fallback[:limit]
    data = ctx.load_dataset(dataset, params)
    split = "train" if "train" in data.splits else next(iter(data.splits))
    return list(data[split].texts[:limit])


def build_view(wire: dpkit.Wire, truth: list[torch.Tensor], original_table: torch.Tensor,
               public_ids: list[torch.Tensor], special_ids: torch.Tensor, knowledge: dict,
               forward: torch.Tensor) -> dpkit.ServerView:
    """The ServerView the ObfusLM attacks read: ``obfuscated_table`` and ``token_ids`` as
    observed on ``wire``, the public table and corpus as knowledge, the key as truth."""
    return wire.view(
        knowledge={"original_table": original_table.detach(), "public_token_ids": public_ids,
                   "special_ids": special_ids, "obfuscation": knowledge},
        truth={"token_ids": truth, "vocab_key": forward})
