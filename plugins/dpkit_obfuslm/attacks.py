"""Attacks on an obfuscated model: KNN+, token-frequency (TFA) and a learned inversion.

They run where the server is (:mod:`dpkit_obfuslm.server`), on what it holds:
``observed["obfuscated_table"]`` (its input table, rows in obfuscated-id order, after its own
fine-tuning), ``observed["token_ids"]`` (the client's documents as the obfuscated ids it received);
``knowledge["original_table"]`` (the public pretrained table), ``knowledge["public_token_ids"]``
(a public corpus tokenized with the public tokenizer), ``knowledge["obfuscation"]`` (the public
algorithm's parameters), ``knowledge["special_ids"]``. Their guesses cross back as data (tensors,
numbers, dicts) and are scored on the client against ``truth["token_ids"]``.
"""

from __future__ import annotations

from typing import ClassVar

import torch

import dpkit
from dpkit import TrainingCurve, convergence_metrics, nearest
from dpkit_obfuslm.scoring import score_documents
from dpkit_obfuslm.params import KnnPlusParams, LearnedInversionParams


def _tokens(view: dpkit.ServerView) -> torch.Tensor:
    """Every observed obfuscated id, the documents concatenated."""
    docs = view.observed["token_ids"]
    return torch.cat([d.reshape(-1).cpu() for d in docs]).long() if docs else torch.empty(0).long()


def _guesses(view: dpkit.ServerView, candidates: torch.Tensor, **extra) -> dict:
    """Per-position candidates with what the scorer needs to line them up with the truth."""
    return {"candidates": candidates, "special_ids": view.knowledge.get("special_ids"), **extra}


def _score(guesses: dict, truth: dict, prefix: str) -> dict[str, float]:
    return score_documents(guesses["candidates"], truth["token_ids"], guesses["special_ids"],
                           prefix)


def _knn_candidates(rows: torch.Tensor, observed: torch.Tensor, table: torch.Tensor,
                    metric: str) -> torch.Tensor:
    """Top-3 nearest original tokens for each observed id (searched once per distinct id)."""
    uniq, inverse = torch.unique(observed, return_inverse=True)
    _, ids = nearest(rows[uniq.to(rows.device)].float(), table.float(), k=3, metric=metric)
    return ids.cpu()[inverse.cpu()]


class KnnPlus(dpkit.Component):
    """KNN+: map each observed obfuscated row to its nearest rows of the public original table."""

    name: ClassVar[str] = "knn_plus"
    Params: ClassVar[type[KnnPlusParams]] = KnnPlusParams
    requires: ClassVar[tuple[str, ...]] = ("obfuscated_table", "token_ids")

    def run(self, view: dpkit.ServerView, ctx) -> dict:
        """The 3 nearest original tokens of each observed id."""
        cand = _knn_candidates(view.observed["obfuscated_table"], _tokens(view),
                               view.knowledge["original_table"], self.params.metric)
        return _guesses(view, cand)

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """Top-1 / top-3 token recovery and ROUGE-L of the top-1 text."""
        return _score(guesses, truth, "knn")


class TokenFrequency(dpkit.Component):
    """TFA (Table 5): match each observed id to the public tokens of nearest relative frequency."""

    name: ClassVar[str] = "token_frequency"
    Params: ClassVar[type[dpkit.NoParams]] = dpkit.NoParams
    requires: ClassVar[tuple[str, ...]] = ("token_ids",)

    def run(self, view: dpkit.ServerView, ctx) -> dict:
        """The 3 public tokens of nearest relative frequency for each observed id."""
        observed = _tokens(view)
        vocab = int(view.knowledge["original_table"].shape[0])
        if not view.knowledge.get("public_token_ids"):
            raise ValueError("token_frequency: the server has no public corpus to match "
                             "frequencies against; set the defense's public_dataset (a public "
                             "dataset that shares no record with the private data)")
        public = torch.cat([t.reshape(-1).cpu() for t in view.knowledge["public_token_ids"]])
        pub_freq = torch.bincount(public, minlength=vocab).double() / max(public.numel(), 1)
        all_obs = torch.cat([t.reshape(-1).cpu() for t in view.observed["token_ids"]])
        obs_freq = torch.bincount(all_obs, minlength=vocab).double() / max(all_obs.numel(), 1)
        sorted_freq, order = torch.sort(pub_freq)
        uniq, inverse = torch.unique(observed, return_inverse=True)
        f = obs_freq[uniq]
        pos = torch.searchsorted(sorted_freq, f)
        window = (pos.unsqueeze(1) + torch.arange(-3, 3)).clamp(0, vocab - 1)
        gap = (sorted_freq[window] - f.unsqueeze(1)).abs()
        pick = window.gather(1, gap.argsort(dim=1, stable=True)[:, :3])
        return _guesses(view, order[pick][inverse])

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """Top-1 / top-3 recovery and ROUGE-L from frequency matching."""
        return _score(guesses, truth, "tfa")


class LearnedInversion(dpkit.Component):
    """Train f(obfuscated row) ≈ original row on self-made obfuscations, then decode by KNN."""

    name: ClassVar[str] = "learned_inversion"
    Params: ClassVar[type[LearnedInversionParams]] = LearnedInversionParams
    requires: ClassVar[tuple[str, ...]] = ("obfuscated_table", "token_ids")

    def run(self, view: dpkit.ServerView, ctx) -> dict:
        """The 3 nearest original tokens of each inverted observed row, and the training curve."""
        from dpkit_obfuslm.inversion import train_inverter

        observed = _tokens(view)
        table = view.knowledge["original_table"].float()
        gen = ctx.generator("obfuslm.learned_inversion", device=table.device)
        inverter, curve = train_inverter(table, view.knowledge["obfuscation"], self.params, gen,
                                         say=ctx.say)
        rows = view.observed["obfuscated_table"].float().to(table.device)
        uniq, inverse = torch.unique(observed, return_inverse=True)
        with torch.no_grad():
            guess = inverter(rows[uniq.to(rows.device)])
        _, ids = nearest(guess, table, k=3, metric="cosine")
        return _guesses(view, ids.cpu()[inverse.cpu()], curve=curve.to_dict())

    def score(self, guesses: dict, truth: dict) -> dict[str, float]:
        """Top-1 / top-3 recovery and ROUGE-L of the inverted rows (and the inverter's curve)."""
        scores = _score(guesses, truth, "inv")
        curve = TrainingCurve.from_dict(guesses["curve"])
        if curve.steps:  # attack metrics join the cell's: prefixed, so the defense's flag stays
            scores.update({f"inv_{k}": v for k, v in convergence_metrics([curve]).items()})
        return scores
