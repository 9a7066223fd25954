"""The trade-off plot: reference lines only where a method has a single value to show."""

from types import SimpleNamespace

import matplotlib.axes

from dpkit.evidence.verdict import ClaimResult
from dpkit.report.plot import _footer, plot_tradeoff


def test_reference_lines_only_for_single_values(tmp_path, monkeypatch):
    lines = []
    original = matplotlib.axes.Axes.axhline

    def record(self, y=0, *args, **kwargs):
        lines.append((kwargs.get("label"), y))
        return original(self, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", record)
    spec = SimpleNamespace(name="t", report=SimpleNamespace(x="eta", utility="auc", privacy="ep"))
    agg = [{"method": "swept", "point": {"eta": e},
            "values": {"auc": 0.5 + e / 100, "ep": 1 - e / 100}} for e in (10, 20)]
    agg += [{"method": "no_ep", "point": {"eta": e}, "values": {"auc": 0.6}} for e in (10, 20)]
    agg += [{"method": "fixed", "point": {}, "values": {"auc": 0.7, "ep": 0.5}}]
    assert plot_tradeoff(spec, agg, ["auc", "ep"], tmp_path / "p.png").exists()
    # "fixed" has one value: a line in each panel it lacks an x for; "no_ep" has two values and
    # no ep to place them at, so it is left out of the utility-vs-privacy panel.
    assert lines == [("fixed", 0.7), ("fixed", 0.5)]


def test_nothing_to_plot_without_a_sweep_or_a_privacy_metric(tmp_path):
    spec = SimpleNamespace(name="t", report=SimpleNamespace(x=None, utility="auc", privacy=None))
    agg = [{"method": "only", "point": {}, "values": {"auc": 0.7}}]
    assert plot_tradeoff(spec, agg, ["auc"], tmp_path / "p.png") is None
    assert not (tmp_path / "p.png").exists()


def test_the_footer_gives_each_verdict_with_what_the_run_could_detect():
    result = ClaimResult("A auc > B", "undecided", "not significant", {}, [],
                         "this run detects ≥ +0.2 (80 % power); no paper effect given")
    assert [text for text, _ in _footer([result])] == [
        "?1 undecided: A auc > B", "     this run detects ≥ +0.2 (80 % power); no paper effect given"]
