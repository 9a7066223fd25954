"""dpkit's test helpers for plug-in authors: contract suites, planted bugs, tiny data, strategies.

``from dpkit.testing import MechanismContract`` and subclass it in your tests; a plug-in's
planted-bug battery builds on :class:`PlantedBug` and the checks here. Like ``dpkit``, the names
load on first use: the hypothesis strategies (``strategies``, ``strategies_accounting``,
``strategies_tokens``) need hypothesis, a test-only dependency, only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpkit.base.lazy import export_lazily


_HOMES: dict[str, str] = {
    # Contract suites
    "AttackContract": "dpkit.testing.contracts",
    "MechanismContract": "dpkit.testing.contracts",
    "DefenseContract": "dpkit.testing.defense_contract",
    "DefenseAuditContract": "dpkit.testing.audit_contracts",
    "same_distribution": "dpkit.testing.samples",
    # Planted bugs and the checks that must catch them
    "Patch": "dpkit.testing.planted",
    "PlantedBug": "dpkit.testing.planted",
    "replace": "dpkit.testing.planted",
    "scale_draws": "dpkit.testing.planted",
    "scale_result": "dpkit.testing.planted",
    "Check": "dpkit.testing.battery",
    "assertion_check": "dpkit.testing.battery",
    "defense_audit": "dpkit.testing.battery",
    "mechanism_audit": "dpkit.testing.battery",
    "run_battery": "dpkit.testing.battery",
    "dx_sampler_bugs": "dpkit.testing.dx_bugs",
    "dx_noise_reuse_bugs": "dpkit.testing.dx_bugs",
    "dx_mechanism_module": "dpkit.testing.dx_bugs",
    "contract_test": "dpkit.testing.battery",
    "test_check": "dpkit.testing.battery",
    "eta_times": "dpkit.testing.noise_bugs",
    "reseeded_each_draw": "dpkit.testing.noise_bugs",
    "reused_across_calls": "dpkit.testing.noise_bugs",
    "build_defense": "dpkit.testing.params_contract",
    "process_registry": "dpkit.testing.params_contract",
    # Tiny data and models, and hypothesis strategies
    "generated_dataset": "dpkit.testing.textdata",
    "generated_texts": "dpkit.testing.textdata",
    "tiny_context": "dpkit.testing.params_contract",
    "api_violations": "dpkit.testing.api_imports",
    # The process boundary: what the server saw, scored attacks, a recording wire
    "RecordingChannel": "dpkit.testing.boundary",
    "attack_metrics": "dpkit.testing.boundary",
    "recording_wire": "dpkit.testing.boundary",
    "server_of": "dpkit.testing.boundary",
    "server_view": "dpkit.testing.boundary",
    "strategies": "dpkit.testing.strategies",
    "strategies_accounting": "dpkit.testing.strategies_accounting",
    "strategies_tokens": "dpkit.testing.strategies_tokens",
}
"""Each public name -> the module that defines it (where its docstring is)."""

__all__ = sorted(_HOMES)
__getattr__ = export_lazily(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the real types for mypy and IDEs; nothing below runs
    from dpkit.testing.contracts import (
        AttackContract as AttackContract,
        MechanismContract as MechanismContract,
    )
    from dpkit.testing.defense_contract import DefenseContract as DefenseContract
    from dpkit.testing.audit_contracts import DefenseAuditContract as DefenseAuditContract
    from dpkit.testing.samples import same_distribution as same_distribution
    from dpkit.testing.planted import (
        Patch as Patch,
        PlantedBug as PlantedBug,
        replace as replace,
        scale_draws as scale_draws,
        scale_result as scale_result,
    )
    from dpkit.testing.battery import (
        Check as Check,
        assertion_check as assertion_check,
        defense_audit as defense_audit,
        mechanism_audit as mechanism_audit,
        run_battery as run_battery,
    )
    from dpkit.testing.dx_bugs import (
        dx_mechanism_module as dx_mechanism_module,
        dx_noise_reuse_bugs as dx_noise_reuse_bugs,
        dx_sampler_bugs as dx_sampler_bugs,
    )
    from dpkit.testing.battery import contract_test as contract_test, test_check as test_check
    from dpkit.testing.noise_bugs import (
        eta_times as eta_times,
        reseeded_each_draw as reseeded_each_draw,
        reused_across_calls as reused_across_calls,
    )
    from dpkit.testing.params_contract import (
        build_defense as build_defense,
        process_registry as process_registry,
    )
    from dpkit.testing.textdata import (
        generated_dataset as generated_dataset,
        generated_texts as generated_texts,
    )
    from dpkit.testing.params_contract import tiny_context as tiny_context
    from dpkit.testing.api_imports import api_violations as api_violations
    from dpkit.testing.boundary import (
        RecordingChannel as RecordingChannel,
        attack_metrics as attack_metrics,
        recording_wire as recording_wire,
        server_of as server_of,
        server_view as server_view,
    )
    from dpkit.testing import strategies as strategies
    from dpkit.testing import strategies_accounting as strategies_accounting
    from dpkit.testing import strategies_tokens as strategies_tokens

