"""Each cell's guarantees against the spec's privacy settings, before the first cell runs.

A guarantee the spec's ledger cannot compose (ε stated for replace-one neighbours in a spec whose
ledger counts add/remove ones, (ε, δ) with δ > 0 under the RDP accountant) fails every cell that
declares it. :func:`check_guarantees` finds those from params alone — a mechanism's
``guarantee(space=None)``, a defense's ``planned_spends(privacy)`` — and
:func:`refusal_error` turns what a cell's declared releases were refused with into one
:class:`SpecError` that names the methods and the fix in the spec's ``privacy:`` block.
Guarantees that need the data (a defense's ``releases(ctx)``) are checked by ``dpkit run``
before its first cell (:mod:`dpkit.runner.preflight`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from dpkit.accounting.ledger import Ledger
from dpkit.base.errors import AccountingError, SpecError
from dpkit.contract.privacy import PrivacySettings
from dpkit.contract.protocols import PlansSpends
from dpkit.contract.registry import Registry

ACCOUNTANTS = ("rdp", "pld")
RELATIONS = ("add_remove", "replace_one", "replace_special")
UNKNOWN = object()
"""What :func:`params_guarantees` returns when the guarantees need the data to be known."""


def refusal(guarantee: Any, accountant: str, neighboring: str, delta: float = 1e-5) -> str | None:
    """Why a ledger with these settings refuses ``guarantee`` (None: it records it)."""
    try:
        Ledger(delta=delta, accountant=accountant, neighboring=neighboring).spend(guarantee, "check")
    except AccountingError as exc:
        return str(exc)
    return None


def spec_fix(guarantee: Any, privacy: Any) -> dict[str, str] | None:
    """The smallest change to the spec's ``privacy:`` settings under which the ledger composes
    ``guarantee`` (neighbouring first, then accountant, then both); None if none does."""
    current = (privacy.accountant, privacy.neighboring)
    options = [(privacy.accountant, n) for n in RELATIONS] + \
              [(a, privacy.neighboring) for a in ACCOUNTANTS] + \
              [(a, n) for a in ACCOUNTANTS for n in RELATIONS]
    for accountant, neighboring in options:
        if (accountant, neighboring) != current and \
                refusal(guarantee, accountant, neighboring, privacy.delta) is None:
            change = {}
            if neighboring != privacy.neighboring:
                change["neighboring"] = neighboring
            if accountant != privacy.accountant:
                change["accountant"] = accountant
            return change
    return None


def params_guarantees(cell: Any, registry: Registry, privacy: PrivacySettings) -> list[Any] | object:
    """The guarantees a cell declares that are known from its params, or :data:`UNKNOWN`."""
    try:
        if cell.kind == "mechanism":
            mechanism = registry.build("mechanism", cell.component, cell.params)
            return [mechanism.guarantee(None)]
        defense = registry.build("defense", cell.component, cell.params)
        if isinstance(defense, PlansSpends):
            return [g for g, _label, _count in defense.planned_spends(privacy)]
    except Exception:  # noqa: BLE001 — a component that needs its data to say is checked at run
        return UNKNOWN
    return UNKNOWN


def check_guarantees(spec: Any, cells: Iterable[Any], registry: Registry) -> set[str]:
    """Raise one SpecError for every guarantee the spec's ledger would refuse (known from params);
    returns the methods whose guarantees need the data (checked by ``dpkit run``).

    A mechanism's guarantee is checked once per distinct params (it is cheap); a defense's
    planned spends at each method's first cell (they may calibrate noise, which takes a while).
    """
    seen: set[str] = set()
    unknown: set[str] = set()
    refused: list[tuple[str, Any, str]] = []
    for cell in cells:
        # a defense's planned spends may calibrate noise: its first cell stands for its sweep
        which = cell.params if cell.kind == "mechanism" else cell.method
        key = json.dumps([cell.kind, cell.component, which], sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        found = params_guarantees(cell, registry, spec.privacy)
        if found is UNKNOWN:
            unknown.add(cell.method)
            continue
        assert isinstance(found, list)
        first = first_refusal(cell.method, found, spec.privacy)
        if first is not None:
            refused.append(first)
    if refused:
        raise refusal_error(spec, refused)
    return unknown


def first_refusal(method: str, guarantees: Iterable[Any],
                  privacy: Any) -> tuple[str, Any, str] | None:
    """``(method, guarantee, why)`` for the first of ``guarantees`` the spec's ledger refuses."""
    for guarantee in guarantees:
        why = refusal(guarantee, privacy.accountant, privacy.neighboring, privacy.delta)
        if why is not None:
            return method, guarantee, why
    return None


def refusal_error(spec: Any, refused: list[tuple[str, Any, str]]) -> SpecError:
    """One error for all refused guarantees: the methods, what they state, the spec-level fix."""
    privacy = spec.privacy
    method, guarantee, why = refused[0]
    methods = sorted({m for m, _, _ in refused})
    fix = spec_fix(guarantee, privacy)
    who = ", ".join(repr(m) for m in methods)
    if fix is None:
        where = next(loc for loc, e in spec.methods() if e.display == method)
        return SpecError(spec.path, f"{where}.name", f"no privacy setting of a spec lets the "
                         f"ledger compose what {who} declares: {why}")
    settings = ", ".join(f"{k}: {v}" for k, v in fix.items())
    block = (f"add `privacy: {{{settings}}}` to the spec" if "privacy" not in spec.model_fields_set
             else f"set `{settings}` in the spec's `privacy:` block")
    return SpecError(spec.path, "privacy." + "/".join(fix), (
        f"{who} {_stated(guarantee)}, which the spec's ledger ({privacy.accountant} accountant, "
        f"{privacy.neighboring} neighbours) cannot compose, so every cell of "
        f"{'it' if len(methods) == 1 else 'them'} would fail; {block}"))


def _stated(guarantee: Any) -> str:
    """How a guarantee is stated, in words (its event and neighbouring relation)."""
    event = getattr(guarantee, "event", None)
    relation = getattr(event, "neighboring", None)
    name = type(event).__name__ if event is not None else type(guarantee).__name__
    if relation:
        return f"states its guarantee ({name}) for {relation} neighbours"
    return f"declares {name}"
