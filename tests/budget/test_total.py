"""A spec's total: the cells of one dataset and relation composed, by dp-accounting directly."""

import json

import dp_accounting
import pytest
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import (
    DpGuarantee,
    KAnonymityGuarantee,
    Ledger,
    MetricDpGuarantee,
    NoGuarantee,
    guarantee_to_dict,
)
from dpkit.accounting.serialize import event_from_dict
from dpkit.budget import CellSpends, DatasetId, compose_cells
from dpkit.budget.summary import spec_privacy_text
from dpkit.budget.total import ledger_of, ledger_record, record_spends
from dpkit.contract.plugins import get_registry
from dpkit.runner import run_spec
from dpkit.spec import load_spec

CORPUS = DatasetId("corpus", "sha256:corpus", "test")
OTHER = DatasetId("other", "sha256:other", "test")


def spend(g, count=1, label="r"):
    return {"label": label, "count": count, "guarantee": guarantee_to_dict(g)}


def test_cells_of_one_dataset_compose_and_others_stay_apart():
    gauss = DpGuarantee(dp_accounting.GaussianDpEvent(3.0))
    cells = [CellSpends("k1", "A", CORPUS, "add_remove", [spend(gauss, 2)]),
             CellSpends("k2", "A", CORPUS, "add_remove", [spend(gauss, 3)]),
             CellSpends("k3", "B", OTHER, "add_remove", [spend(gauss)]),
             CellSpends("k4", "B", CORPUS, "replace_one", [spend(gauss)]),
             CellSpends("k5", "A", CORPUS, "add_remove",
                        [spend(MetricDpGuarantee(5.0, "l2", "glove"), 100)])]
    groups = compose_cells(cells, 1e-5, "rdp")
    assert [(g.dataset.name, g.neighboring, len(g.members)) for g in groups] == [
        ("corpus", "add_remove", 3), ("other", "add_remove", 1), ("corpus", "replace_one", 1)]
    direct = RdpAccountant().compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(3.0), 5)).get_epsilon(1e-5)
    assert groups[0].ledger.epsilon() == pytest.approx(direct, rel=1e-12)
    assert groups[0].ledger.eta_per_token() == 5.0  # metric DP kept apart, per token
    assert set(groups[0].methods()) == {"A"}


def test_a_run_reports_its_total_in_the_table_ledger_and_claims(toy_spec_text, toy_plugins, capsys):
    from dpkit.cli.main import main

    path, out = toy_spec_text
    path.write_text(path.read_text().replace("seeds: [0]", "seeds: [0, 1]"))
    assert main(["run", str(path), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Releasing every cell (6 cells reading toy_text" in printed
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    raw = RdpAccountant()
    for r in rows:
        for s in r["ledger"]["spends"]:
            raw.compose(event_from_dict(s["guarantee"]["event"]), s["count"])
    (group,) = json.loads((out / "ledger.json").read_text())["total"]["groups"]
    assert group["release_every_cell"]["dp"]["epsilon"] == pytest.approx(raw.get_epsilon(1e-5),
                                                                         rel=1e-9)
    assert group["selection"]["data"] == "none"
    assert f"{raw.get_epsilon(1e-5):.6g}" in printed


def test_selection_on_private_data_is_charged(toy_spec_text, toy_plugins):
    from dpkit.report import render_table

    path, out = toy_spec_text
    text = path.read_text().replace("report:", "selection: {data: private, metric: preserved}\n"
                                               "report:")
    path.write_text(text)
    spec = load_spec(path, registry=get_registry())
    rows = run_spec(spec, show_progress=False, registry=get_registry()).rows
    (group,) = json.loads((out / "ledger.json").read_text())["total"]["groups"]
    (toy,) = group["selection"]["methods"].values()
    assert toy["release_best"]["dp"]["epsilon"] == "inf" and toy["candidates"] == 3
    # The noise is drawn from the run's secret, so which η wins on 16 documents may vary:
    # the best point must be the candidate with the highest mean `preserved` among the rows.
    scored = {r.point["eta"]: r.metrics["preserved"] for r in rows
              if r.point and "eta" in r.point and "preserved" in r.metrics}
    assert set(scored) == {0.5, 2.0, 8.0}
    assert toy["best"]["point"] == {"eta": max(scored, key=scored.__getitem__)}
    assert toy["best"]["preserved"] == pytest.approx(max(scored.values()))
    assert "without noise" in render_table(spec, rows)


def test_the_text_keeps_notions_apart():
    cells = [CellSpends("k1", "A", CORPUS, "add_remove",
                        [spend(MetricDpGuarantee(5.0, "l2", "glove"), 100),
                         spend(DpGuarantee.pure(1.0), 2)])]
    from dpkit.budget import spec_privacy

    class Spec:
        class privacy:
            delta, accountant = 1e-5, "rdp"

        class selection:
            data = "none"

    text = spec_privacy_text(spec_privacy(Spec, cells))
    assert "(ε, δ)-DP: ε = 2 at δ = 1e-05" in text
    assert "metric DP (l2 on glove): η = 5 per token — ε = η·d(x, x′), kept apart" in text


# ---------------------------------------------------------------- fast, direct: the composition


def test_every_spend_of_every_cell_is_composed_at_the_groups_delta_accountant_and_relation():
    half, pure = DpGuarantee.pure(0.5), DpGuarantee.pure(0.25)
    cells = [CellSpends("k1", "A", CORPUS, "replace_one", [spend(half, 2), spend(pure, 3)]),
             CellSpends("k2", "A", CORPUS, "replace_one", [spend(half, 4)])]
    (group,) = compose_cells(cells, 1e-6, "pld")
    ledger = group.ledger
    assert (ledger.delta_target, ledger.accountant, ledger.neighboring) == (1e-6, "pld", "replace_one")
    assert group.dataset == CORPUS and group.neighboring == "replace_one" and group.members == cells
    alone = ledger_of(cells, 1e-6, "pld", "replace_one")
    assert [(s.guarantee, s.count) for s in alone.spends] == [(half, 2), (pure, 3), (half, 4)]
    assert ledger.epsilon() == pytest.approx(alone.epsilon())
    # nothing is dropped: one release fewer of either guarantee costs strictly less
    for short in ([spend(half, 2), spend(pure, 2)], [spend(half, 1), spend(pure, 3)]):
        fewer = ledger_of([cells[0]._replace(spends=short), cells[1]], 1e-6, "pld", "replace_one")
        assert fewer.epsilon() < ledger.epsilon()


def test_cells_are_grouped_by_fingerprint_not_by_name():
    pure = DpGuarantee.pure(1.0)
    renamed = DatasetId("corpus-v2", CORPUS.fingerprint, "test")  # same records, another name
    namesake = DatasetId("corpus", "sha256:else", "test")  # another dataset, the same name
    cells = [CellSpends("k1", "A", CORPUS, "add_remove", [spend(pure)]),
             CellSpends("k2", "A", renamed, "add_remove", [spend(pure)]),
             CellSpends("k3", "A", namesake, "add_remove", [spend(pure)])]
    groups = compose_cells(cells, 1e-5, "rdp")
    assert [(g.dataset, [c.key for c in g.members], g.ledger.epsilon()) for g in groups] == [
        (CORPUS, ["k1", "k2"], pytest.approx(2.0)), (namesake, ["k3"], pytest.approx(1.0))]


def test_each_cells_spends_keep_their_label_after_the_cells_key():
    pure = DpGuarantee.pure(1.0)
    cells = [CellSpends("0123456789abcdef", "A", CORPUS, "add_remove", [spend(pure, label="noise")]),
             CellSpends("fedcba9876543210", "A", CORPUS, "add_remove", [spend(pure, label="noise")])]
    labels = [s.label for s in ledger_of(cells, 1e-5, "rdp", "add_remove").spends]
    assert labels == ["01234567 noise", "fedcba98 noise"]
    ledger = Ledger()
    record_spends(ledger, [spend(pure, label="noise")])
    assert [s.label for s in ledger.spends] == ["noise"]  # no prefix unless one is given


def test_a_count_read_back_as_a_float_is_still_counted_in_full():
    ledger = Ledger()
    record_spends(ledger, [{"label": "r", "count": 3.0, "guarantee": guarantee_to_dict(DpGuarantee.pure(0.5))}])
    assert [s.count for s in ledger.spends] == [3] and ledger.epsilon() == pytest.approx(1.5)


def test_the_record_keeps_each_notion_apart_with_its_own_total():
    ledger = Ledger(delta=1e-6, accountant="pld")
    record_spends(ledger, [spend(DpGuarantee.pure(0.5), 2),
                           spend(MetricDpGuarantee(5.0, "l2", "glove"), 100),
                           spend(MetricDpGuarantee(5.0, "l2", "glove"), 10),
                           spend(MetricDpGuarantee(2.0, "l2", "glove", "sequence"), 3),
                           spend(KAnonymityGuarantee(10, 4, 0.25, 0.5), 3)])
    record = ledger_record(ledger)
    assert record["releases"] == len(ledger.spends) == 5
    assert record["dp"] == {"epsilon": pytest.approx(ledger.epsilon()), "delta": 1e-6,
                            "accountant": "pld"}
    assert record["dp"]["epsilon"] == pytest.approx(1.0, rel=1e-4)  # two releases of ε = 0.5
    per_unit = {(m["metric"], m["space"], m["unit"]): (m["eta_per_unit"], m["eta_over_all_releases"])
                for m in record["metric_dp"]}
    assert per_unit == {("l2", "glove", "token"): (pytest.approx(10.0), pytest.approx(550.0)),
                        ("l2", "glove", "sequence"): (pytest.approx(2.0), pytest.approx(6.0))}
    k = ledger.k_anonymity()
    assert record["k_anonymity"] == {"k_achieved": 4, "k_requested": 10, "share_below_k": 0.25,
                                     "epsilon": pytest.approx(1.5)} and k is not None
    assert "no_guarantee_reasons" not in record
    json.dumps(record)


def test_a_release_without_a_guarantee_is_an_infinite_epsilon_with_its_reason():
    ledger = Ledger()
    record_spends(ledger, [spend(NoGuarantee("the raw text was sent"))])
    record = ledger_record(ledger)
    assert record["dp"]["epsilon"] == "inf" and record["releases"] == 1
    assert record["no_guarantee_reasons"] == ["the raw text was sent"]
    assert "metric_dp" not in record and "k_anonymity" not in record
    assert json.loads(json.dumps(record, allow_nan=False)) == record


def test_a_ledger_of_metric_dp_alone_states_no_dp_epsilon():
    ledger = Ledger()
    record_spends(ledger, [spend(MetricDpGuarantee(1.0), 4)])
    record = ledger_record(ledger)
    assert "dp" not in record and record["metric_dp"][0]["eta_over_all_releases"] == 4.0
    assert ledger_record(Ledger()) == {"releases": 0}
