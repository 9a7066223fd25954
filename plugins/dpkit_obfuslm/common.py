"""Shared pieces of the ObfusLM defenses: params, data selection, the obfuscation step, the view."""

from __future__ import annotations

import time
from typing import Literal

import torch
from pydantic import Field

import dpkit
from dpkit.accounting import NoGuarantee
from dpkit_obfuslm.hidden import hidden_key, obfuscate_hidden
from dpkit_obfuslm.obfuscate import ObfuscatedTables, install_tables, obfuscate_tables

PLAINTEXT_REASON = ("plaintext baseline: the server receives the real token ids and the original "
                    "embedding table, so nothing is hidden")


class ObfuscationParams(dpkit.Params):
    """EmbedCluster / WeightSynth parameters and the ObfusLM+ variant."""

    k: int = Field(10, ge=1, le=1024, description="requested cluster size (anonymity set)")
    beta: float = Field(0.99, ge=0.0, lt=1.0, description="similarity quantile threshold ratio")
    epsilon: float = Field(1.0, gt=0.0, le=100.0, description="WeightSynth privacy parameter")
    calibration: Literal["exact", "faithful"] = Field(
        "exact", description="exact: one Laplace scale per cluster from the true L1 sensitivity "
        "(ε holds); faithful: the paper's per-row scale (ledger ε = ∞)")
    plus: bool = Field(False, description="ObfusLM+: also obfuscate the hidden dimension (Eq. 2)")
    k_star: int = Field(10, ge=1, le=1024, description="ObfusLM+ cluster size over hidden dims")
    epsilon_star: float = Field(3.0, gt=0.0, le=100.0, description="ObfusLM+ WeightSynth ε*")


def obfuscation_knowledge(p: ObfuscationParams) -> dict:
    """The public algorithm parameters an attacker is assumed to know."""
    return {"k": p.k, "beta": p.beta, "epsilon": p.epsilon, "calibration": p.calibration,
            "plus": p.plus, "k_star": p.k_star, "epsilon_star": p.epsilon_star}


def obfuscate_model(ctx, server: torch.nn.Module, table: torch.Tensor, head: torch.Tensor | None,
                    p: ObfuscationParams) -> tuple[ObfuscatedTables, dict[str, float]]:
    """Obfuscate tables, record the spend on the ledger, then install them (and ObfusLM+) in
    ``server`` (a copy the server will receive). Returns the tables and metrics."""
    started = time.perf_counter()
    gen = ctx.generator("obfuslm.obfuscate")
    tables = obfuscate_tables(table, head, k=p.k, beta=p.beta, epsilon=p.epsilon, generator=gen,
                              calibration=p.calibration)
    guarantee = tables.guarantee()
    ctx.ledger.spend(guarantee, label=f"obfuslm tables (k={p.k}, eps={p.epsilon}, "
                                      f"{p.calibration} noise)")
    install_tables(server, tables)
    sizes = tables.clusters.sizes.float()
    w = tables.weights
    metrics = {"k_achieved": float(guarantee.k_achieved),
               "share_below_k": guarantee.share_below_k,
               "anonymity_epsilon": guarantee.epsilon,
               "clusters": float(sizes.numel()), "mean_cluster_size": float(sizes.mean()),
               "singleton_share": float((sizes == 1).sum()) / table.shape[0],
               "mean_noise_scale": float(w.noise_scale[w.clusters.members >= 0].mean())}
    if p.plus:
        key = hidden_key(tables.embeddings, k=p.k_star, beta=p.beta, epsilon=p.epsilon_star,
                         generator=gen)
        obfuscate_hidden(server, key)
        metrics.update({"plus_k_achieved": float(key.clusters.k_achieved),
                        "plus_epsilon": key.epsilon})
    metrics["obfuscate_s"] = time.perf_counter() - started
    ctx.say(f"obfuscated {table.shape[0]} rows into {sizes.numel()} clusters "
            f"(achieved k={guarantee.k_achieved}, {guarantee.share_below_k:.1%} below k)")
    return tables, metrics


def record_plaintext(ctx) -> None:
    """The plaintext baseline's ledger entry: no guarantee, with the reason."""
    ctx.ledger.spend(NoGuarantee(PLAINTEXT_REASON), label="obfuslm plaintext baseline")


def public_documents(ctx, dataset: str | None, params: dict, fallback: list[str],
                     limit: int) -> list[str]:
    """Texts of the attacker's public corpus (a registered dataset, or held-out client-side data)."""
    if dataset is None:
        return fallback[:limit]
    data = ctx.load_dataset(dataset, params)
    split = "train" if "train" in data.splits else next(iter(data.splits))
    return list(data[split].texts[:limit])


def build_view(observed_table: torch.Tensor, sent: list[torch.Tensor], truth: list[torch.Tensor],
               original_table: torch.Tensor, public_ids: list[torch.Tensor],
               special_ids: torch.Tensor, knowledge: dict, forward: torch.Tensor) -> dpkit.ServerView:
    """The ServerView the ObfusLM attacks read."""
    return dpkit.ServerView(
        observed={"obfuscated_table": observed_table.detach(), "token_ids": sent},
        knowledge={"original_table": original_table.detach(), "public_token_ids": public_ids,
                   "special_ids": special_ids, "obfuscation": knowledge},
        truth={"token_ids": truth, "vocab_key": forward})
