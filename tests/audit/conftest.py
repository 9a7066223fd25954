"""The reference and broken test mechanisms, registered while this directory's tests run."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _registered(audit_test_plugins):
    """Every test module here sees ``audit_reference`` and ``audit_broken`` (root conftest)."""
    yield
