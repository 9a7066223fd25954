"""Canaries for split-inference defenses: is token a or its neighbour b behind what was uploaded?

Canary i is a pair of vocabulary tokens (aᵢ, bᵢ) at distance dᵢ in the public embedding space:
the client sends aᵢ if the canary is included, bᵢ otherwise, through the defense's own client
path and ``ctx.wire`` (:mod:`dpkit.release.wire`, the one release path). The server-side attacker sees
every floating-point tensor sent up the wire and scores it with the log-likelihood ratio of the
*declared* dχ law, η(‖y − bᵢ‖ − ‖y − aᵢ‖) per uploaded vector, plus a certainty (±1e6) for any
vector equal to aᵢ or bᵢ. Under η-metric DP each canary costs at most η·max dᵢ: the claim is the
run's ledger ``metric_epsilon`` at that distance (∞ if anything crossed the wire uncovered).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from dpkit.audit.canary import CanaryRun
from dpkit.base.errors import AuditError
from dpkit.contract.protocols import DxLaplaceNoise

EXACT = 1e-5
CERTAIN = 1e6


def canary_pairs(vectors: torch.Tensor, m: int, generator: torch.Generator,
                 exclude: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """m pairs (a, b): a drawn from the vocabulary (``exclude``d ids left out), b its nearest
    other token; draws repeat when m exceeds the vocabulary."""
    allowed = torch.ones(len(vectors), dtype=torch.bool)
    if exclude is not None:
        allowed[exclude.cpu()] = False
    pool = allowed.nonzero().squeeze(1)
    a = pool[torch.randint(len(pool), (m,), generator=generator)]
    dist = torch.cdist(vectors[a].float(), vectors[pool].float())
    dist[pool.unsqueeze(0) == a.unsqueeze(1)] = float("inf")
    b = pool[dist.argmin(dim=1)]
    return a, b


def declared_llr(uploads: list[torch.Tensor], a: torch.Tensor, b: torch.Tensor,
                 eta: float) -> np.ndarray:
    """Σ over uploaded vectors of η(‖y − b‖ − ‖y − a‖), ±1e6 for exact copies of a or b.

    Uploads that are not one or more embedding-width vectors per canary (masks) are skipped."""
    score = torch.zeros(len(a), dtype=torch.float64)
    for y in uploads:
        if y.ndim == 0 or y.shape[-1] != a.shape[-1] or y.numel() % (len(a) * a.shape[-1]):
            continue
        y = y.double().reshape(len(a), -1, a.shape[-1])
        da = (y - a.double().unsqueeze(1)).norm(dim=-1)
        db = (y - b.double().unsqueeze(1)).norm(dim=-1)
        score += (eta * (db - da)).sum(1)
        score += CERTAIN * ((da < EXACT).sum(1) - (db < EXACT).sum(1))
    return score.clamp(-CERTAIN, CERTAIN).numpy()


class SplitCanaryAudit:
    """Base of a split-inference adapter: subclasses give the space and send the canary texts."""

    unit = "token (one token replaced by its nearest neighbour)"

    def __init__(self, defense: Any):
        self.defense = defense

    def setup(self, ctx) -> tuple[Any, torch.Tensor | None]:
        """Load what the client needs; return (embedding space, token ids never used as canary)."""
        raise NotImplementedError

    def send(self, ctx, ids: torch.Tensor) -> float:
        """Declare and send one single-token text per id through ``ctx.wire``; return η."""
        raise NotImplementedError

    def audit_run(self, ctx, included: np.ndarray) -> CanaryRun:
        """Send aᵢ or bᵢ per canary, score the uploads with the declared law, claim η·max d."""
        ctx.bind_server(self.defense)  # the defense's server (default: a passive one) receives
        space, specials = self.setup(ctx)
        vectors = space.vectors.cpu()
        a, b = canary_pairs(vectors, len(included), ctx.generator("split-canaries", "cpu"),
                            specials)
        sent = torch.where(torch.as_tensor(included), a, b)
        ctx.say(f"uploading {len(sent)} canary tokens")
        with record_uploads(ctx.wire) as uploads:
            eta = self.send(ctx, sent.to(ctx.device))
        ctx.wire.close()
        distance = float((vectors[a] - vectors[b]).norm(dim=-1).max())
        scores = declared_llr(uploads, vectors[a], vectors[b], eta)
        law = independence_law(uploads, vectors[sent], eta)
        mech: Any = getattr(self, "mechanism", None)
        if isinstance(mech, DxLaplaceNoise):  # a capability, whatever the mechanism is called
            upload = first_per_canary(uploads, len(sent), vectors.shape[1])
            if upload is not None:
                rng = np.random.default_rng(ctx.seed)
                law["upload noise"] = (
                    laplace_law_p_value(upload, vectors[sent], eta, mech.clip_bound, rng),
                    f"‖upload − sent token‖ against the declared η={eta:g} Laplace dχ law "
                    "(reference sampler in numpy, the mechanism's clip applied)")
        return CanaryRun(scores, float(ctx.ledger.metric_epsilon([distance])),
                         ctx.ledger.delta_target, self.unit,
                         {"eta": eta, "max_pair_distance": distance,
                          "uploads": [tuple(u.shape) for u in uploads]}, law=law)


def independence_law(uploads: list[torch.Tensor], sent: torch.Tensor, eta: float) -> dict:
    """``{"noise independence": (p, what)}``: the noise of the first and second half of the
    canaries (upload − sent token) must neither repeat nor correlate (a client that re-seeds or
    reuses its draw per text repeats it); empty when there is no finite η or no such upload."""
    from dpkit.audit.independence import dependence

    upload = first_per_canary(uploads, len(sent), sent.shape[1])
    if upload is None or not math.isfinite(eta) or len(sent) < 8:
        return {}
    noise = upload.double() - sent.double()
    half = len(noise) // 2
    p, repeats = dependence(noise[:half], noise[half:2 * half])
    return {"noise independence": (p, f"the upload noise of canaries i and i + {half} must be "
                                      f"independent ({repeats} of {half} repeated exactly)")}


def first_per_canary(uploads: list[torch.Tensor], m: int, dim: int) -> torch.Tensor | None:
    """The first upload holding exactly one embedding-width vector per canary, ``[m, dim]``."""
    for y in uploads:
        if y.numel() == m * dim and y.shape[-1] == dim:
            return y.reshape(m, dim)
    return None


def laplace_law_p_value(upload: torch.Tensor, sent: torch.Tensor, eta: float,
                        clip_bound: float | None, rng: np.random.Generator,
                        copies: int = 20) -> float:
    """Two-sample KS p-value of ‖y − x‖ for the uploads against ``copies`` reference draws per
    token of the declared law: x + r·u, r ~ Gamma(d, 1/η), u uniform on the sphere (numpy, so a
    bug in the plug-in's sampler cannot reach the reference), then the same norm clip."""
    from scipy import stats

    x = sent.double().cpu().numpy()
    m, d = x.shape
    direction = rng.standard_normal((copies, m, d))
    direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
    ref = x + rng.gamma(d, 1.0 / eta, (copies, m, 1)) * direction
    if clip_bound is not None:
        norms = np.linalg.norm(ref, axis=-1, keepdims=True)
        ref = ref * np.minimum(1.0, clip_bound / np.maximum(norms, 1e-30))
    observed = np.linalg.norm(upload.double().cpu().numpy() - x, axis=-1)
    reference = np.linalg.norm(ref - x, axis=-1).ravel()
    return float(stats.ks_2samp(observed, reference).pvalue)


@contextlib.contextmanager
def record_uploads(wire) -> Iterator[list[torch.Tensor]]:
    """Every floating-point tensor that reached the server (its real rows) while inside, as the
    auditor's in-process server received it (:func:`dpkit.audit.defense.audit_context`)."""
    uploads: list[torch.Tensor] = []
    before = len(_received(wire)) if wire._channel is not None else 0
    yield uploads
    for message in _received(wire)[before:]:
        if message.tensor is not None and message.tensor.is_floating_point():
            uploads.append(message.rows.detach().cpu().clone())


def _received(wire) -> list:
    host = getattr(wire.channel(), "host", None)
    received = getattr(host, "received", None)
    if received is None:
        raise AuditError("a canary audit scores what reached the server: run it in "
                         "dpkit.audit.defense.audit_context (an in-process server that keeps "
                         "what it receives)")
    return received
