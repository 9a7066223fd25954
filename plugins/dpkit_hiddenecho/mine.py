"""MINE mutual-information estimates (Eq. 14–15) and the information-bottleneck loss (Eq. 12)."""

from __future__ import annotations

import math

import torch
from torch import nn


class StatisticsNetwork(nn.Module):
    """The MINE critic ``T_θ(x, y)``: a small MLP on the concatenated pair."""

    def __init__(self, x_dim: int, y_dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(x_dim + y_dim, hidden), nn.ELU(),
                                 nn.Linear(hidden, hidden), nn.ELU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Scores ``[N]`` of the pairs ``(x[k], y[k])``."""
        return self.net(torch.cat([x, y], dim=-1)).squeeze(-1)


def donsker_varadhan(critic: StatisticsNetwork, x: torch.Tensor, y: torch.Tensor,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """The MINE lower bound ``E_P(x,y)[T] − log E_P(x)P(y)[e^T]`` on a batch of pairs (nats).

    The product of marginals is sampled by shuffling ``y`` against ``x``. Eq. 14 of the paper
    prints ``exp(E[T])`` for the second term; that is not a bound on MI — the Donsker–Varadhan
    form used by MINE (Belghazi et al., 2018) is ``log E[exp(T)]``, implemented here.
    """
    if x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise ValueError(f"MINE needs at least 2 paired rows, got x {tuple(x.shape)}, "
                         f"y {tuple(y.shape)}")
    n = x.shape[0]
    perm = torch.randperm(n, generator=generator, device="cpu" if generator is None
                          else generator.device).to(x.device)
    joint = critic(x, y).mean()
    marginal = torch.logsumexp(critic(x, y[perm]), dim=0) - math.log(n)
    return joint - marginal


class MineEstimator(nn.Module):
    """A critic with its own optimizer: ``fit`` maximizes the bound, ``estimate`` reads it."""

    def __init__(self, x_dim: int, y_dim: int, hidden: int = 64, lr: float = 1e-3) -> None:
        super().__init__()
        self.critic = StatisticsNetwork(x_dim, y_dim, hidden)
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def fit(self, x: torch.Tensor, y: torch.Tensor, steps: int,
            generator: torch.Generator | None = None) -> float:
        """Take ``steps`` ascent steps on the bound for fixed (detached) samples; last value."""
        x, y = x.detach(), y.detach()
        value = float("nan")
        for _ in range(steps):
            bound = donsker_varadhan(self.critic, x, y, generator)
            self.optimizer.zero_grad(set_to_none=True)
            (-bound).backward()
            self.optimizer.step()
            value = float(bound.detach())
        return value

    def estimate(self, x: torch.Tensor, y: torch.Tensor,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """The bound with gradients flowing into ``x`` and ``y`` (not into the critic)."""
        self.critic.requires_grad_(False)
        try:
            return donsker_varadhan(self.critic, x, y, generator)
        finally:
            self.critic.requires_grad_(True)


def sample_tokens(mask: torch.Tensor, limit: int, generator: torch.Generator) -> torch.Tensor:
    """Flat indices of up to ``limit`` unmasked positions of ``mask`` ``[B, n]``, drawn at random."""
    flat = mask.reshape(-1).nonzero().squeeze(-1)
    if flat.numel() <= limit:
        return flat
    pick = torch.randperm(flat.numel(), generator=generator, device=generator.device)[:limit]
    return flat[pick.to(flat.device)]


def token_rows(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``[k, d]`` of ``states`` ``[B, n, d]`` at flat token positions ``index``."""
    return states.reshape(-1, states.shape[-1])[index]


def ib_term(critics: nn.ModuleList, x: torch.Tensor, states: list[torch.Tensor],
            idx: torch.Tensor, steps: int, generator: torch.Generator,
            bounds: list[float]) -> torch.Tensor:
    """Mean MINE estimate of I(x; H_i^dn) over the sent layers at token positions ``idx`` (each
    critic fitted ``steps`` times first); the critics' mean bound after fitting goes to
    ``bounds``. Zero when there are no critics."""
    if not len(critics):
        return torch.zeros((), device=x.device)
    total, fitted = 0.0, 0.0
    for critic, h in zip(critics, states):
        y = token_rows(h, idx)
        fitted += critic.fit(x, y, steps, generator)
        total = total + critic.estimate(x, y, generator)
    bounds.append(fitted / len(critics))
    return total / len(critics)
