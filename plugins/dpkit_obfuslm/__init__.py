"""dpkit_obfuslm: ObfusLM (Lin et al., 2025) — model obfuscation with (k, ε)-anonymity.

Registers the defenses ``obfuslm`` (classification, ``plus`` for ObfusLM+), ``obfuslm_generate``
(generation with LoRA) and ``obfuslm_plaintext`` (baseline), the table mechanism
``obfuslm_table``, and the attacks ``knn_plus``, ``token_frequency`` and ``learned_inversion`` —
by reference: building the registry imports only :mod:`dpkit_obfuslm.params`.
"""

from __future__ import annotations

import dpkit

DEFENSES = {
    "obfuslm": ("defense:ObfusLM", "ObfusLMParams"),
    "obfuslm_generate": ("generate:ObfusLMGenerate", "GenerateParams"),
    "obfuslm_plaintext": ("defense:ObfusLMPlaintext", "TrainParams"),
}
MECHANISMS = {"obfuslm_table": ("mechanism:ObfusTable", "TableParams")}
ATTACKS = {
    "knn_plus": ("attacks:KnnPlus", "KnnPlusParams"),
    "token_frequency": ("attacks:TokenFrequency", None),
    "learned_inversion": ("attacks:LearnedInversion", "LearnedInversionParams"),
}
"""Name -> (module:Class in this package, its Params in dpkit_obfuslm.params; None: NoParams)."""


def _register(register, table: dict) -> None:
    for name, (target, params) in table.items():
        register(f"{__name__}.{target}", name=name,
                 params=f"{__name__}.params:{params}" if params else dpkit.NoParams)


@dpkit.hookimpl
def dpkit_register_defenses(register) -> None:
    """Register the ObfusLM defenses."""
    _register(register, DEFENSES)


@dpkit.hookimpl
def dpkit_register_mechanisms(register) -> None:
    """Register the table obfuscation as a mechanism."""
    _register(register, MECHANISMS)


@dpkit.hookimpl
def dpkit_register_attacks(register) -> None:
    """Register KNN+, the token-frequency attack and the learned inversion."""
    _register(register, ATTACKS)
