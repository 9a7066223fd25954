"""dpkit's published plug-in API: everything a plug-in imports, and nothing else.

A plug-in imports ``dpkit`` (``import dpkit``, ``from dpkit import Params``) and, in its tests and
planted-bug batteries, ``dpkit.testing``; every other ``dpkit.*`` module is internal and may move
without notice (``tests/core/test_plugin_api.py`` holds the built-in plug-ins to this).

Names load on first use (PEP 562), so ``import dpkit`` imports neither torch nor dp-accounting nor
any plug-in: ``dpkit --help`` and ``dpkit validate`` start at once. ``docs/plugins.md`` lists the
names by what they are for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpkit.base.lazy import export_lazily

__version__ = "0.1.0"

_HOMES: dict[str, str] = {
    # Hooks and component bases
    "hookimpl": "dpkit.contract.hookspecs",
    "Component": "dpkit.contract.component",
    "NoParams": "dpkit.contract.params",
    "Params": "dpkit.contract.params",
    "TrainingParams": "dpkit.contract.params",
    # What a component implements (kinds) and may implement (capabilities)
    "Attack": "dpkit.contract.protocols",
    "DatasetSource": "dpkit.contract.protocols",
    "Defense": "dpkit.contract.protocols",
    "DefenseResult": "dpkit.contract.protocols",
    "Mechanism": "dpkit.contract.protocols",
    "ModelSource": "dpkit.contract.protocols",
    "AuditableDefense": "dpkit.contract.protocols",
    "DeclaresReleases": "dpkit.contract.protocols",
    "DxLaplaceNoise": "dpkit.contract.protocols",
    "ExactDensity": "dpkit.contract.protocols",
    "ExactOutputProbs": "dpkit.contract.protocols",
    "FitsCounts": "dpkit.contract.protocols",
    "PlansSpends": "dpkit.contract.protocols",
    "ReadsFiles": "dpkit.contract.protocols",
    "ReleasesVerbatim": "dpkit.contract.protocols",
    "RunsMechanisms": "dpkit.contract.protocols",
    "SequenceLevel": "dpkit.contract.protocols",
    "is_sequence_level": "dpkit.contract.protocols",
    # What a component receives
    "AttackContext": "dpkit.contract.context",
    "RunContext": "dpkit.contract.context",
    "PrivacySettings": "dpkit.contract.privacy",
    "Registry": "dpkit.contract.registry",
    "load_dataset": "dpkit.contract.plugins",
    "load_model": "dpkit.contract.plugins",
    "run_attack": "dpkit.contract.attacks",
    # Releases: what crosses to the server
    "Release": "dpkit.release.declaration",
    "DOWN": "dpkit.release.wire",
    "UP": "dpkit.release.wire",
    "Wire": "dpkit.release.wire",
    "ServerView": "dpkit.release.view",
    # The server: its own process, what it may receive, how it answers
    "Message": "dpkit.contract.server",
    "PublicInputs": "dpkit.contract.server",
    "Server": "dpkit.contract.server",
    "handles": "dpkit.contract.server",
    "STANDARD_PHASES": "dpkit.contract.server",
    "STANDARD_RELEASES": "dpkit.contract.server",
    "token_releases": "dpkit.release.tokens",
    "declare_releases": "dpkit.contract.releases",
    # Guarantees and the ledger
    "DpGuarantee": "dpkit.accounting.guarantees",
    "Guarantee": "dpkit.accounting.guarantees",
    "KAnonymityGuarantee": "dpkit.accounting.guarantees",
    "MetricDpGuarantee": "dpkit.accounting.guarantees",
    "NoGuarantee": "dpkit.accounting.guarantees",
    "Ledger": "dpkit.accounting.ledger",
    "calibrate_noise": "dpkit.accounting.calibration",
    "dpsgd_event": "dpkit.accounting.events",
    "epsilon_of": "dpkit.accounting.events",
    # Errors
    "AccountingError": "dpkit.base.errors",
    "AuditError": "dpkit.base.errors",
    "DataSourceError": "dpkit.base.errors",
    "DpkitError": "dpkit.base.errors",
    "ParamsError": "dpkit.base.errors",
    "PluginError": "dpkit.base.errors",
    # Embeddings and tokens
    "EmbeddingSpace": "dpkit.text.space",
    "stop_word_mask": "dpkit.text.space",
    "VocabIndex": "dpkit.text.search",
    "nearest": "dpkit.text.search",
    "clip_norms": "dpkit.text.noise",
    "laplace_log_density": "dpkit.text.noise",
    "sample_laplace_noise": "dpkit.text.noise",
    "Noiseless": "dpkit.release.noiseless",
    "hit_rates": "dpkit.text.recovery",
    "knn_candidates": "dpkit.text.recovery",
    "knn_recovery": "dpkit.text.recovery",
    "kl_entropy": "dpkit.text.entropy",
    "kl_mutual_information": "dpkit.text.entropy",
    "knn_distances": "dpkit.text.entropy",
    # Training
    "Validation": "dpkit.ml.loop",
    "fit_epochs": "dpkit.ml.loop",
    "TrainingCurve": "dpkit.ml.training",
    "attach_curves": "dpkit.ml.training",
    "converged": "dpkit.ml.training",
    "convergence_metrics": "dpkit.ml.training",
    "accuracy": "dpkit.ml.metrics",
    "auc": "dpkit.ml.metrics",
    "bf16_autocast": "dpkit.ml.precision",
    "warn_if_bf16_is_emulated": "dpkit.ml.precision",
    # Data and models
    "Analogies": "dpkit.data.types",
    "TextDataset": "dpkit.data.types",
    "TextSplit": "dpkit.data.types",
    "WordPairs": "dpkit.data.types",
    "build_dataset": "dpkit.data.splits",
    "seeded_split": "dpkit.data.splits",
    "CatalogueEntry": "dpkit.data.sources",
    "HubSource": "dpkit.data.sources",
    "LocalSource": "dpkit.data.sources",
    "PinnedArtifact": "dpkit.data.sources",
    "sha256_file": "dpkit.data.sources",
    "SplitModel": "dpkit.models.split",
    "mean_pool": "dpkit.models.split",
    "with_lora": "dpkit.models.lora",
    "load_hf_split": "dpkit.models.loaders",
    "load_npy_space": "dpkit.models.loaders",
    "load_word2vec_text": "dpkit.models.loaders",
    "tiny_causal": "dpkit.models.tiny",
    "tiny_encoder": "dpkit.models.tiny",
    # Caches and lazy imports
    "cached": "dpkit.base.cache",
    "content_key": "dpkit.base.cache",
    "process_cache": "dpkit.base.cache",
    "lazy_import": "dpkit.base.lazy",
    # Canary audits of a defense (dpkit_register_defense_audits)
    "CanaryRun": "dpkit.audit.canary",
    "SplitCanaryAudit": "dpkit.audit.canary_split",
    "ChannelRun": "dpkit.audit.channels",
    "binomial_p_value": "dpkit.audit.channels",
    "counts_p_value": "dpkit.audit.channels",
    "gaussian_llr_p_value": "dpkit.audit.channels",
}
"""Each public name -> the module that defines it (where its docstring is)."""

__all__ = sorted(_HOMES)
__getattr__ = export_lazily(__name__, _HOMES, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # the real types for mypy and IDEs; nothing below runs
    from dpkit.contract.hookspecs import hookimpl as hookimpl
    from dpkit.contract.component import Component as Component
    from dpkit.contract.params import (
        NoParams as NoParams,
        Params as Params,
        TrainingParams as TrainingParams,
    )
    from dpkit.contract.protocols import (
        Attack as Attack,
        DatasetSource as DatasetSource,
        Defense as Defense,
        DefenseResult as DefenseResult,
        Mechanism as Mechanism,
        ModelSource as ModelSource,
        AuditableDefense as AuditableDefense,
        DeclaresReleases as DeclaresReleases,
        DxLaplaceNoise as DxLaplaceNoise,
        ExactDensity as ExactDensity,
        ExactOutputProbs as ExactOutputProbs,
        FitsCounts as FitsCounts,
        PlansSpends as PlansSpends,
        ReadsFiles as ReadsFiles,
        ReleasesVerbatim as ReleasesVerbatim,
        RunsMechanisms as RunsMechanisms,
        SequenceLevel as SequenceLevel,
        is_sequence_level as is_sequence_level,
    )
    from dpkit.contract.context import AttackContext as AttackContext, RunContext as RunContext
    from dpkit.contract.privacy import PrivacySettings as PrivacySettings
    from dpkit.contract.registry import Registry as Registry
    from dpkit.contract.plugins import load_dataset as load_dataset, load_model as load_model
    from dpkit.contract.attacks import run_attack as run_attack
    from dpkit.release.declaration import Release as Release
    from dpkit.release.wire import DOWN as DOWN, UP as UP, Wire as Wire
    from dpkit.release.view import ServerView as ServerView
    from dpkit.contract.server import (
        Message as Message,
        PublicInputs as PublicInputs,
        STANDARD_PHASES as STANDARD_PHASES,
        STANDARD_RELEASES as STANDARD_RELEASES,
        Server as Server,
        handles as handles,
    )
    from dpkit.release.tokens import token_releases as token_releases
    from dpkit.contract.releases import declare_releases as declare_releases
    from dpkit.accounting.guarantees import (
        DpGuarantee as DpGuarantee,
        Guarantee as Guarantee,
        KAnonymityGuarantee as KAnonymityGuarantee,
        MetricDpGuarantee as MetricDpGuarantee,
        NoGuarantee as NoGuarantee,
    )
    from dpkit.accounting.ledger import Ledger as Ledger
    from dpkit.accounting.calibration import calibrate_noise as calibrate_noise
    from dpkit.accounting.events import dpsgd_event as dpsgd_event, epsilon_of as epsilon_of
    from dpkit.base.errors import (
        AccountingError as AccountingError,
        AuditError as AuditError,
        DataSourceError as DataSourceError,
        DpkitError as DpkitError,
        ParamsError as ParamsError,
        PluginError as PluginError,
    )
    from dpkit.text.space import EmbeddingSpace as EmbeddingSpace, stop_word_mask as stop_word_mask
    from dpkit.text.search import VocabIndex as VocabIndex, nearest as nearest
    from dpkit.text.noise import (
        clip_norms as clip_norms,
        laplace_log_density as laplace_log_density,
        sample_laplace_noise as sample_laplace_noise,
    )
    from dpkit.release.noiseless import Noiseless as Noiseless
    from dpkit.text.recovery import (
        hit_rates as hit_rates,
        knn_candidates as knn_candidates,
        knn_recovery as knn_recovery,
    )
    from dpkit.text.entropy import (
        kl_entropy as kl_entropy,
        kl_mutual_information as kl_mutual_information,
        knn_distances as knn_distances,
    )
    from dpkit.ml.loop import Validation as Validation, fit_epochs as fit_epochs
    from dpkit.ml.training import (
        TrainingCurve as TrainingCurve,
        attach_curves as attach_curves,
        converged as converged,
        convergence_metrics as convergence_metrics,
    )
    from dpkit.ml.metrics import accuracy as accuracy, auc as auc
    from dpkit.ml.precision import (
        bf16_autocast as bf16_autocast,
        warn_if_bf16_is_emulated as warn_if_bf16_is_emulated,
    )
    from dpkit.data.types import (
        Analogies as Analogies,
        TextDataset as TextDataset,
        TextSplit as TextSplit,
        WordPairs as WordPairs,
    )
    from dpkit.data.splits import build_dataset as build_dataset, seeded_split as seeded_split
    from dpkit.data.sources import (
        CatalogueEntry as CatalogueEntry,
        HubSource as HubSource,
        LocalSource as LocalSource,
        PinnedArtifact as PinnedArtifact,
        sha256_file as sha256_file,
    )
    from dpkit.models.split import SplitModel as SplitModel, mean_pool as mean_pool
    from dpkit.models.lora import with_lora as with_lora
    from dpkit.models.loaders import (
        load_hf_split as load_hf_split,
        load_npy_space as load_npy_space,
        load_word2vec_text as load_word2vec_text,
    )
    from dpkit.models.tiny import tiny_causal as tiny_causal, tiny_encoder as tiny_encoder
    from dpkit.base.cache import (
        cached as cached,
        content_key as content_key,
        process_cache as process_cache,
    )
    from dpkit.base.lazy import lazy_import as lazy_import
    from dpkit.audit.canary import CanaryRun as CanaryRun
    from dpkit.audit.canary_split import SplitCanaryAudit as SplitCanaryAudit
    from dpkit.audit.channels import (
        ChannelRun as ChannelRun,
        binomial_p_value as binomial_p_value,
        counts_p_value as counts_p_value,
        gaussian_llr_p_value as gaussian_llr_p_value,
    )

