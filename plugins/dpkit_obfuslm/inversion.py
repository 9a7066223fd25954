"""The learned-inversion attacker: obfuscates the public table itself and learns to undo it.

The attacker knows the algorithm and its parameters but not the client's permutation or noise.
It runs EmbedCluster with its own permutation, draws WeightSynth several times (and, against
ObfusLM+, its own hidden-dimension transform), and fits an MLP from obfuscated rows to the
original rows (cosine loss); recovered rows are decoded by nearest neighbour in the public table.
"""

from __future__ import annotations

import torch
from torch import nn

from dpkit import TrainingCurve
from dpkit_obfuslm.cluster import Clusters
from dpkit_obfuslm.hidden import hidden_key
from dpkit_obfuslm.obfuscate import VocabKey, cached_clusters
from dpkit_obfuslm.synth import weight_synth

def own_clusters(table: torch.Tensor, k: int, beta: float,
                 generator: torch.Generator) -> tuple[VocabKey, Clusters]:
    """The attacker's own permutation, drawn from ``generator`` on every call (so a cell's draws
    never depend on which cells ran before it), and the clustering of the permuted table, cached
    by content like the client's (:func:`cached_clusters`)."""
    key = VocabKey.random(table.shape[0], generator)
    return key, cached_clusters(key.permute_rows(table.detach().float()), k, beta, 1024)


def training_pairs(table: torch.Tensor, obf: dict, draws: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Obfuscated rows (in original token order) and their original rows, ``draws`` times over."""
    if not obf or not obf.get("mix", True):  # plaintext, or rows left unmixed
        return table, table
    key, clusters = own_clusters(table, obf["k"], obf["beta"], generator)
    permuted = key.permute_rows(table)
    xs = []
    for _ in range(draws):
        weights = weight_synth(permuted, clusters, obf["epsilon"], generator,
                               obf.get("calibration", "exact"))
        rows = weights.apply(permuted)
        if obf.get("plus"):
            rows = rows @ hidden_key(rows, k=obf["k_star"], beta=obf["beta"],
                                     epsilon=obf["epsilon_star"], generator=generator).transform
        xs.append(rows[key.forward.to(rows.device)])
    return torch.cat(xs), table.repeat(draws, 1)


class Inverter(nn.Module):
    """x + MLP(x), the last layer zero-initialised: starts as plain KNN and learns corrections."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        nn.init.zeros_(self.mlp[2].weight)
        nn.init.zeros_(self.mlp[2].bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Estimated original rows (up to scale)."""
        return x + self.mlp(x)


VALIDATION_ROWS = 4096
CURVE_POINTS = 20


def validation_pairs(table: torch.Tensor, obf: dict,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One more of the attacker's own obfuscations, never trained on (its own generator, seeded
    next to ``generator``'s, so training draws are unchanged), up to VALIDATION_ROWS rows."""
    val_gen = torch.Generator(device=generator.device).manual_seed(generator.initial_seed() + 1)
    x, y = training_pairs(table, obf, 1, val_gen)
    rows = torch.randperm(x.shape[0], generator=val_gen, device=val_gen.device)[:VALIDATION_ROWS]
    rows = rows.to(x.device)
    return x[rows], nn.functional.normalize(y[rows], dim=1)


def cosine_loss(net: nn.Module, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean 1 − cos(net(x), target) for unit-norm ``target`` rows."""
    return (1 - (nn.functional.normalize(net(x), dim=1) * target).sum(1)).mean()


def train_inverter(table: torch.Tensor, obf: dict, params, generator: torch.Generator,
                   say=lambda msg: None) -> tuple[nn.Module, TrainingCurve]:
    """Fit the inversion network on the attacker's own obfuscations; returns it in eval mode and
    its curve: mean training loss since the last point and the loss on a held-out obfuscation,
    CURVE_POINTS times over the run."""
    x, y = training_pairs(table, obf, params.draws, generator)
    val_x, val_y = validation_pairs(table, obf, generator)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator,
                                            device=generator.device)))
        net = Inverter(table.shape[1], params.hidden)
    net = net.to(table.device)
    opt = torch.optim.Adam(net.parameters(), lr=params.lr)
    target = nn.functional.normalize(y, dim=1)
    curve = TrainingCurve("learned inversion", unit="step")
    every = max(1, params.steps // CURVE_POINTS)
    since, total = 0, 0.0
    for step in range(1, params.steps + 1):
        idx = torch.randint(0, x.shape[0], (params.batch_size,), generator=generator,
                            device=generator.device).to(x.device)
        loss = cosine_loss(net, x[idx], target[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        since, total = since + 1, total + float(loss.detach())
        if step % every == 0 or step == params.steps:
            with torch.no_grad():
                curve.add(step, total / since, float(cosine_loss(net, val_x, val_y)))
            since, total = 0, 0.0
    say(f"learned inversion: {params.steps} steps, final loss {curve.final_train:.4f}, "
        f"held-out obfuscation {curve.final_val:.4f}")
    return net.eval(), curve
