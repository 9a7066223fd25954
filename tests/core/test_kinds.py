"""One table of component kinds; hook specs, protocols and registry all agree with it."""

from __future__ import annotations

import inspect

from dpkit import hookspecs, protocols
from dpkit.kinds import HOOKS, KIND_TABLE, KINDS
from dpkit.registry import Registry


def test_every_kind_has_its_hookspec_protocol_and_registry_slot():
    specs = {name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("dpkit_")}
    assert specs == set(HOOKS)
    assert set(protocols.PROTOCOLS) == set(KINDS)
    assert set(Registry().entries) == set(KINDS)
    for kind in KIND_TABLE:
        cls = kind.protocol_class()
        assert protocols.PROTOCOLS[kind.name] is cls
        assert all(callable(getattr(cls, m, None)) for m in kind.methods), kind
