"""One table of component kinds; hook specs, protocols and registry all agree with it."""

from __future__ import annotations

import inspect

from dpkit.contract import hookspecs, protocols
from dpkit.contract.kinds import HOOKS, KIND_TABLE, KINDS
from dpkit.contract.registry import Registry


def test_every_kind_has_its_hookspec_protocol_and_registry_slot():
    specs = {name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("dpkit_")}
    assert specs == set(HOOKS) | {hookspecs.AUDIT_HOOK} == set(hookspecs.ALL_HOOKS)
    assert set(protocols.PROTOCOLS) == set(KINDS)
    assert set(Registry().entries) == set(KINDS)
    for kind in KIND_TABLE:
        cls = getattr(protocols, kind.protocol)
        assert protocols.PROTOCOLS[kind.name] is cls
        assert all(callable(getattr(cls, m, None)) for m in kind.methods), kind
