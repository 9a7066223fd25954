"""JSON-ready dicts for dp-accounting events and guarantees (no pickle, no eval).

Events are written as ``{"type": "GaussianDpEvent", "noise_multiplier": 4.0}``, nesting inner
events; only classes defined in ``dp_accounting.dp_event`` are accepted when reading back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.base.errors import AccountingError

if TYPE_CHECKING:  # dp-accounting is imported by the functions that handle (ε, δ) events only
    import dp_accounting


def _value_to_json(value: Any) -> Any:
    import dp_accounting

    if isinstance(value, dp_accounting.DpEvent):
        return event_to_dict(value)
    if isinstance(value, (list, tuple)):
        return [_value_to_json(v) for v in value]
    return value


def event_to_dict(event: dp_accounting.DpEvent) -> dict[str, Any]:
    """A JSON-ready dict describing ``event`` (its class name and fields, nested)."""
    import attr

    out: dict[str, Any] = {"type": type(event).__name__}
    for f in attr.fields(type(event)):
        out[f.name] = _value_to_json(getattr(event, f.name))
    return out


def _value_from_json(value: Any) -> Any:
    if isinstance(value, dict) and "type" in value:
        return event_from_dict(value)
    if isinstance(value, list):
        return [_value_from_json(v) for v in value]
    return value


def event_from_dict(data: dict[str, Any]) -> dp_accounting.DpEvent:
    """Rebuild a dp-accounting event written by :func:`event_to_dict`."""
    import dp_accounting
    from dp_accounting import dp_event as _dp_event_module

    from dpkit.accounting import pure as _pure_module

    name = data.get("type")
    cls = getattr(_dp_event_module, str(name), None) or getattr(_pure_module, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, dp_accounting.DpEvent)):
        raise AccountingError(f"unknown dp-accounting event type {name!r} in ledger data; "
                              "expected a class from dp_accounting.dp_event or "
                              "dpkit.accounting.pure")
    fields = {k: _value_from_json(v) for k, v in data.items() if k != "type"}
    try:
        return cls(**fields)
    except TypeError as exc:
        raise AccountingError(f"cannot rebuild {name} from fields {sorted(fields)}: {exc}") from exc


def guarantee_to_dict(g: Guarantee) -> dict[str, Any]:
    """A JSON-ready dict for any guarantee, tagged with its ``notion``."""
    if isinstance(g, DpGuarantee):
        return {"notion": g.notion, "event": event_to_dict(g.event), "description": g.description}
    if isinstance(g, MetricDpGuarantee):
        return {"notion": g.notion, "eta": g.eta, "metric": g.metric, "space": g.space,
                "unit": g.unit}
    if isinstance(g, KAnonymityGuarantee):
        return {"notion": g.notion, "k_requested": g.k_requested, "k_achieved": g.k_achieved,
                "share_below_k": g.share_below_k, "epsilon": g.epsilon}
    if isinstance(g, NoGuarantee):
        return {"notion": g.notion, "reason": g.reason}
    raise AccountingError(f"not a dpkit guarantee: {g!r}; use one of DpGuarantee, "
                          "MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee")


def guarantee_from_dict(data: dict[str, Any]) -> Guarantee:
    """Rebuild a guarantee written by :func:`guarantee_to_dict`."""
    notion = data.get("notion")
    fields = {k: v for k, v in data.items() if k != "notion"}
    if notion == "dp":
        return DpGuarantee(event_from_dict(fields["event"]), fields.get("description", ""))
    kinds = {"metric_dp": MetricDpGuarantee, "k_anonymity": KAnonymityGuarantee,
             "none": NoGuarantee}
    if notion not in kinds:
        raise AccountingError(f"unknown guarantee notion {notion!r} in ledger data; expected one "
                              "of dp, metric_dp, k_anonymity, none")
    return kinds[notion](**fields)


def describe_event(event: dp_accounting.DpEvent) -> str:
    """A compact description of an event, e.g. ``Poisson(q=0.01)∘Gaussian(σ/Δ=4) ×1000``.

    dp-accounting's events hold noise *multipliers* (noise scale over sensitivity), so the labels
    say ``σ/Δ`` and ``b/Δ``, never a bare ``σ`` that reads as the standard deviation.
    """
    import dp_accounting

    from dpkit.accounting import pure as _pure_module

    if isinstance(event, dp_accounting.GaussianDpEvent):
        return f"Gaussian(σ/Δ={event.noise_multiplier:g})"
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return f"Laplace(b/Δ={event.noise_multiplier:g})"
    if isinstance(event, (_pure_module.PureDpEvent, _pure_module.ApproxDpEvent)):
        delta = f", δ={event.delta:g}" if isinstance(event, _pure_module.ApproxDpEvent) else ""
        under = f", {event.neighboring}" if event.neighboring else ""
        return f"ε-DP(ε={event.epsilon:g}{delta}{under})"
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        return f"Poisson(q={event.sampling_probability:g})∘{describe_event(event.event)}"
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        return f"{describe_event(event.event)} ×{event.count}"
    if isinstance(event, dp_accounting.ComposedDpEvent):
        return " + ".join(f"[{describe_event(e)}]" for e in event.events)
    return repr(event)


def describe(g: Guarantee) -> str:
    """A short human-readable description of a guarantee (for tables and messages)."""
    if isinstance(g, DpGuarantee):
        text = describe_event(g.event)
        return f"{g.description}: {text}" if g.description else text
    if isinstance(g, MetricDpGuarantee):
        where = f" on {g.space}" if g.space else ""
        return f"η={g.eta:g} ({g.metric}{where}, per {g.unit})"
    if isinstance(g, KAnonymityGuarantee):
        return (f"k={g.k_achieved} achieved (requested {g.k_requested}, "
                f"{g.share_below_k:.1%} below), ε={g.epsilon:g}")
    return f"ε=∞: {g.reason}"
