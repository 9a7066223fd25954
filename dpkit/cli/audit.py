"""``dpkit audit NAME``: empirical privacy audit of a registered mechanism against its claim."""

from __future__ import annotations

import json
import sys

from dpkit.base.errors import ParamsError


def register(sub) -> None:
    """Add the ``audit`` sub-command."""
    p = sub.add_parser("audit", help="empirically test a mechanism's or defense's privacy claim",
                       description="Estimate a lower bound on the privacy loss of a registered "
                       "mechanism (or, with --defense, of a whole defense run, with canaries) and "
                       "compare it with its declared guarantee (the run's ledger ε). Exit status: "
                       "0 PASS, 1 FAIL, 3 INCONCLUSIVE, 4 LAW_MISMATCH (mechanisms: the draws do "
                       "not follow the declared output law), 2 bad input.")
    p.add_argument("name", nargs="?", help="registered mechanism name (see `dpkit plugins`)")
    p.add_argument("--defense", default=None, metavar="NAME",
                   help="audit this registered defense with canaries instead of a mechanism")
    p.add_argument("--params", default="{}", help="mechanism or defense params as a JSON object")
    p.add_argument("--canaries", type=int, default=1000,
                   help="--defense: canaries per run, each included with probability ½ (1000)")
    p.add_argument("--runs", type=int, default=1,
                   help="--defense: independent runs whose canaries are pooled (default 1)")
    p.add_argument("--method", choices=("one-run", "repeated"), default="one-run",
                   help="--defense: one-run canaries (Steinke et al. 2023, default) or repeated "
                   "runs of one canary each with Clopper–Pearson bounds (needs --runs ≥ 20)")
    p.add_argument("--samples", type=int, default=4000, help="draws per input (default 4000)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the FAIL criterion, in [0.5, 1) (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of input pairs and draws")
    p.add_argument("--delta", type=float, default=1e-5, help="δ for (ε, δ)-DP claims")
    p.add_argument("--space", default=None,
                   help="registered model whose embedding space to audit on (default: a "
                   "generated 48-token test vocabulary)")
    p.add_argument("--space-params", default="{}", help="params of --space as a JSON object")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(func=_audit)


def _json_arg(flag: str, raw: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ParamsError(f"{flag} must be a JSON object, got {raw!r} ({exc.msg}); "
                          'e.g. --params \'{"eta": 5}\'') from None
    if not isinstance(value, dict):
        raise ParamsError(f"{flag} must be a JSON object, got {raw!r}")
    return value


def load_space(name: str, params: dict, device: str):
    """The EmbeddingSpace of registered model ``name`` (directly or via ``as_space()``)."""
    from dpkit.contract.context import resolve_device
    from dpkit.base.errors import AuditError
    from dpkit.contract.plugins import get_registry
    from dpkit.text.space import EmbeddingSpace

    model = get_registry().build("model", name, params).load(resolve_device(device))
    space = model.as_space() if callable(getattr(model, "as_space", None)) else model
    if not isinstance(space, EmbeddingSpace):
        raise AuditError(f"model {name!r} loads to {type(model).__name__}, which is not an "
                         "EmbeddingSpace and has no as_space(); pick an embedding model")
    return space


def _audit(args) -> int:
    from tqdm import tqdm

    if args.defense is not None:
        if args.name is not None:
            raise ParamsError(f"give a mechanism name or --defense, not both (got {args.name!r} "
                              f"and --defense {args.defense!r})")
        return _audit_defense(args)
    if args.name is None:
        raise ParamsError("name a mechanism to audit (`dpkit audit MECHANISM --params ...`) or "
                          "a defense (`dpkit audit --defense DEFENSE --params ...`); "
                          "`dpkit plugins` lists them")

    from dpkit.audit import audit, build_mechanism
    from dpkit.audit.auditor import check_settings
    from dpkit.contract.plugins import get_registry

    params = _json_arg("--params", args.params)
    check_settings(args.samples, args.confidence)
    registry = get_registry()
    mechanism = build_mechanism(args.name, params, registry)  # bad names and params fail first
    space = None
    if args.space:
        space = load_space(args.space, _json_arg("--space-params", args.space_params), args.device)
    bar = tqdm(total=1, desc=f"audit {args.name}", file=sys.stderr, unit="step", leave=False,
               disable=None)

    def progress(done: int, total: int, label: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_postfix_str(label[:40])
        bar.refresh()

    try:
        report = audit(mechanism, None, samples=args.samples, confidence=args.confidence,
                       seed=args.seed, space=space, delta=args.delta, device=args.device,
                       progress=progress)
    finally:
        bar.close()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(report.one_line())
    return report.verdict.exit_code


def _audit_defense(args) -> int:
    from tqdm import tqdm

    from dpkit.audit.defense import audit_defense, build_defense, describe
    from dpkit.contract.plugins import get_registry

    params = _json_arg("--params", args.params)
    registry = get_registry()
    build_defense(args.defense, params, registry)  # bad names and params fail before the bar
    bar = tqdm(total=args.runs, desc=f"audit {args.defense}", file=sys.stderr, unit="run",
               leave=False, disable=None)

    def progress(done: int, total: int, label: str) -> None:
        bar.total = total
        bar.n = done
        bar.set_postfix_str(label[:60])
        bar.refresh()

    try:
        report = audit_defense(args.defense, params, canaries=args.canaries, runs=args.runs,
                               method=args.method, confidence=args.confidence, seed=args.seed, delta=args.delta,
                               device=args.device, progress=progress, registry=registry)
    finally:
        bar.close()
    print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) if args.json
          else describe(report))
    return report.verdict.exit_code
