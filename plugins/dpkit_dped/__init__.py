"""DPED plug-in: differentially private embedding distillation and its baselines (issue 8).

Registers the defenses ``dped`` (teachers → noisy mean vectors + Confident-GNMax votes → student),
``dped_pate`` (labels only), ``dped_dpsgd`` (Opacus DP-SGD), ``dped_nonprivate`` and
``dped_public`` (the public-only floor). See docs/plugins/dped.md.
"""

import dpkit
from dpkit_dped.defenses import DpedDefense, DpedNonPrivate, DpedPate, DpedPublic
from dpkit_dped.dpsgd import DpedDpsgd, DpedNonPrivateSgd

DEFENSES = (DpedDefense, DpedPate, DpedDpsgd, DpedNonPrivate, DpedNonPrivateSgd, DpedPublic)


@dpkit.hookimpl
def dpkit_register_defenses(register):
    """Register DPED and its baselines."""
    for cls in DEFENSES:
        register(cls)


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of the DPED family (imported only when the registry is built)."""
    from dpkit_dped.audit import AUDITS

    for name, adapter in AUDITS.items():
        register(name, adapter)


__all__ = ["DEFENSES", "DpedDefense", "DpedDpsgd", "DpedNonPrivate", "DpedNonPrivateSgd", "DpedPate",
           "DpedPublic"]
