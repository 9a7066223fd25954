"""ObfusLM+ (Eq. 2): obfuscate the hidden dimension of the whole model.

The hidden dims are clustered and synthesized like tokens (EmbedCluster / WeightSynth on Ẽᵀ, k*,
ε*) and permuted by a secret σ*: with M the d×d synthesis matrix, the residual stream becomes
x* = x·T, T = Mᵀ with columns permuted by σ*. Tables are multiplied by T, layers that read the
stream get A* = A·T, layers that write it get B* = Tᵀ·B (bias b·T), norm gains are permuted.
With M = I (pure permutation) the model computes exactly the same function; with mixing it only
approximates it (norms do not commute with mixing) and fine-tuning adapts, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dpkit_obfuslm.cluster import Clusters, embed_cluster
from dpkit_obfuslm.obfuscate import VocabKey
from dpkit_obfuslm.synth import weight_synth

READS = ("attention.self.query", "attention.self.key", "attention.self.value",
         "intermediate.dense", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "lm_head")
WRITES = ("output.dense", "o_proj", "down_proj")


@dataclass(frozen=True)
class HiddenKey:
    """The hidden-dimension transform T ``[d, d]`` and the clusters of dims behind it."""

    transform: torch.Tensor
    source: torch.Tensor            # [d]: new dim p is built around old dim source[p]
    clusters: Clusters | None
    epsilon: float


def hidden_key(table: torch.Tensor, *, k: int, beta: float, epsilon: float,
               generator: torch.Generator, mix: bool = True) -> HiddenKey:
    """Draw σ* and, when ``mix``, the synthesis M from the obfuscated table's columns."""
    d = table.shape[1]
    perm = VocabKey.random(d, generator)
    if mix:
        clusters = embed_cluster(table.detach().float().T.contiguous(), k, beta)
        synth = weight_synth(table.detach().float().T, clusters, epsilon, generator)
        mixing = synth.to_dense().to(table.device).T
        eps = synth.epsilon
    else:
        clusters, eps = None, float("inf")
        mixing = torch.eye(d, device=table.device)
    return HiddenKey(mixing[:, perm.inverse.to(table.device)], perm.inverse, clusters, eps)


def _matches(name: str, suffixes: tuple[str, ...]) -> bool:
    return any(name == s or name.endswith("." + s) for s in suffixes)


@torch.no_grad()
def obfuscate_hidden(model: nn.Module, key: HiddenKey) -> int:
    """Apply T to every table, reader, writer and norm of a BERT or Llama model; returns #tensors."""
    t = key.transform
    perm_cols = key.source
    done: set[int] = set()
    changed = 0

    def update(param: torch.Tensor, value: torch.Tensor) -> None:
        nonlocal changed
        param.copy_(value.to(param.dtype))
        done.add(id(param))
        changed += 1

    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if weight is None or id(weight) in done:
            continue
        tt = t.to(weight.device, torch.float32)
        if isinstance(module, nn.Embedding):
            update(weight, weight.float() @ tt)
        elif "norm" in type(module).__name__.lower() or "layernorm" in name.lower():
            update(weight, weight[perm_cols.to(weight.device)])
            bias = getattr(module, "bias", None)
            if bias is not None:
                update(bias, bias[perm_cols.to(bias.device)])
        elif isinstance(module, nn.Linear) and _matches(name, READS):
            update(weight, weight.float() @ tt)
        elif isinstance(module, nn.Linear) and _matches(name, WRITES):
            update(weight, tt.T @ weight.float())
            if module.bias is not None:
                update(module.bias, module.bias.float() @ tt)
    return changed
