"""The audit: draw outputs for worst-case-seeking input pairs and test the declared guarantee."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable
from typing import Any

import torch

from dpkit.audit import blackbox, exact
from dpkit.audit.claims import Claim
from dpkit.audit.inputs import (
    AuditPair,
    draw,
    make_test_space,
    select_pairs,
    sequence_unit,
)
from dpkit.audit.law import radial_law_pvalues
from dpkit.audit.report import AuditReport, Finding, Verdict
from dpkit.audit.stats import certifiable_epsilon
from dpkit.audit.verdict import decide
from dpkit.audit.whitebox import noise_checks
from dpkit.contract.context import derive_seed, resolve_device
from dpkit.base.errors import AuditError
from dpkit.contract.protocols import ExactDensity, ExactOutputProbs
from dpkit.contract.registry import Registry
from dpkit.text.space import EmbeddingSpace

Progress = Callable[[int, int, str], None]
KEEP_PAIRS = 4
GOF_LEVEL = 0.02
"""The sampler-vs-declared-law test runs at level (1 − confidence)·GOF_LEVEL: its rejection only
gives LAW_MISMATCH (and fails contract suites), so it is kept rare for correct mechanisms."""


def build_mechanism(mechanism: Any, params: dict | None = None,
                    registry: Registry | None = None) -> Any:
    """A mechanism instance from a registered name (looked up in ``registry``), a class or an
    instance (params validated)."""
    from dpkit.contract.registry import validate_params

    if isinstance(mechanism, str):
        if registry is None:
            raise AuditError(f"mechanism {mechanism!r} is a registered name: pass the registry "
                             "(registry=...) or the class")
        cls = registry.get("mechanism", mechanism).cls
    elif inspect.isclass(mechanism):
        cls = mechanism
    else:
        if params:
            raise AuditError("params were given together with a mechanism instance; pass the "
                             "registered name or the class instead")
        return mechanism
    return cls(validate_params(cls, params or {}))


def check_settings(samples: int, confidence: float) -> None:
    """Raise AuditError for a sample count or confidence the auditor cannot use."""
    if not 0.5 <= confidence < 1:
        raise AuditError(f"confidence must lie in [0.5, 1), got {confidence!r}; e.g. 0.95")
    if samples < 100:
        raise AuditError(f"samples must be ≥ 100 draws per input, got {samples!r}")


def audit(mechanism: Any, params: dict | None = None, *, samples: int = 4000,
          confidence: float = 0.95, seed: int = 0, space: EmbeddingSpace | None = None,
          delta: float = 1e-5, device: str = "cpu", registry: Registry | None = None,
          progress: Progress | None = None, rel_tol: float = 0.01, abs_tol: float = 0.01,
          exact_tokens: int = 64) -> AuditReport:
    """Audit ``mechanism`` (name, class or instance): PASS / FAIL / LAW_MISMATCH / INCONCLUSIVE.

    ``samples`` draws per input (half select the event, half bound it); FAIL needs a lower
    confidence bound on ε above the claim by more than ``rel_tol``·claim + ``abs_tol``, so a
    correct mechanism fails with probability at most 1 − ``confidence``.
    """
    check_settings(samples, confidence)
    start = time.perf_counter()
    mech = build_mechanism(mechanism, params, registry)
    dev = resolve_device(device)
    space = (space or make_test_space(seed=seed)).to(dev)
    claim = Claim.from_guarantee(mech.guarantee(space), delta)
    report = AuditReport(getattr(mech, "name", type(mech).__name__),
                         mech.params.model_dump(mode="json"), claim.description, Verdict.PASS, "",
                         confidence, samples, [], claim_kind=claim.kind)
    if claim.kind == "none":
        report.reason = "the mechanism declares no guarantee (ε = ∞): there is nothing to refute"
        report.seconds = time.perf_counter() - start
        return report
    if mech.domain == "table":
        report.verdict = Verdict.INCONCLUSIVE
        report.reason = ("table mechanisms have no generic neighbouring relation between tables; "
                         "the auditor does not test them (test the guarantee in the plug-in)")
        report.seconds = time.perf_counter() - start
        return report
    with _few_threads(dev, space):
        _run(mech, space, claim, report, seed, dev, progress, exact_tokens)
    decide(report, rel_tol, abs_tol, GOF_LEVEL)
    report.seconds = time.perf_counter() - start
    return report


@contextlib.contextmanager
def _few_threads(dev: torch.device, space: EmbeddingSpace):
    """One intra-op thread on CPU for small spaces: audit tensors are tiny, and thread start-up
    dominates them (20× slower on a loaded 2-core machine); restored afterwards."""
    previous = torch.get_num_threads()
    small = dev.type == "cpu" and space.size * space.dim < 1_000_000
    if small:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if small:
            torch.set_num_threads(previous)


def _run(mech: Any, space: EmbeddingSpace, claim: Claim, report: AuditReport, seed: int,
         dev: torch.device, progress: Progress | None, exact_tokens: int) -> None:
    alpha = 1 - report.confidence
    domain = mech.domain
    per_row = domain in ("embedding", "token") and not sequence_unit(claim)
    pair_gen = torch.Generator().manual_seed(derive_seed(seed, "audit-pairs"))
    draw_gen = torch.Generator(device=dev).manual_seed(derive_seed(seed, "audit-draws"))
    sensitivity = float(getattr(mech.params, "sensitivity", 1.0) or 1.0)
    has_density = isinstance(mech, ExactDensity) and domain == "embedding" and per_row
    has_probs = isinstance(mech, ExactOutputProbs) and domain == "token" and per_row
    allowed = _anonymity_pairs(mech, space, claim, exact_tokens, dev, has_probs)
    candidates = select_pairs(domain, space, claim, pair_gen, sensitivity, allowed)
    steps = min(len(candidates), KEEP_PAIRS if per_row else 2) + 2
    pairs = _screen(mech, candidates, space, claim, draw_gen, per_row, report)
    if progress:
        progress(1, steps, f"screened {len(candidates)} input pairs")
    n = report.samples
    half = n // 2
    report.strategies.append("black-box " + ("discrete" if domain == "token" else "continuous"))
    gof: list[float] = []
    exact_findings: list[Finding] = []
    for k, pair in enumerate(pairs):
        ys_x, ys_xp = _draw_pair(mech, pair, n, space, draw_gen, per_row, report)
        log_ratio = _density(mech, pair, report) if has_density else None
        if domain == "token":
            event = blackbox.discrete_event(ys_x[:half], ys_xp[:half], space.tokens, claim.delta)
        else:
            stats = blackbox.continuous_statistics(ys_x[:half], ys_xp[:half], pair.x.to(dev),
                                                   pair.x_prime.to(dev), log_ratio)
            event = blackbox.continuous_event(ys_x[:half], ys_xp[:half], stats, claim.delta)
        report.findings.append(blackbox.held_out_finding(
            event, ys_x[half:], ys_xp[half:], alpha / max(len(pairs), 1), claim.delta,
            strategy=report.strategies[0], pair=pair.label, distance=pair.distance,
            claimed=pair.claimed))
        if log_ratio is not None:
            gof.append(exact.density_consistency(log_ratio, ys_x, ys_xp))
            for ids, ys in ((pair.x, ys_x), (pair.x_prime, ys_xp)):
                law = radial_law_pvalues(mech.log_density, ids.to(dev), ys, seed + k)
                gof.extend(law.values())
                for stat, p in law.items():
                    worst = report.checks.setdefault("law_tests", {})
                    worst[stat] = min(p, worst.get(stat, 1.0))
            exact_findings.append(exact.continuous_exact(
                log_ratio, ys_x, ys_xp, pair.x.to(dev), pair.x_prime.to(dev), claim, pair.claimed,
                alpha, pair=pair.label, distance=pair.distance))
        if has_probs:
            for ids, ys in ((pair.x, ys_x), (pair.x_prime, ys_xp)):
                gof.append(exact.discrete_consistency(
                    mech.output_log_probs(ids.to(dev), space)[0], ys))
        if progress:
            progress(k + 2, steps, pair.label)
    if has_probs:
        exact_findings.extend(_discrete_exact(mech, space, claim, report, exact_tokens, dev))
    if pairs:
        gof.extend(noise_checks(mech, space, claim, pairs[0], report, seed, per_row))
    if exact_findings:
        report.strategies.append(exact_findings[0].strategy)
    if gof:
        p_min = min(min(gof) * len(gof), 1.0)
        report.checks["sampler_matches_declared_law_p"] = float(p_min)
        report.checks["sampler_matches_declared_law"] = bool(p_min >= alpha * GOF_LEVEL)
    report.checks["exact_findings"] = exact_findings
    per_pair_alpha = alpha / max(len(pairs), 1)
    report.checks["certifiable_epsilon"] = certifiable_epsilon(n - half, per_pair_alpha,
                                                               claim.delta)
    if progress:
        progress(steps, steps, "verdict")


def _draw_pair(mech: Any, pair: AuditPair, n: int, space: EmbeddingSpace, gen: torch.Generator,
               per_row: bool, report: AuditReport) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` draws under each input of ``pair``; counts draws and their time on the report."""
    start = time.perf_counter()
    ys_x = draw(mech, pair.x, n, space, gen, per_row)
    ys_xp = draw(mech, pair.x_prime, n, space, gen, per_row)
    report.samples_drawn += 2 * n
    report.draw_seconds += time.perf_counter() - start
    return ys_x, ys_xp


def _screen(mech: Any, candidates: list[AuditPair], space: EmbeddingSpace, claim: Claim,
            gen: torch.Generator, per_row: bool, report: AuditReport) -> list[AuditPair]:
    """Keep the :data:`KEEP_PAIRS` (2 for sequence mechanisms) candidates whose quick draws look
    most distinguishable relative to their claim (worst-case seeking; these draws are not
    reused for the verdict)."""
    keep = KEEP_PAIRS if per_row else 2  # sequence mechanisms are drawn one call per draw
    if len(candidates) <= keep:
        return candidates
    n = max(128, min(report.samples // 8, 1000)) if per_row else 64
    scores = []
    for pair in candidates:
        ys_x, ys_xp = _draw_pair(mech, pair, n, space, gen, per_row, report)
        if mech.domain == "token":
            event = blackbox.discrete_event(ys_x, ys_xp, None, claim.delta)
        else:
            dev = ys_x.device
            stats = blackbox.continuous_statistics(ys_x, ys_xp, pair.x.to(dev),
                                                   pair.x_prime.to(dev), None)
            event = blackbox.continuous_event(ys_x, ys_xp, stats, claim.delta)
        scores.append(event.score - pair.claimed)
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    return [candidates[i] for i in order[:keep]]


def _anonymity_pairs(mech: Any, space: EmbeddingSpace, claim: Claim, limit: int,
                     dev: torch.device, has_probs: bool) -> torch.Tensor | None:
    """For (k, ε)-anonymity: ``[m, m]`` mask of token pairs in one anonymity set (same support)."""
    if claim.kind != "k_anonymity" or mech.domain != "token":
        return None
    if not has_probs:
        raise AuditError(f"{mech.name} declares (k, ε)-anonymity but has no output_log_probs(ids, "
                         "space); the auditor needs it to find the anonymity sets")
    ids = torch.arange(min(space.size, limit), device=dev)
    support = mech.output_log_probs(ids, space).cpu() > -700
    _, groups = torch.unique(support, dim=0, return_inverse=True)
    return (groups.unsqueeze(0) == groups.unsqueeze(1)) & ~torch.eye(len(groups), dtype=torch.bool)


def _density(mech: Any, pair: AuditPair, report: AuditReport):
    """The declared log-ratio function, or None when the mechanism refuses (e.g. clipping)."""
    try:
        log_ratio = exact.density_log_ratio(mech, pair.x, pair.x_prime)
        log_ratio(pair.x.to(pair.x.device))
        return log_ratio
    except AuditError as exc:
        report.checks["density_unavailable"] = str(exc)
        return None


def _discrete_exact(mech: Any, space: EmbeddingSpace, claim: Claim, report: AuditReport,
                    limit: int, dev: torch.device) -> list[Finding]:
    """Exact all-pairs check over the first ``limit`` tokens (+ anonymity sets for (k, ε))."""
    ids = list(range(min(space.size, limit)))
    log_probs = mech.output_log_probs(torch.tensor(ids, device=dev), space).double().cpu()
    vecs = space.vectors[ids].double().cpu()
    groups = None
    if claim.kind == "k_anonymity":
        support = torch.isfinite(log_probs) & (log_probs > -700)
        _, groups = torch.unique(support, dim=0, return_inverse=True)
        sizes = torch.bincount(groups)[groups]
        report.checks["anonymity_set_min"] = int(sizes.min())
        share = float((sizes < claim.k_requested).double().mean())
        report.checks["anonymity_share_below_k"] = share
        if len(ids) == space.size and int(sizes.min()) < claim.k_achieved:
            i = int(sizes.argmin())
            report.checks["anonymity_violation"] = (
                f"token {space.tokens[i]!r} hides among {int(sizes[i])} tokens, fewer than the "
                f"declared achieved k={claim.k_achieved}")
        elif len(ids) == space.size and share > claim.share_below_k + 1e-9:
            report.checks["anonymity_violation"] = (
                f"{share:.1%} of the vocabulary is in sets smaller than k={claim.k_requested}, "
                f"more than the declared {claim.share_below_k:.1%}")
    distances = torch.cdist(vecs, vecs, compute_mode="donot_use_mm_for_euclid_dist")
    worst, closest = exact.discrete_exact(log_probs, distances, claim, groups, space.tokens, ids)
    return [f for f in (worst, closest) if f is not None]
