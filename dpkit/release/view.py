"""What the untrusted party saw: the attacks' view of one run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ServerView:
    """What the untrusted party observed, the attacker's knowledge, and the hidden truth.

    ``observed`` holds tensors that crossed the wire (e.g. ``"embeddings"``: noisy token
    embeddings ``[n, d]``; ``"token_ids"``: substituted ids ``[n]``); ``knowledge`` what the
    attacker is assumed to know (e.g. ``"space"``: the public :class:`EmbeddingSpace`); ``truth``
    the private values used only to score attacks (e.g. ``"token_ids"``, ``"labels"``).
    """

    observed: dict[str, Any] = field(default_factory=dict)
    knowledge: dict[str, Any] = field(default_factory=dict)
    truth: dict[str, Any] = field(default_factory=dict)
