"""``dpkit audit NAME``: empirical privacy audit of a registered mechanism against its claim."""

from __future__ import annotations

import json
import sys

from dpkit.errors import ParamsError


def register(sub) -> None:
    """Add the ``audit`` sub-command."""
    p = sub.add_parser("audit", help="empirically test a mechanism's declared privacy guarantee",
                       description="Estimate a lower bound on the privacy loss of a registered "
                       "mechanism and compare it with its declared guarantee. Exit status: 0 PASS, "
                       "1 FAIL, 3 INCONCLUSIVE, 4 LAW_MISMATCH (the draws do not follow the "
                       "declared output law), 2 bad input.")
    p.add_argument("name", help="registered mechanism name (see `dpkit plugins`)")
    p.add_argument("--params", default="{}", help="mechanism params as a JSON object")
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
    from dpkit.context import resolve_device
    from dpkit.errors import AuditError
    from dpkit.plugins import get_registry
    from dpkit.space import EmbeddingSpace

    model = get_registry().build("model", name, params).load(resolve_device(device))
    space = model.as_space() if callable(getattr(model, "as_space", None)) else model
    if not isinstance(space, EmbeddingSpace):
        raise AuditError(f"model {name!r} loads to {type(model).__name__}, which is not an "
                         "EmbeddingSpace and has no as_space(); pick an embedding model")
    return space


def _audit(args) -> int:
    from tqdm import tqdm

    from dpkit.audit import audit, build_mechanism
    from dpkit.audit.auditor import check_settings

    params = _json_arg("--params", args.params)
    check_settings(args.samples, args.confidence)
    mechanism = build_mechanism(args.name, params)  # bad names and params fail before the bar
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
