"""SplitModel: one client/server API over Hugging Face encoders and causal LMs.

The client holds the tokenizer and the input-embedding table (``tokenize`` -> ``embed``); the
server continues from ``inputs_embeds`` (``server_forward``). ``encode`` is the unsplit reference
path (token ids straight into the model), so tests can check the split changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from dpkit.text.space import EmbeddingSpace


@dataclass
class TokenBatch:
    """Token ids and attention mask ``[B, T]`` on the model's device; unpacks as a pair."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.input_ids, self.attention_mask))


@dataclass
class ServerOutput:
    """What the server computes from ``inputs_embeds``.

    ``pooled`` ``[B, d]`` (mean over the mask for encoders, last real token for causal LMs),
    ``last_hidden`` ``[B, T, d]``, ``hidden_states`` (embedding output then every layer, as
    Hugging Face returns them; empty when not requested), ``logits`` ``[B, T, V]`` (causal only).
    """

    pooled: torch.Tensor
    last_hidden: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...]
    logits: torch.Tensor | None = None


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average ``hidden`` ``[B, T, d]`` over positions where ``attention_mask`` is 1."""
    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1.0)


def last_token_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The hidden state of the last position whose mask is 1 (works for left or right padding)."""
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    last = (attention_mask.long() * (positions + 1)).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


class SplitModel:
    """A Hugging Face model cut between the input-embedding lookup (client) and the body (server).

    ``model`` is a ``transformers`` model (``AutoModel`` for encoders, ``AutoModelForCausalLM``
    for decoders); ``server`` exposes it for fine-tuning or LoRA. Everything stays on ``device``.
    """

    def __init__(self, name: str, model: nn.Module, tokenizer, *, causal: bool,
                 device: torch.device | str = "cpu", lowercase: bool = True,
                 stop_words: frozenset[str] = frozenset(), max_length: int = 128):
        self.name = name
        self.causal = causal
        self.tokenizer = tokenizer
        self.lowercase = lowercase
        self.stop_words = frozenset(stop_words)
        self.max_length = max_length
        self.device = torch.device(device)
        self.server: Any = model.to(self.device).eval()  # a transformers PreTrainedModel
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token

    @property
    def input_embeddings(self) -> nn.Embedding:
        """The client's input-embedding module (trainable, shared with the server model)."""
        return self.server.get_input_embeddings()

    @property
    def embedding_table(self) -> torch.Tensor:
        """The public ``[V, d]`` input-embedding table an attacker may know (detached)."""
        return self.input_embeddings.weight.detach()

    @property
    def hidden_size(self) -> int:
        """Width d of the embeddings and hidden states."""
        return int(self.input_embeddings.weight.shape[1])

    @property
    def vocab_size(self) -> int:
        """Rows V of the embedding table."""
        return int(self.input_embeddings.weight.shape[0])

    @property
    def num_layers(self) -> int:
        """Number of transformer layers."""
        return int(self.server.config.num_hidden_layers)

    def to(self, device: torch.device | str) -> SplitModel:
        """Move the model to ``device`` (in place) and return self."""
        self.device = torch.device(device)
        self.server.to(self.device)
        return self

    def tokenize(self, texts: list[str], max_length: int | None = None) -> TokenBatch:
        """Tokenize a batch (padded, truncated to ``max_length``) onto the model's device."""
        if isinstance(texts, str):
            raise TypeError(f"tokenize expects a list of texts, got the string {texts[:40]!r}; "
                            "wrap it in a list")
        enc = self.tokenizer(list(texts), padding=True, truncation=True,
                             max_length=max_length or self.max_length, return_tensors="pt")
        return TokenBatch(enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device))

    def decode(self, input_ids: torch.Tensor, skip_special_tokens: bool = True) -> list[str]:
        """Texts for a ``[B, T]`` batch of ids."""
        return self.tokenizer.batch_decode(input_ids.detach().cpu(),
                                           skip_special_tokens=skip_special_tokens)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Client side: input-embedding lookup ``[B, T]`` -> ``[B, T, d]`` (keeps gradients)."""
        return self.input_embeddings(input_ids.to(self.device))

    def server_forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor,
                       output_hidden_states: bool = True) -> ServerOutput:
        """Server side: run the model body from ``inputs_embeds`` ``[B, T, d]`` and the mask."""
        out = self.server(inputs_embeds=inputs_embeds.to(self.device),
                          attention_mask=attention_mask.to(self.device),
                          output_hidden_states=True, return_dict=True)
        return self._wrap(out, attention_mask.to(self.device), output_hidden_states)

    def forward_ids(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    output_hidden_states: bool = True) -> ServerOutput:
        """The unsplit path: token ids straight into the model (the reference for the split)."""
        out = self.server(input_ids=input_ids.to(self.device),
                          attention_mask=attention_mask.to(self.device),
                          output_hidden_states=True, return_dict=True)
        return self._wrap(out, attention_mask.to(self.device), output_hidden_states)

    @torch.no_grad()
    def encode(self, texts: list[str], max_length: int | None = None, batch_size: int = 64,
               normalize: bool = False) -> torch.Tensor:
        """Pooled ``[N, d]`` representations of ``texts`` through the unsplit model."""
        chunks = []
        for start in range(0, len(texts), batch_size):
            ids, mask = self.tokenize(texts[start:start + batch_size], max_length)
            chunks.append(self.forward_ids(ids, mask, output_hidden_states=False).pooled)
        pooled = torch.cat(chunks) if chunks else torch.empty(0, self.hidden_size,
                                                              device=self.device)
        return nn.functional.normalize(pooled, dim=-1) if normalize else pooled

    def vocabulary(self) -> list[str]:
        """Token strings by id for every row of the embedding table (``<extra_i>`` past the
        tokenizer's vocabulary)."""
        n_tok = len(self.tokenizer)
        tokens = self.tokenizer.convert_ids_to_tokens(list(range(min(n_tok, self.vocab_size))))
        tokens = [t if t is not None else f"<unused_{i}>" for i, t in enumerate(tokens)]
        return tokens + [f"<extra_{i}>" for i in range(len(tokens), self.vocab_size)]

    def as_space(self) -> EmbeddingSpace:
        """The tokenizer vocabulary and input-embedding table as an :class:`EmbeddingSpace`."""
        return EmbeddingSpace(self.name, self.vocabulary(), self.embedding_table.clone(),
                              lowercase=self.lowercase, stop_words=self.stop_words)

    def special_token_ids(self) -> torch.Tensor:
        """Ids of the tokenizer's special tokens (padding, CLS/SEP, BOS/EOS, ...)."""
        return torch.tensor(sorted(set(self.tokenizer.all_special_ids)), dtype=torch.long)

    def _wrap(self, out, attention_mask: torch.Tensor, keep_hidden: bool) -> ServerOutput:
        hidden_states = tuple(out.hidden_states)
        last_hidden = getattr(out, "last_hidden_state", None)
        if last_hidden is None:
            last_hidden = hidden_states[-1]
        pool = last_token_pool if self.causal else mean_pool
        return ServerOutput(pooled=pool(last_hidden, attention_mask), last_hidden=last_hidden,
                            hidden_states=hidden_states if keep_hidden else (),
                            logits=getattr(out, "logits", None) if self.causal else None)

    def __repr__(self) -> str:
        kind = "causal" if self.causal else "encoder"
        return (f"SplitModel({self.name!r}, {kind}, layers={self.num_layers}, "
                f"d={self.hidden_size}, V={self.vocab_size}, device={self.device})")
