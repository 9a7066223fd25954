"""The client's side: tokenization with the permuted vocabulary and decoding of server output."""

from __future__ import annotations

import torch

from dpkit import SplitModel
from dpkit_obfuslm.classify import Encoded
from dpkit_obfuslm.obfuscate import VocabKey


class ObfusClient:
    """Tokenizes locally and maps ids through the secret key; decodes obfuscated ids back."""

    def __init__(self, model: SplitModel, key: VocabKey, max_length: int = 64):
        self.model = model
        self.key = key
        self.max_length = max_length

    def original_ids(self, texts: list[str], labels: list[int] | None = None) -> Encoded:
        """Plain token ids of one or more texts (padded to the longest, at most ``max_length``)."""
        enc = self.model.tokenizer(list(texts), padding="max_length", truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        width = max(int(mask.sum(1).max()), 1)
        lab = None if labels is None else torch.tensor(labels, dtype=torch.long)
        return Encoded(ids[:, :width], mask[:, :width], lab)

    def tokenize(self, texts: list[str], labels: list[int] | None = None) -> Encoded:
        """What is sent to the server: obfuscated ids, the mask and (for fine-tuning) labels."""
        plain = self.original_ids(texts, labels)
        return Encoded(self.key.encode(plain.ids), plain.mask, plain.labels)

    def special_obfuscated_id(self, token_id: int) -> int:
        """The obfuscated id of a special token (e.g. EOS, which the server needs to stop)."""
        return int(self.key.forward[token_id])

    def decode(self, obfuscated_ids: torch.Tensor) -> list[str]:
        """Texts for a ``[B, T]`` batch of obfuscated ids produced by the server."""
        return self.model.decode(self.key.decode(obfuscated_ids.cpu()))
