"""The server part of the SnD family: the encoder runs here, on what the client uploaded.

Built in its own process from the spec's model (loaded here by name) and the defense's params.
Each upload of token embeddings (padding rows sent as zeros, restored here to the public padding
embedding) or of substituted token ids is run through the encoder and pooled; the pooled batch
goes back to the client. The server keeps, for the attacks, the first ``view_tokens`` real token
rows of the test phase, the pooled test representations, and its own pooled outputs of the
training phase (the attacker's auxiliary representations).
"""

from __future__ import annotations

from typing import Any

import torch

import dpkit
from dpkit_snd.client import SplitClient

PAD_ID = -1
"""Padding value of substituted-id uploads (real ids are ≥ 0; the server restores the model's)."""


class SplitEncoderServer(dpkit.Server):
    """Encoder + pooling on the received token embeddings (TokEmbPriv, SnD, the noiseless rows)."""

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.client = SplitClient(public.model, params.max_tokens)
        self.aux: list[torch.Tensor] = []

    def encode(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Pooled encoder outputs ``[B, emb_dim]`` of token embeddings ``x`` (padding restored)."""
        pad = self.client.table[self.client.model.tokenizer.pad_token_id].to(x.dtype)
        x = torch.where(mask.unsqueeze(-1), x, pad)
        return self.client.server(x, mask.long())

    def prepare(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What the server does to the uploads before its encoder (nothing, here)."""
        return x

    def keep(self, message: dpkit.Message, rows: torch.Tensor, pooled: torch.Tensor) -> None:
        """Keep the attacks' share of one batch (see the module docstring)."""
        if message.phase == "test":
            self.observe("embeddings", rows, keep=self.params.view_tokens)
            self.observe("representations", pooled)
        else:
            self.aux.append(pooled)

    @dpkit.handles("embeddings")
    def embeddings(self, message: dpkit.Message) -> torch.Tensor:
        """Noisy (or clean) token embeddings ``[B, n, d]`` up, pooled outputs down."""
        mask = message.mask if message.mask is not None else \
            torch.ones(message.tensor.shape[:-1], dtype=torch.bool)
        with torch.no_grad():
            x = self.prepare(message.tensor.float(), mask)
            pooled = self.encode(x, mask)
        self.keep(message, message.tensor[mask], pooled)
        return pooled

    @dpkit.handles("substituted_ids")
    def substituted(self, message: dpkit.Message) -> torch.Tensor:
        """Substituted token ids ``[B, n]`` up (padding −1): embedded here, pooled outputs down."""
        ids = message.tensor.long()
        mask = ids != PAD_ID
        ids = torch.where(mask, ids, self.client.model.tokenizer.pad_token_id)
        with torch.no_grad():
            x = self.client.embed(ids)
            pooled = self.encode(x, mask)
        self.observe("substituted_ids", ids[mask]) if message.phase == "test" else None
        self.keep(message, x[mask], pooled)
        return pooled

    def knowledge(self) -> dict[str, Any]:
        """The public space and the server's own pooled outputs of the training phase."""
        aux = torch.cat(self.aux) if self.aux else torch.zeros(0, self.client.emb_dim)
        return {"space": self.client.space, "aux_representations": aux}


class DenoisingServer(SplitEncoderServer):
    """The server-side denoise ablation (App. A.12): the server denoises X̃ with a token denoiser
    it trains itself on public text with synthetic noise, then runs the encoder."""

    @classmethod
    def public_data(cls, params: Any) -> list[tuple[str, dict]]:
        """The public corpus the server's denoiser is trained on."""
        d = params.denoiser
        return [(d.public.name, dict(d.public.params))]

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        from dpkit_snd.defenses import noisy_mechanism
        from dpkit_snd.denoising import server_denoiser

        self.denoiser, self.info, self.curve = server_denoiser(
            public, self.client, params,
            lambda _ctx, client, eta: noisy_mechanism(public, client, params, "snd_server_denoise",
                                                      eta))

    def prepare(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The denoised uploads."""
        return self.denoiser(x, mask)

    @dpkit.handles("denoiser_report")
    def report(self, message: dpkit.Message) -> dict[str, Any]:
        """What the client reports about the server's denoiser (its info and training curve)."""
        return {"info": self.info, "curve": self.curve.to_dict()}
