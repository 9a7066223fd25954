"""Scoring recovered tokens: top-k token accuracy and ROUGE-L of recovered token sequences."""

from __future__ import annotations

import numpy as np
import torch


def lcs_length(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common subsequence; one vectorised row update per element of ``a``."""
    if len(a) == 0 or len(b) == 0:
        return 0
    prev = np.zeros(len(b) + 1, dtype=np.int64)
    for x in a:
        take = np.concatenate([[0], np.where(b == x, prev[:-1] + 1, prev[1:])])
        prev = np.maximum.accumulate(np.maximum(take, np.concatenate([[0], prev[1:]])))
    return int(prev[-1])


def rouge_l(recovered: list[torch.Tensor], truth: list[torch.Tensor]) -> float:
    """Mean ROUGE-L F1 (on token ids) of recovered vs true documents."""
    scores = []
    for rec, ref in zip(recovered, truth):
        a, b = rec.cpu().numpy(), ref.cpu().numpy()
        if len(a) == 0 or len(b) == 0:
            scores.append(0.0)
            continue
        lcs = lcs_length(a, b)
        p, r = lcs / len(a), lcs / len(b)
        scores.append(0.0 if lcs == 0 else 2 * p * r / (p + r))
    return float(np.mean(scores)) if scores else 0.0


def score_candidates(candidates: torch.Tensor, truth: torch.Tensor, lengths: list[int],
                     prefix: str) -> dict[str, float]:
    """``{prefix}_top1``, ``_top3`` and ``_rougeL`` from per-token candidates ``[N, ≥3]``."""
    if truth.numel() == 0:
        raise ValueError(f"{prefix}: no scorable tokens in the server view; send non-empty texts")
    hit = candidates == truth.unsqueeze(1).to(candidates.device)
    top1 = candidates[:, 0].cpu()
    docs_rec = list(torch.split(top1, lengths))
    docs_true = list(torch.split(truth.cpu(), lengths))
    return {f"{prefix}_top1": float(hit[:, 0].float().mean()),
            f"{prefix}_top3": float(hit[:, :3].any(1).float().mean()),
            f"{prefix}_rougeL": rouge_l(docs_rec, docs_true)}


def score_documents(candidates: torch.Tensor, truth: list[torch.Tensor],
                    special_ids: torch.Tensor | None, prefix: str) -> dict[str, float]:
    """:func:`score_candidates` of per-position candidates ``[Σ lengths, ≥3]`` over the true
    documents, leaving out positions whose true token is special."""
    lengths = [int(t.numel()) for t in truth]
    if sum(lengths) != len(candidates):
        raise ValueError(f"{prefix}: {len(candidates)} candidate rows for {sum(lengths)} true "
                         "tokens; the attack must guess every observed position")
    true = torch.cat([t.reshape(-1).cpu() for t in truth]).long() if truth else torch.empty(0).long()
    keep = (torch.ones_like(true, dtype=torch.bool) if special_ids is None
            else ~torch.isin(true, special_ids.cpu()))
    kept_lengths = [int(k.sum()) for k in torch.split(keep, lengths)]
    return score_candidates(candidates[keep.to(candidates.device)], true[keep], kept_lengths, prefix)
