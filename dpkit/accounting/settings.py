"""A ledger's settings by name — accountants, neighbouring relations, PLD discretisation — checked
without importing dp-accounting (a metric-DP or (k, ε) ledger never needs it)."""

from __future__ import annotations

from dpkit.base.errors import AccountingError

ACCOUNTANTS = ("rdp", "pld")
PLD_DISCRETIZATION = 1e-4
"""dp-accounting's default PLD value-discretisation interval (pessimistic rounding)."""
NEIGHBORINGS = ("add_remove", "replace_one", "replace_special")
"""Relations a ledger composes under: ``add_remove`` (default), ``replace_one``, ``replace_special``."""


def check_accountant(name: str) -> str:
    """Validate an accountant name (``"rdp"`` or ``"pld"``) and return it."""
    if name not in ACCOUNTANTS:
        raise AccountingError(f"unknown accountant {name!r}; choose one of {', '.join(ACCOUNTANTS)}")
    return name


def check_neighboring(name: str) -> str:
    """Validate a neighbouring-relation name (``"add_remove"`` or ``"replace_one"``)."""
    if name not in NEIGHBORINGS:
        raise AccountingError(f"unknown neighbouring relation {name!r}; choose one of "
                              f"{', '.join(NEIGHBORINGS)}")
    return name


def check_discretization(value: float | None) -> float:
    """Validate a PLD discretisation interval (None: dp-accounting's default 1e-4)."""
    if value is None:
        return PLD_DISCRETIZATION
    if not (isinstance(value, (int, float)) and 0 < value < 1):
        raise AccountingError(f"PLD discretisation interval must lie in (0, 1), got {value!r}; "
                              "smaller is tighter and slower (default 1e-4)")
    return float(value)
