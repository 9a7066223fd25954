"""dpkit_obfuslm: ObfusLM (Lin et al., 2025) — model obfuscation with (k, ε)-anonymity.

Registers the defenses ``obfuslm`` (classification, ``plus`` for ObfusLM+), ``obfuslm_generate``
(generation with LoRA) and ``obfuslm_plaintext`` (baseline), the table mechanism
``obfuslm_table``, and the attacks ``knn_plus``, ``token_frequency`` and ``learned_inversion``.
"""

from __future__ import annotations

import dpkit
from dpkit_obfuslm.attacks import ATTACKS, KnnPlus, LearnedInversion, TokenFrequency
from dpkit_obfuslm.cluster import Clusters, embed_cluster, embed_cluster_dense
from dpkit_obfuslm.defense import ObfusLM, ObfusLMPlaintext
from dpkit_obfuslm.obfuscate import ObfuscatedTables, VocabKey, obfuscate_tables
from dpkit_obfuslm.synth import SynthWeights, weight_synth

__all__ = [
    "Clusters", "KnnPlus", "LearnedInversion", "ObfusLM", "ObfusLMPlaintext", "ObfuscatedTables",
    "SynthWeights", "TokenFrequency", "VocabKey", "embed_cluster", "embed_cluster_dense",
    "obfuscate_tables", "weight_synth",
]


@dpkit.hookimpl
def dpkit_register_defenses(register) -> None:
    """Register the ObfusLM defenses."""
    from dpkit_obfuslm.generate import ObfusLMGenerate

    for cls in (ObfusLM, ObfusLMGenerate, ObfusLMPlaintext):
        register(cls)


@dpkit.hookimpl
def dpkit_register_mechanisms(register) -> None:
    """Register the table obfuscation as a mechanism."""
    from dpkit_obfuslm.mechanism import ObfusTable

    register(ObfusTable)


@dpkit.hookimpl
def dpkit_register_attacks(register) -> None:
    """Register KNN+, the token-frequency attack and the learned inversion."""
    for cls in ATTACKS:
        register(cls)
