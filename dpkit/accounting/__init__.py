"""Privacy accounting: guarantees as data, one ledger for three notions, calibration."""

from dpkit.accounting.guarantees import (
    DpGuarantee,
    Guarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)

__all__ = [
    "DpGuarantee",
    "Guarantee",
    "KAnonymityGuarantee",
    "MetricDpGuarantee",
    "NoGuarantee",
]
