"""The reference and broken test mechanisms, registered while this directory's tests run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: `from broken import ...` needs it


@pytest.fixture(scope="module", autouse=True)
def _registered(audit_test_plugins):
    """Every test module here sees ``audit_reference`` and ``audit_broken`` (root conftest)."""
    yield
