"""DPED plug-in: differentially private embedding distillation and its baselines (issue 8).

Registers the defenses ``dped`` (teachers → noisy mean vectors + Confident-GNMax on their summed
outputs → student), ``dped_pate`` (teacher outputs only), ``dped_dpsgd`` (DP-SGD),
``dped_nonprivate``, ``dped_nonprivate_sgd``, ``dped_public`` (the floor of the teacher methods),
``dped_public_sgd`` (DP-SGD's own floor: its recipe on public data) and ``dped_ensemble`` (the
teachers' averaged distribution). See docs/plugins/dped.md.
"""

import dpkit
from dpkit_dped.defenses import DpedDefense, DpedPate
from dpkit_dped.dpsgd import DpedDpsgd, DpedNonPrivateSgd, DpedPublicSgd
from dpkit_dped.references import DpedEnsemble, DpedNonPrivate, DpedPublic

DEFENSES = (DpedDefense, DpedPate, DpedDpsgd, DpedNonPrivate, DpedNonPrivateSgd, DpedPublic,
            DpedPublicSgd, DpedEnsemble)


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


__all__ = ["DEFENSES", "DpedDefense", "DpedDpsgd", "DpedEnsemble", "DpedNonPrivate",
           "DpedNonPrivateSgd", "DpedPate", "DpedPublic", "DpedPublicSgd"]
