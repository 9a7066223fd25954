"""JSON helpers shared by results, ledgers and audit reports."""

from __future__ import annotations

import enum
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """Strict-JSON copy of ``value``: non-finite floats as ``"inf"``/``"-inf"``/``"nan"``, enums
    as their values, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


def restore_floats(value: Any) -> Any:
    """Inverse of the non-finite float encoding of :func:`json_safe`."""
    if value in ("inf", "-inf", "nan"):
        return float(value)
    if isinstance(value, dict):
        return {k: restore_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_floats(v) for v in value]
    return value
