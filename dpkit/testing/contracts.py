"""Contract suites a plug-in's tests subclass: every mechanism, attack and defense gets the same
checks (declared guarantee, validated params, seeded reproducibility, batch and device
invariance, and an audit that must not FAIL).

Example::

    from dpkit.testing import MechanismContract

    class TestMyMech(MechanismContract):
        mechanism = "my_mech"            # registered name (or the class itself)
        params = {"eta": 5.0}            # valid params
        invalid_params = [{"eta": -1}]   # each must be rejected
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import torch

from dpkit.accounting.guarantees import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.text.space import EmbeddingSpace
from dpkit.contract.attacks import run_attack
from dpkit.testing.noise_contract import NoiseContract
from dpkit.testing.params_contract import ParamsContract, build_component, component_class, tiny_context
from dpkit.testing.samples import same_distribution

GUARANTEES = (DpGuarantee, MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee)


class MechanismContract(NoiseContract, ParamsContract):
    """Checks every mechanism must pass; set ``mechanism``, ``params``, ``invalid_params``."""

    kind: ClassVar[str] = "mechanism"
    mechanism: ClassVar[Any] = ""
    audit_samples: ClassVar[int] = 1200
    audit_confidence: ClassVar[float] = 0.99
    seed: ClassVar[int] = 0
    draws: ClassVar[int] = 400

    def make_space(self) -> EmbeddingSpace:
        """The vocabulary the tests use (override to use another; default: generated, seeded)."""
        from dpkit.audit import make_test_space
        return make_test_space(seed=self.seed)

    def make_input(self, space: EmbeddingSpace) -> torch.Tensor:
        """A small valid input for the mechanism's domain (override for special inputs)."""
        domain = component_class("mechanism", self.mechanism).domain
        if domain == "token":
            return torch.arange(min(6, space.size))
        if domain == "embedding":
            return space.vectors[: min(6, space.size)].clone()
        return space.vectors.clone()

    def build(self) -> Any:
        """The mechanism built with ``params``."""
        return build_component("mechanism", self.mechanism, self.params)

    def _run(self, mech: Any, x: torch.Tensor, space: EmbeddingSpace, seed: int,
             device: str = "cpu") -> torch.Tensor:
        gen = torch.Generator(device=device).manual_seed(seed)
        return mech.privatize(x.to(device), space=space.to(device) if device != "cpu" else space,
                              generator=gen)

    def test_guarantee_declared(self):
        """guarantee(space) returns a known guarantee type the auditor can read."""
        from dpkit.audit import Claim
        from dpkit.contract.protocols import Mechanism

        mech = self.build()
        assert isinstance(mech, Mechanism)
        guarantee = mech.guarantee(self.make_space())
        assert isinstance(guarantee, GUARANTEES), f"unknown guarantee {guarantee!r}"
        Claim.from_guarantee(guarantee, 1e-5)

    def test_seeded_reproducibility(self):
        """Same seed, same output and shape; a randomized mechanism differs across seeds."""
        mech, space = self.build(), self.make_space()
        x = self.make_input(space)
        first, again = self._run(mech, x, space, 1), self._run(mech, x, space, 1)
        assert first.shape == x.shape and torch.equal(first, again)
        if not isinstance(mech.guarantee(space), NoGuarantee):
            others = [self._run(mech, x, space, s) for s in range(2, 6)]
            assert any(not torch.equal(first, o) for o in others), "output ignores the seed"

    def _per_row(self, mech: Any, space: EmbeddingSpace) -> bool:
        guarantee = mech.guarantee(space)
        unit = getattr(guarantee, "unit", "token")
        return mech.domain in ("token", "embedding") and unit == "token"

    def test_batch_invariance(self):
        """Privatizing rows together has the same law as privatizing each row alone."""
        mech, space = self.build(), self.make_space()
        if not self._per_row(mech, space):
            pytest.skip("only per-token mechanisms are row-independent")
        x = self.make_input(space)[:2]
        batch = x.repeat(self.draws, *([1] * (x.ndim - 1)))
        together = self._run(mech, batch, space, 7)[0::2]
        alone = self._run(mech, x[:1].repeat(self.draws, *([1] * (x.ndim - 1))), space, 8)
        assert same_distribution(together, alone, x[0]), "batching changes the output law"

    def test_device_invariance(self):
        """On CUDA the output stays on the device and has the same law as on CPU."""
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")
        mech, space = self.build(), self.make_space()
        x = self.make_input(space)
        rows = x[:1].repeat(self.draws, *([1] * (x.ndim - 1)))
        on_gpu = self._run(mech, rows, space, 3, "cuda")
        assert on_gpu.device.type == "cuda"
        on_cpu = self._run(mech, rows, space, 4)
        assert same_distribution(on_gpu.cpu(), on_cpu, x[0]), "CUDA changes the output law"

    def test_audit_does_not_fail(self):
        """The auditor finds no violation, and the draws follow the declared law, at test sizes."""
        from dpkit.audit import Verdict, audit
        from dpkit.testing.params_contract import process_registry

        report = audit(self.mechanism, self.params, samples=self.audit_samples,
                       confidence=self.audit_confidence, seed=self.seed, space=self.make_space(),
                       registry=process_registry())
        assert report.verdict not in (Verdict.FAIL, Verdict.LAW_MISMATCH), report.one_line()


class AttackContract(ParamsContract):
    """Checks every attack must pass; set ``attack``, ``params``, ``invalid_params``."""

    kind: ClassVar[str] = "attack"
    attack: ClassVar[Any] = ""

    def make_view(self, space: EmbeddingSpace) -> Any:
        """A server view with what the attack ``requires`` (noisy embeddings and/or token ids)."""
        from dpkit.contract.protocols import ServerView

        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(space.size, (32,), generator=gen)
        noisy = space.vectors[ids] + 0.3 * torch.randn(32, space.dim, generator=gen)
        observed = {"embeddings": noisy, "token_ids": ids, "substituted_ids": ids.roll(1)}
        return ServerView(observed, {"space": space}, {"token_ids": ids,
                                                        "labels": ids % 2})

    def make_context(self, space: EmbeddingSpace) -> Any:
        """A run context on CPU with a fresh ledger."""
        return tiny_context(space, None)

    def test_requires_declared(self):
        """``requires`` is a tuple of observed keys."""
        cls = component_class("attack", self.attack)
        assert isinstance(cls.requires, tuple) and all(isinstance(k, str) for k in cls.requires)

    def test_run_never_sees_the_truth(self):
        """run() gets no truth: an attack that reads view.truth fails here, not in production."""
        from dpkit.audit import make_test_space
        from dpkit.contract.attacks import attack_view

        space = make_test_space()
        attack = build_component("attack", self.attack, self.params)
        view = attack_view(self.make_view(space), tuple(attack.requires))
        assert view.truth == {}
        attack.run(view, self.make_context(space).for_attack())

    def test_metrics_finite_and_reproducible(self):
        """score(run()) returns named finite floats, the same for the same seed."""
        from dpkit.audit import make_test_space

        space = make_test_space()
        attack = build_component("attack", self.attack, self.params)
        first = run_attack(attack, self.make_view(space), self.make_context(space))
        again = run_attack(attack, self.make_view(space), self.make_context(space))
        assert first and all(isinstance(k, str) for k in first)
        assert all(math.isfinite(float(v)) for v in first.values()), first
        assert first == again


__all__ = ["AttackContract", "MechanismContract"]
