"""Privacy accounting: guarantees as data, one ledger for three notions, calibration.

The names below load on first use (PEP 562): a metric-DP or (k, ε) ledger never imports
dp-accounting, which is imported only when an (ε, δ) event is declared, composed or calibrated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpkit.base.lazy import export_lazily

_IN = {
    "guarantees": ["guarantees", "DpGuarantee", "Guarantee", "KAnonymityGuarantee",
                   "MetricDpGuarantee", "NoGuarantee"],
    "calibration": ["calibrate_gaussian", "calibrate_noise"],
    "ceiling": ["Ceiling"],
    "events": ["check_supported", "composed_accountant", "composed_event", "delta_of",
               "dpsgd_event", "epsilon_of", "group_events", "make_accountant", "rdp_curve",
               "supports"],
    "settings": ["ACCOUNTANTS", "NEIGHBORINGS"],
    "ledger": ["Ledger", "Spend"],
    "pure": ["ApproxDpEvent", "PureDpEvent", "pure_dp_rdp"],
    "rules": ["K_COMPOSITION_NOTE", "KAnonymityTotal", "compose_k_anonymity", "compose_metric",
              "document_epsilon", "table_diameter"],
    "serialize": ["event_from_dict", "event_to_dict", "guarantee_from_dict", "guarantee_to_dict"],
}
_HOMES: dict[str, str] = {name: f"{__name__}.{module}"
                          for module, names in _IN.items() for name in names}
_HOMES.update(AccountingError="dpkit.base.errors", BudgetExceededError="dpkit.base.errors")
"""Public name -> the module that defines it (``guarantees``: that submodule itself)."""

__all__ = sorted(_HOMES)
__getattr__ = export_lazily(__name__, _HOMES, globals())


if TYPE_CHECKING:  # the real types for mypy and IDEs; nothing below runs
    from dpkit.accounting import (
        guarantees as guarantees,
    )
    from dpkit.accounting.calibration import (
        calibrate_gaussian as calibrate_gaussian,
        calibrate_noise as calibrate_noise,
    )
    from dpkit.accounting.ceiling import (
        Ceiling as Ceiling,
    )
    from dpkit.accounting.events import (
        check_supported as check_supported,
        composed_accountant as composed_accountant,
        composed_event as composed_event,
        delta_of as delta_of,
        dpsgd_event as dpsgd_event,
        epsilon_of as epsilon_of,
        group_events as group_events,
        make_accountant as make_accountant,
        rdp_curve as rdp_curve,
        supports as supports,
    )
    from dpkit.accounting.guarantees import (
        DpGuarantee as DpGuarantee,
        Guarantee as Guarantee,
        KAnonymityGuarantee as KAnonymityGuarantee,
        MetricDpGuarantee as MetricDpGuarantee,
        NoGuarantee as NoGuarantee,
    )
    from dpkit.accounting.ledger import (
        Ledger as Ledger,
        Spend as Spend,
    )
    from dpkit.accounting.pure import (
        ApproxDpEvent as ApproxDpEvent,
        PureDpEvent as PureDpEvent,
        pure_dp_rdp as pure_dp_rdp,
    )
    from dpkit.accounting.rules import (
        K_COMPOSITION_NOTE as K_COMPOSITION_NOTE,
        KAnonymityTotal as KAnonymityTotal,
        compose_k_anonymity as compose_k_anonymity,
        compose_metric as compose_metric,
        document_epsilon as document_epsilon,
        table_diameter as table_diameter,
    )
    from dpkit.accounting.serialize import (
        event_from_dict as event_from_dict,
        event_to_dict as event_to_dict,
        guarantee_from_dict as guarantee_from_dict,
        guarantee_to_dict as guarantee_to_dict,
    )
    from dpkit.accounting.settings import (
        ACCOUNTANTS as ACCOUNTANTS,
        NEIGHBORINGS as NEIGHBORINGS,
    )
    from dpkit.base.errors import (
        AccountingError as AccountingError,
        BudgetExceededError as BudgetExceededError,
    )
