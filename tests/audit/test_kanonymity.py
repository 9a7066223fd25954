"""(k, ε)-anonymity: the achieved anonymity sets are checked, and ε within a set."""

from typing import ClassVar

import torch
from pydantic import Field

import dpkit
from dpkit.accounting import KAnonymityGuarantee
from dpkit.audit import Verdict, audit
from dpkit.contract.plugins import get_registry


class PairedExponential:
    """Tokens in fixed pairs (2i, 2i+1); randomized response within the pair: (2, ε)."""

    name: ClassVar[str] = "paired_exponential"
    domain: ClassVar[str] = "token"

    class Params(dpkit.Params):
        """ε and the k it declares achieved."""

        epsilon: float = Field(default=1.0, gt=0)
        declared_k: int = Field(default=2, ge=1)
        declared_share: float = Field(default=0.0, ge=0, le=1)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """Declares (declared_k, ε)-anonymity."""
        return KAnonymityGuarantee(2, self.params.declared_k, self.params.declared_share,
                                   self.params.epsilon)

    def output_log_probs(self, ids, space):
        """Keep w.p. e^ε / (1 + e^ε), else the partner; nothing outside the pair."""
        vocab = torch.arange(space.size).unsqueeze(0)
        scores = torch.where(vocab == ids.unsqueeze(1), self.params.epsilon, 0.0).double()
        partner = vocab // 2 == (ids // 2).unsqueeze(1)
        return torch.log_softmax(scores.masked_fill(~partner, -torch.inf), dim=1)

    def privatize(self, x, *, space, generator):
        """Gumbel-max draw from output_log_probs."""
        logits = self.output_log_probs(x, space)
        u = torch.rand(logits.shape, generator=generator, dtype=logits.dtype)
        return (logits - torch.log(-torch.log(u.clamp_min(1e-300)))).argmax(1)


def test_true_anonymity_sets_pass():
    report = audit(PairedExponential, {"epsilon": 1.0}, samples=800, seed=0, registry=get_registry())
    assert report.verdict is Verdict.PASS, report.one_line()
    assert report.checks["anonymity_set_min"] == 2
    assert all("vs" in f.pair for f in report.findings)


def test_overstated_k_fails():
    report = audit(PairedExponential, {"epsilon": 1.0, "declared_k": 4}, samples=400, seed=0, registry=get_registry())
    assert report.verdict is Verdict.FAIL
    assert "fewer than the declared achieved k=4" in report.reason


def test_overstated_epsilon_fails_within_a_set():
    class Loose(PairedExponential):
        def guarantee(self, space=None):
            return KAnonymityGuarantee(2, 2, 0.0, self.params.epsilon / 4)

    report = audit(Loose, {"epsilon": 3.0}, samples=800, seed=0, registry=get_registry())
    assert report.verdict is Verdict.FAIL and report.witness is not None


def test_space_larger_than_the_exact_subset():
    """Pairs come from the examined subset when the vocabulary exceeds ``exact_tokens``."""
    report = audit(PairedExponential, {"epsilon": 1.0}, samples=400, seed=0, exact_tokens=8, registry=get_registry())
    assert report.verdict is Verdict.PASS, report.one_line()
    assert "anonymity_violation" not in report.checks
