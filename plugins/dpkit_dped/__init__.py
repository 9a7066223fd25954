"""DPED plug-in: differentially private embedding distillation and its baselines (issue 8).

Registers the defenses ``dped`` (teachers → noisy mean vectors + Confident-GNMax on their summed
outputs → student), ``dped_pate`` (teacher outputs only), ``dped_dpsgd`` (DP-SGD),
``dped_nonprivate``, ``dped_nonprivate_sgd``, ``dped_public`` (the floor of the teacher methods),
``dped_public_sgd`` (DP-SGD's own floor: its recipe on public data) and ``dped_ensemble`` (the
teachers' averaged distribution) — by reference: building the registry imports only
:mod:`dpkit_dped.params`. See docs/plugins/dped.md.
"""

import dpkit

DEFENSES = {
    "dped": ("defenses:DpedDefense", "DpedParams"),
    "dped_pate": ("defenses:DpedPate", "PateParams"),
    "dped_dpsgd": ("dpsgd:DpedDpsgd", "DpsgdParams"),
    "dped_nonprivate": ("references:DpedNonPrivate", "NonPrivateParams"),
    "dped_nonprivate_sgd": ("dpsgd:DpedNonPrivateSgd", "SgdParams"),
    "dped_public": ("references:DpedPublic", "NonPrivateParams"),
    "dped_public_sgd": ("dpsgd:DpedPublicSgd", "DpsgdParams"),
    "dped_ensemble": ("references:DpedEnsemble", "EnsembleParams"),
}
"""Defense name -> (module:Class in this package, its Params in dpkit_dped.params)."""

AUDITS = {"dped_dpsgd": "DpsgdCanaryAudit", "dped": "AggregationCanaryAudit",
          "dped_pate": "AggregationCanaryAudit"}
"""Defense name -> its canary-audit adapter in dpkit_dped.audit."""


@dpkit.hookimpl
def dpkit_register_defenses(register):
    """Register DPED and its baselines."""
    for name, (target, params) in DEFENSES.items():
        register(f"{__name__}.{target}", name=name, params=f"{__name__}.params:{params}")


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of the DPED family (imported on first use)."""
    for name, adapter in AUDITS.items():
        register(name, f"{__name__}.audit:{adapter}")
