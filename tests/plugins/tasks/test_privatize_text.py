"""privatize_text: spends before release, per-token / per-document units, OOV policy, metrics."""

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.data.types import TextDataset, TextSplit
from dpkit.contract.plugins import get_registry
from dpkit.testing import DefenseContract
from dpkit.testing.params_contract import tiny_context
from dpkit.testing.strategies_tokens import random_space


def toy_dataset(space, n_train=120, n_test=40):
    def split(n, seed):
        g = torch.Generator().manual_seed(seed)
        texts, labels = [], []
        for _ in range(n):
            y = int(torch.randint(0, 2, (1,), generator=g))
            ids = torch.randint(4 + 30 * y, 34 + 30 * y, (10,), generator=g).tolist()
            texts.append(" ".join(space.tokens[i] for i in ids) + " the unknownword")
            labels.append(y)
        return TextSplit(texts, labels)
    return TextDataset("toy", {"train": split(n_train, 1), "test": split(n_test, 2)})


@pytest.fixture(scope="module")
def setting():
    space = random_space(64, 8, 0, stop_words=True)
    return space, toy_dataset(space), get_registry()


def run(setting, mechanism, params, **task):
    space, data, registry = setting
    ctx = tiny_context(space, data, registry=registry)
    defense = registry.build("defense", "privatize_text",
                             {"mechanism": mechanism, "mechanism_params": params, **task})
    return defense.run(ctx), ctx


def server_view(ctx):
    """What the cell's server kept (the in-process host's server)."""
    return ctx.wire.channel().host.server.view()


def test_laplace_per_token_spend_and_view(setting):
    result, ctx = run(setting, "laplace_dx", {"eta": 1e6}, utility="classifier")
    (spend,) = ctx.ledger.spends
    assert spend.count == 40 * 11 and spend.guarantee.eta == 1e6
    assert result.metrics["token_preservation"] == 1.0
    assert result.metrics["accuracy"] == result.metrics["clean_accuracy"] > 0.8
    assert result.metrics["converged"] == 1.0
    assert result.training_curves[0]["component"] == "utility classifier"
    view = server_view(ctx)
    assert view["embeddings"].shape == (440, 8)
    assert torch.equal(view["substituted_ids"], result.truth["token_ids"])
    assert view["representations"].shape == (40, 8)


def test_sequence_unit_spends_per_document(setting):
    _, ctx = run(setting, "dx_stencil", {"eta": 2.0, "window": 4})
    spend, verbatim = ctx.ledger.spends
    assert spend.count == 40 and spend.guarantee.unit == "sequence"
    # every toy document holds one stop word ("the"), released verbatim: recorded as ε = ∞
    assert verbatim.count == 40 and verbatim.guarantee.notion == "none"
    _, ctx = run(setting, "dx_stencil", {"eta": 2.0, "window": 4, "keep_stop_words": False})
    assert len(ctx.ledger.spends) == 1


def test_oov_keep_is_recorded_as_no_guarantee(setting):
    result, ctx = run(setting, "text2text", {"eta": 1.0}, oov="keep")
    reasons = ctx.ledger.no_guarantee_reasons
    assert any("out-of-vocabulary" in r and "40 " in r for r in reasons)
    assert ctx.ledger.epsilon() == float("inf")
    # the out-of-vocabulary words do not cross: the server holds the in-vocabulary ones only
    assert len(server_view(ctx)["substituted_ids"]) == len(result.truth["token_ids"]) == 440


def test_small_eta_destroys_utility_and_preservation(setting):
    result, _ = run(setting, "text2text", {"eta": 0.01}, utility="classifier")
    assert result.metrics["token_preservation"] < 0.2
    assert result.metrics["accuracy"] < result.metrics["clean_accuracy"]


def test_spend_happens_before_release(setting):
    space, data, registry = setting
    ctx = RunContext(dataset=data, model=space, device=torch.device("cpu"), seed=0,
                     ledger=Ledger(ceiling={"eta": 10.0}), registry=registry)  # cannot send
    defense = registry.build("defense", "privatize_text",
                             {"mechanism": "laplace_dx", "mechanism_params": {"eta": 1.0}})
    with pytest.raises(Exception, match="(?i)budget|ceiling|exceed"):
        defense.run(ctx)
    assert not ctx.ledger.spends


def test_unknown_mechanism_and_non_space_model(setting):
    with pytest.raises(Exception, match="santex"):
        run(setting, "santex", {"epsilon": 1.0})
    space, data, registry = setting
    ctx = RunContext(dataset=data, model=object(), device=torch.device("cpu"), seed=0,
                     ledger=Ledger(), registry=registry)
    defense = registry.build("defense", "privatize_text", {"mechanism": "santext",
                                                           "mechanism_params": {"epsilon": 1.0}})
    with pytest.raises(ValueError, match="EmbeddingSpace"):
        defense.run(ctx)


def test_custext_plus_records_its_verbatim_stop_words(setting):
    _, ctx = run(setting, "custext_plus", {"epsilon": 2.0, "top_k": 4})
    # every toy document holds one stop word ("the"): 40 words without an output set
    assert any("40 tokens released verbatim" in r for r in ctx.ledger.no_guarantee_reasons)
    assert ctx.ledger.summary()["epsilon"] == float("inf")


def test_k_anonymity_epsilon_is_per_document_not_per_split(setting):
    _, ctx = run(setting, "custext", {"epsilon": 2.0, "top_k": 4})
    (spend,) = [s for s in ctx.ledger.spends if s.guarantee.notion == "k_anonymity"]
    assert spend.count == 11  # the longest document's released tokens, not all 440
    assert ctx.ledger.k_anonymity().epsilon == 22.0


def test_the_server_keeps_only_what_crossed_the_wire(setting):
    for mechanism, params in (("laplace_dx", {"eta": 5.0}), ("text2text", {"eta": 5.0}),
                              ("dx_stencil", {"eta": 2.0, "window": 4})):
        result, ctx = run(setting, mechanism, params)
        view = server_view(ctx)
        sent = "embeddings" if mechanism == "laplace_dx" else "substituted_ids"
        units = 40 if mechanism == "dx_stencil" else 440  # documents for a sequence-level guarantee
        assert set(ctx.wire.units) == {sent} and ctx.wire.units[sent] == units
        assert set(view) == {"substituted_ids", "representations"} | {sent}
        assert ctx.wire.bytes(direction="up") == view[sent].numel() * view[sent].element_size()


class TestPrivatizeTextContract(DefenseContract):
    """privatize_text around a per-token, a per-document and a verbatim-releasing mechanism."""

    defense = "privatize_text"
    params = {"mechanism": "dx_stencil", "mechanism_params": {"eta": 2.0, "window": 4},
              "oov": "keep", "utility": "classifier"}
    invalid_params = [{"mechanism": "laplace_dx", "oov": "sometimes"}, {}]

    def make_context(self):
        space = random_space(64, 8, 0, stop_words=True)
        return tiny_context(space, toy_dataset(space))


class TestPrivatizeTextCusTextContract(TestPrivatizeTextContract):
    params = {"mechanism": "custext_plus", "mechanism_params": {"epsilon": 2.0, "top_k": 4}}


def test_classifier_cache_is_registered_under_the_plugin_name():
    from dpkit.base.cache import caches
    from dpkit_tasks import classifier

    assert caches()["tasks.text_classifiers"] is classifier._TRAINED
    assert caches()["tasks.text_classifiers"].description
