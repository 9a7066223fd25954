"""``dpkit budget``: dpsgd, calibrate and spec outputs, JSON, and one-line errors (exit 2)."""

import json

import pytest

import dpkit.cli.main as cli_main


@pytest.fixture
def budget(monkeypatch, capsys):
    """Run ``dpkit budget ...`` through the real entry point (only the budget command loaded)."""
    monkeypatch.setattr(cli_main, "COMMANDS", ("budget",))

    def run(*argv):
        try:
            code = cli_main.main(["budget", *argv])
        except SystemExit as exc:  # argparse errors exit from parse_args
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err
    return run


def test_dpsgd_reference_rdp_and_pld(budget):
    code, out, _ = budget("dpsgd", "--noise-multiplier", "4", "--sampling-rate", "0.01",
                          "--steps", "10000", "--delta", "1e-5")
    assert code == 0 and out.startswith("ε = 1.035490 at δ = 1e-05 (RDP")
    code, out, _ = budget("dpsgd", "--noise-multiplier", "4", "--sampling-rate", "0.01",
                          "--steps", "10000", "--accountant", "pld", "--json")
    record = json.loads(out)
    assert code == 0 and record["accountant"] == "pld"
    assert record["epsilon"] == pytest.approx(0.947, abs=5e-4)


def test_calibrate_round_trip(budget):
    code, out, _ = budget("calibrate", "--target-epsilon", "1", "--delta", "1e-5",
                          "--sampling-rate", "0.01", "--steps", "1000", "--json")
    record = json.loads(out)
    assert code == 0 and 0.99 <= record["epsilon"] <= 1.0
    code, out, _ = budget("dpsgd", "--noise-multiplier", repr(record["noise_multiplier"]),
                          "--sampling-rate", "0.01", "--steps", "1000", "--json")
    assert json.loads(out)["epsilon"] == pytest.approx(record["epsilon"], rel=1e-12)
    code, out, _ = budget("calibrate", "--target-epsilon", "2", "--sensitivity", "3")
    assert code == 0 and "noise multiplier σ = " in out and "sensitivity 3" in out


@pytest.mark.parametrize("argv, needle", [
    (["dpsgd", "--noise-multiplier", "-1"], "noise multiplier must lie in (0, inf)"),
    (["dpsgd", "--noise-multiplier", "abc"], "noise multiplier must be a number, got 'abc'"),
    (["dpsgd", "--noise-multiplier", "1", "--sampling-rate", "2"], "sampling rate must lie in"),
    (["dpsgd", "--noise-multiplier", "1", "--steps", "0"], "steps must be ≥ 1"),
    (["dpsgd", "--noise-multiplier", "1", "--delta", "1"], "delta must lie in (0, 1)"),
    (["dpsgd", "--noise-multiplier", "1", "--accountant", "moments"], "invalid choice"),
    (["calibrate", "--target-epsilon", "0"], "target epsilon must lie in"),
    (["dpsgd"], "required: --noise-multiplier"),
    ([], "required: COMMAND"),
])
def test_bad_arguments_one_line_exit_2(budget, argv, needle):
    code, out, err = budget(*argv)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_spec_lists_planned_spends(budget, toy_plugins, tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("""
name: plan
data: {name: toy_text}
model: {name: toy_space}
defense: {name: toy_noise, params: {eta: 1.0}, sweep: {eta: [0.5, 2.0]}}
seeds: [0, 1]
privacy: {delta: 1.0e-5, accountant: rdp}
""")
    code, out, _ = budget("spec", str(path), "--json")
    record = json.loads(out)
    plans = record["cells"]
    (group,) = record["total"]["groups"]  # 2 points × 2 seeds of one dataset, composed
    assert group["cells"] == 4 and group["release_every_cell"]["dp"]["epsilon"] > 0
    assert code == 0 and [p["point"] for p in plans] == [{"eta": 0.5}, {"eta": 2.0}]  # seeds collapsed
    # toy_noise declares its releases: the plan holds the run's own entry, for both seeds
    assert all(p["kind"] == "defense" and p["seeds"] == [0, 1] for p in plans)
    assert all([s["label"] for s in p["spends"]] == ["toy_noise"] for p in plans)
    assert all(p["spends"][0]["count"] == 12 * 8 for p in plans)  # 12 test docs of 8 words
    code, out, _ = budget("spec", str(path))
    assert code == 0 and "planned spends" in out and "eta=0.5" in out
    assert "Releasing every cell (4 cells reading toy_text" in out


def test_spec_missing_file_is_one_line_error(budget, toy_plugins, tmp_path):
    code, out, err = budget("spec", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file" in err and len(err.strip().splitlines()) == 1
