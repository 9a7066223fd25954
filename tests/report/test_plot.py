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


def test_one_line_per_other_swept_value_log_axis_and_axes_named_with_the_guarantee(
        tmp_path, monkeypatch):
    import matplotlib.figure

    seen = {}

    def record(fig, path, **kwargs):
        seen["axes"] = [(ax.get_xlabel(), ax.get_ylabel(), ax.get_xscale(), ax.get_yscale(),
                         [line.get_label() for line in ax.get_legend_handles_labels()[0]])
                        for ax in fig.axes]

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    spec = SimpleNamespace(name="t", report=SimpleNamespace(x="target_epsilon",
                                                            utility="perplexity", privacy=None),
                           privacy=SimpleNamespace(delta=1e-5))
    agg = [{"method": "DPED", "point": {"target_epsilon": e, "num_queries": q},
            "values": {"perplexity": 2300.0 * (1 + e / 10), "epsilon": float(e)}}
           for e in (1, 64, 4096) for q in (300, 3000)]
    plot_tradeoff(spec, agg, ["perplexity"], tmp_path / "p.png")
    ((xlabel, ylabel, xscale, yscale, labels),) = seen["axes"]
    assert xlabel == "target_epsilon: ε — (ε, δ)-DP at δ = 1e-05"
    assert ylabel.startswith("perplexity on held-out")
    assert (xscale, yscale) == ("log", "log")  # 1…4,096 and 2,530…944,000
    assert labels == ["DPED, num_queries=300", "DPED, num_queries=3000"]


def test_labels_for_people():
    from dpkit.report.labels import axis_label, metric_label, spans_orders

    assert metric_label("recovery_at5").startswith("token recovery attack: Pr@5")
    assert metric_label("some_metric") == "some metric"
    agg = [{"point": {"eta": 10}, "values": {"eta_per_token": 10.0}}]
    assert axis_label("eta", agg, 1e-5, True) == "eta: η per token — metric DP, ε = η·d(x, x′)"
    assert axis_label("eta", [{"point": {"eta": 10}, "values": {}}], 1e-5, True) == "eta"
    assert spans_orders([2300, 6e5]) and not spans_orders([0.4, 0.66]) and not spans_orders([0, 5])
