"""``dpkit budget``: ε of DP-SGD, σ for a target ε, and the planned spends of a spec.

``dpkit budget dpsgd --noise-multiplier 4 --sampling-rate 0.01 --steps 10000 --delta 1e-5``
``dpkit budget calibrate --target-epsilon 1 --delta 1e-5 --sampling-rate 0.01 --steps 1000``
``dpkit budget spec specs/quick.yaml`` — every command takes ``--json``; the budget store's
``status`` / ``cap`` / ``lift`` / ``close`` / ``verify`` live in :mod:`dpkit.cli.budget_store`.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any


def _number(kind: str, low: float, high: float, *, low_open: bool = True, high_open: bool = False):
    """An argparse type: a finite float in (low, high] (bounds as flagged)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a number, got {text!r}") from None
        above = value > low if low_open else value >= low
        below = value < high if high_open else value <= high
        if not (math.isfinite(value) and above and below):
            lo, hi = ("(" if low_open else "["), (")" if high_open else "]")
            raise argparse.ArgumentTypeError(f"{kind} must lie in {lo}{low:g}, {high:g}{hi}, "
                                             f"got {text}")
        return value
    return parse


def _steps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"steps must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"steps must be ≥ 1, got {value}")
    return value


def register(sub) -> None:
    """Add the ``budget`` sub-command and its ``dpsgd`` / ``calibrate`` / ``spec`` commands."""
    p = sub.add_parser("budget", help="privacy budget: ε of DP-SGD, σ for a target ε, spends of "
                       "a spec")
    commands = p.add_subparsers(dest="budget_command", metavar="COMMAND", parser_class=type(p))
    commands.required = True

    dpsgd = commands.add_parser("dpsgd", help="ε of Poisson-subsampled Gaussian steps (DP-SGD)")
    dpsgd.add_argument("--noise-multiplier", required=True,
                       type=_number("noise multiplier", 0, math.inf, high_open=True))
    _common(dpsgd)
    dpsgd.set_defaults(func=_dpsgd)

    cal = commands.add_parser("calibrate", help="noise multiplier for a target (ε, δ)")
    cal.add_argument("--target-epsilon", required=True,
                     type=_number("target epsilon", 0, math.inf, high_open=True))
    cal.add_argument("--sensitivity", type=_number("sensitivity", 0, math.inf, high_open=True),
                     default=1.0, help="L2 sensitivity (the noise std is multiplier × this)")
    _common(cal)
    cal.set_defaults(func=_calibrate)

    spec = commands.add_parser("spec", help="planned privacy spends of a spec, without running it")
    spec.add_argument("spec", help="spec file")
    spec.add_argument("--json", action="store_true", help="print JSON instead of a table")
    spec.set_defaults(func=_spec)
    from dpkit.cli.budget_store import register_store_commands

    register_store_commands(commands)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sampling-rate", type=_number("sampling rate", 0, 1), default=1.0,
                   help="Poisson sampling rate q (1 = full batch)")
    p.add_argument("--steps", type=_steps, default=1)
    p.add_argument("--delta", type=_number("delta", 0, 1, high_open=True), default=1e-5)
    p.add_argument("--accountant", choices=("rdp", "pld"), default="rdp")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _emit(args, record: dict[str, Any], text: str) -> int:
    print(json.dumps(record, allow_nan=False) if args.json else text)
    return 0


def _dpsgd(args) -> int:
    from dpkit.accounting import dpsgd_event, epsilon_of

    eps = epsilon_of(dpsgd_event(args.noise_multiplier, args.sampling_rate, args.steps),
                     args.delta, args.accountant)
    record = {"noise_multiplier": args.noise_multiplier, "sampling_rate": args.sampling_rate,
              "steps": args.steps, "delta": args.delta, "accountant": args.accountant,
              "epsilon": eps}
    return _emit(args, record, f"ε = {eps:.6f} at δ = {args.delta:g} ({args.accountant.upper()}; "
                 f"σ = {args.noise_multiplier:g}, q = {args.sampling_rate:g}, "
                 f"{args.steps} steps)")


def _calibrate(args) -> int:
    from dpkit.accounting import calibrate_gaussian, dpsgd_event, epsilon_of

    std = calibrate_gaussian(args.target_epsilon, args.delta, sampling_rate=args.sampling_rate,
                             steps=args.steps, sensitivity=args.sensitivity,
                             accountant=args.accountant)
    multiplier = std / args.sensitivity
    achieved = epsilon_of(dpsgd_event(multiplier, args.sampling_rate, args.steps), args.delta,
                          args.accountant)
    record = {"target_epsilon": args.target_epsilon, "delta": args.delta,
              "sampling_rate": args.sampling_rate, "steps": args.steps,
              "sensitivity": args.sensitivity, "accountant": args.accountant,
              "noise_multiplier": multiplier, "noise_std": std, "epsilon": achieved}
    return _emit(args, record, f"noise multiplier σ = {multiplier:.6f} (noise std {std:.6g} at "
                 f"sensitivity {args.sensitivity:g}) gives ε = {achieved:.6f} ≤ "
                 f"{args.target_epsilon:g} at δ = {args.delta:g} ({args.accountant.upper()}; "
                 f"q = {args.sampling_rate:g}, {args.steps} steps)")


def _spec(args) -> int:
    from dpkit.runner.plan import plan_spec, plan_table
    from dpkit.budget.summary import plan_privacy, spec_privacy_text
    from dpkit.contract.plugins import get_registry
    from dpkit.spec import load_spec

    registry = get_registry()
    plans = plan_spec(args.spec, registry)
    total = plan_privacy(load_spec(args.spec, registry=registry), plans, registry)
    if args.json:
        print(json.dumps({"cells": plans, "total": total}, allow_nan=False))
    else:
        print(plan_table(plans) + "\n\n" + spec_privacy_text(total))
    return 0
