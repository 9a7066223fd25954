"""Privacy accounting: guarantees as data, one ledger for three notions, calibration."""

from dpkit.accounting import guarantees
from dpkit.accounting.calibration import calibrate_gaussian, calibrate_noise
from dpkit.accounting.ceiling import Ceiling
from dpkit.accounting.events import (
    ACCOUNTANTS,
    composed_event,
    delta_of,
    dpsgd_event,
    epsilon_of,
    group_events,
    make_accountant,
    rdp_curve,
)
from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.ledger import Ledger, Spend
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
from dpkit.errors import AccountingError, BudgetExceededError

__all__ = [
    "ACCOUNTANTS",
    "AccountingError",
    "BudgetExceededError",
    "Ceiling",
    "DpGuarantee",
    "Guarantee",
    "KAnonymityGuarantee",
    "KAnonymityTotal",
    "K_COMPOSITION_NOTE",
    "Ledger",
    "MetricDpGuarantee",
    "NoGuarantee",
    "Spend",
    "calibrate_gaussian",
    "calibrate_noise",
    "compose_k_anonymity",
    "compose_metric",
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
    "rdp_curve",
    "table_diameter",
]
