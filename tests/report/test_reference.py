"""Every table carries its reference rows — no noise (the cells' own clean metric) and chance (the
majority share of the evaluated labels, computed from the data; AUC 0.5) — and says which way each
column is better; an attack's success rate is marked as worse for privacy when higher."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkit.report import render_table
from dpkit.report.labels import arrow, direction
from dpkit.report.reference import measure_reference, reference_rows
from dpkit.spec import Spec, read_yaml

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml")) + sorted((ROOT / "specs" / "paper").glob("*.yaml"))


def row(method, eta, seed, **metrics):
    return {"key": f"{method}{eta}{seed}", "method": method, "component": "c", "seed": seed,
            "point": {"eta": eta}, "metrics": metrics, "privacy": {}, "ledger": {},
            "elapsed_s": 1.0, "data": {"name": "toy_text", "params": {}}}


def spec(utility="accuracy", privacy="recovery_at5", **extra):
    return Spec.model_validate({"name": "t", "data": {"name": "toy_text"},
                                "defense": {"name": "d"}, **extra,
                                "report": {"x": "eta", "utility": utility, "privacy": privacy}})


def lines_of(text, start):
    return [line for line in text.splitlines() if line.startswith(start)]


def test_clean_row_is_the_cells_own_clean_metric_over_seeds():
    rows = [row("M", eta, s, accuracy=0.5, clean_accuracy=0.6 + 0.02 * s, recovery_at5=0.3)
            for eta in (1.0, 2.0) for s in range(3)]
    text = render_table(spec(), rows)
    (clean,) = lines_of(text, "| no noise (reference)")
    assert "0.62 ± " in clean and clean.count("–") >= 2  # the mean of 0.60/0.62/0.64; no Pr@5
    assert "Same in every row: seeds 3." in text  # reference rows do not unfold the method rows
    assert "no noise — the same evaluation on the text before privatization (clean_accuracy)" \
        in text.replace("\n  ", " ")


def test_chance_row_uses_the_runs_label_counts_and_auc_one_half():
    rows = [row("M", 1.0, s, accuracy=0.55, auc=0.61) for s in range(2)]
    reference = {"format": "dpkit-run-reference/1", "spaces": {}, "labels": [
        {"data": {"name": "toy_text"}, "split": "test", "n": 400, "counts": {"fresh": 230,
         "rotten": 170}, "majority": "fresh", "majority_share": 0.575}]}
    text = render_table(spec(privacy="auc"), rows, reference=reference)
    (chance,) = lines_of(text, "| chance (reference)")
    assert "0.575" in chance and "0.5 " in chance
    flat = text.replace("\n  ", " ")
    assert "always answering the most common label, 'fresh' (230 of the 400 test texts)" in flat
    assert "AUC 0.5 of any score that ignores the text" in flat


def test_no_accuracy_chance_when_the_run_read_several_data_sets():
    refs = [{"data": {"name": "toy_text", "params": {"n_docs": n}}, "split": "test", "n": n,
             "counts": {}, "majority": "a", "majority_share": 0.5 + n / 100} for n in (8, 12)]
    values = dict(reference_rows([row("M", 1.0, 0, accuracy=0.5, auc=0.6)], ["accuracy", "auc"],
                                 {"labels": refs}))
    assert values["chance (reference)"] == {"auc": 0.5}


def test_an_attacks_accuracy_has_the_attacks_own_majority_guess_as_floor():
    rows = [row("M", 1.0, s, attribute_accuracy=0.7, attribute_majority=0.52 + 0.01 * s)
            for s in range(2)]
    (label, values), = reference_rows(rows, ["attribute_accuracy"], None)
    assert label == "chance (reference)" and values["attribute_accuracy"].mean == pytest.approx(0.525)


def test_majority_share_is_computed_from_the_evaluated_labels(toy_plugins):
    """Measured from the data itself, honouring the mechanism task's max_docs."""
    from dpkit.testing.toy import ToyText

    s = Spec.model_validate({"name": "t", "data": {"name": "toy_text", "params": {"n_docs": 41}},
                             "mechanism": {"name": "m"}, "evaluation": {"max_docs": 7}})
    (labels,) = measure_reference(s, [{"key": "k", "method": "m", "seed": 0, "data": None}],
                                  toy_plugins)["labels"]
    truth = ToyText(ToyText.Params(n_docs=41)).load().splits["test"].labels[:7]
    top = max(set(truth), key=truth.count)
    assert labels["n"] == 7 and labels["majority_share"] == truth.count(top) / 7
    assert sum(labels["counts"].values()) == 7


def test_every_column_says_which_way_is_better():
    rows = [row("M", 1.0, s, accuracy=0.5, recovery_at5=0.3, perplexity=12.0) for s in range(2)]
    text = render_table(spec(), rows, wide=True).replace("\n  ", " ")
    assert "accuracy ↑ accuracy of a classifier on the privatized text — higher is better" in text
    assert "recovery_at5 ↓ token recovery attack: Pr@5 (original word in top 5) — attack " \
           "success: higher is worse for privacy" in text
    assert "perplexity ↓" in text and "lower is better" in text


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_specs_headline_metrics_have_a_direction(path):
    report = read_yaml(path).get("report") or {}
    for metric in (report.get("utility"), report.get("privacy")):
        if metric:
            assert direction(metric) is not None, f"{path.name}: {metric} has no direction"
            assert arrow(metric) in ("↑", "↓")


def test_attack_success_points_down_and_privacy_up():
    assert arrow("knn_top1") == arrow("inversion_cosine_top1") == arrow("recovery_at1") == "↓"
    assert arrow("ep") == arrow("auc") == arrow("rougeL_generation") == "↑"
    assert direction("made_up_metric") is None and arrow("made_up_metric") == ""
    assert direction("chance_auc") == direction("clean_auc") == direction("auc")


REFERENCE_LABELS = ("no noise", "plaintext", "η = ∞", "noiseless", "non-private", "public only")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_has_a_floor_or_ceiling_in_its_default_table(path):
    """A chance row (accuracy: the majority class; AUC 0.5), a no-noise row from the task's
    clean metric (privatize_text reports clean_accuracy), or a reference method of its own."""
    raw = read_yaml(path)
    utility = (raw.get("report") or {}).get("utility")
    labels = [str(m.get("label", "")).lower() for m in
              [raw.get("defense") or {}, raw.get("mechanism") or {}, *(raw.get("baselines") or [])]]
    chance = utility in ("accuracy", "auc")
    own = any(word.lower() in label for label in labels for word in REFERENCE_LABELS)
    assert chance or own, f"{path.name}: no reference row for {utility}"


def test_the_plot_draws_the_reference_levels(tmp_path, monkeypatch):
    import matplotlib.axes

    from dpkit.report import write_outputs

    levels = []
    original = matplotlib.axes.Axes.axhline

    def record(self, y=0, *args, **kwargs):
        levels.append((kwargs.get("label"), round(y, 4)))
        return original(self, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", record)
    rows = [row("M", eta, s, accuracy=0.5 + eta / 10, clean_accuracy=0.7, recovery_at5=eta / 4)
            for eta in (1.0, 2.0) for s in range(2)]
    reference = {"format": "dpkit-run-reference/1", "spaces": {}, "labels": [
        {"data": {}, "split": "test", "n": 10, "counts": {"a": 6, "b": 4}, "majority": "a",
         "majority_share": 0.6}]}
    write_outputs(spec(), [], rows, tmp_path, reference=reference)
    assert ("no noise (reference)", 0.7) in levels and ("chance (reference)", 0.6) in levels


def test_a_cells_own_chance_level_wins_over_the_whole_split():
    """A defense that scores a subset can report chance_accuracy on exactly that subset."""
    rows = [row("M", 1.0, s, accuracy=0.7, chance_accuracy=0.55 + 0.01 * s) for s in range(2)]
    reference = {"labels": [{"data": {}, "split": "test", "n": 1000, "counts": {},
                             "majority": "a", "majority_share": 0.6}]}
    (label, values), = reference_rows(rows, ["accuracy"], reference)
    assert values["accuracy"].mean == pytest.approx(0.555)
    text = render_table(spec(privacy=None), rows, reference=reference).replace("\n  ", " ")
    assert "accuracy: chance_accuracy, the cells' own chance level" in text
    assert "most common label" not in text
