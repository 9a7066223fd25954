"""Test helpers for plug-in authors: contract suites and hypothesis strategies.

``from dpkit.testing import MechanismContract`` and subclass it in your tests. Strategies for
accounting and token mechanisms live in ``strategies_accounting`` / ``strategies_tokens`` and are
re-exported here when installed.
"""

from __future__ import annotations

import importlib
import importlib.util

from dpkit.testing.audit_contracts import DefenseAuditContract
from dpkit.testing.contracts import AttackContract, MechanismContract
from dpkit.testing.defense_contract import DefenseContract
from dpkit.testing.samples import same_distribution

_LAZY = tuple(name for name in ("strategies", "strategies_accounting", "strategies_tokens")
              if importlib.util.find_spec(f"dpkit.testing.{name}") is not None)

__all__ = ["AttackContract", "DefenseAuditContract", "DefenseContract", "MechanismContract",
           "same_distribution", *_LAZY]


def __getattr__(name: str):
    """Import the strategy modules on first use (hypothesis is a test-only dependency)."""
    if name in _LAZY:
        return importlib.import_module(f"dpkit.testing.{name}")
    raise AttributeError(f"module 'dpkit.testing' has no attribute {name!r}")
