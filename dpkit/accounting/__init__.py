"""Privacy accounting: guarantees as data, one ledger for three notions, calibration."""

from dpkit.accounting import guarantees
from dpkit.accounting.calibration import calibrate_gaussian, calibrate_noise
from dpkit.accounting.ceiling import Ceiling
from dpkit.accounting.events import (
    ACCOUNTANTS,
    NEIGHBORINGS,
    check_supported,
    composed_accountant,
    composed_event,
    delta_of,
    dpsgd_event,
    epsilon_of,
    group_events,
    make_accountant,
    rdp_curve,
    supports,
)
from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.ledger import Ledger, Spend
from dpkit.accounting.pure import ApproxDpEvent, PureDpEvent, pure_dp_rdp
from dpkit.accounting.rules import (
    K_COMPOSITION_NOTE,
    KAnonymityTotal,
    compose_k_anonymity,
    compose_metric,
    document_epsilon,
    table_diameter,
)
from dpkit.accounting.serialize import (
    event_from_dict,
    event_to_dict,
    guarantee_from_dict,
    guarantee_to_dict,
)
from dpkit.base.errors import AccountingError, BudgetExceededError

__all__ = [
    "ACCOUNTANTS",
    "K_COMPOSITION_NOTE",
    "NEIGHBORINGS",
    "AccountingError",
    "ApproxDpEvent",
    "BudgetExceededError",
    "Ceiling",
    "DpGuarantee",
    "Guarantee",
    "KAnonymityGuarantee",
    "KAnonymityTotal",
    "Ledger",
    "MetricDpGuarantee",
    "NoGuarantee",
    "PureDpEvent",
    "Spend",
    "calibrate_gaussian",
    "calibrate_noise",
    "check_supported",
    "compose_k_anonymity",
    "compose_metric",
    "composed_accountant",
    "composed_event",
    "delta_of",
    "document_epsilon",
    "dpsgd_event",
    "epsilon_of",
    "event_from_dict",
    "event_to_dict",
    "group_events",
    "guarantee_from_dict",
    "guarantee_to_dict",
    "guarantees",
    "make_accountant",
    "pure_dp_rdp",
    "rdp_curve",
    "supports",
    "table_diameter",
]
