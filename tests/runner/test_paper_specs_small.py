"""The five papers' specs, shrunk (``SHRINKS``), run through ``dpkit run`` with every
cell's server in its own confined process: every cell finishes, every claim is evaluated, every
ledger is what the plan (``dpkit budget spec``) says; then again with the server in the client's
process on the same noise secret, which must give the same metrics and ledgers."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml

import dpkit.base.cache
import dpkit.contract.plugins
from dpkit.boundary.channel import InProcessChannel, ProcessChannel
from dpkit.boundary.confine import landlock_abi
from dpkit.cli.main import main
from dpkit.runner.plan import plan_one
from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.spec import expand, load_spec
from dpkit.spec.loader import read_yaml
from dpkit.testing.small_specs import TINY_PLUGINS, Shrink, write_small_spec

# How each spec is shrunk: tiny generated data (``generated_text``, ``toy_text``), tiny models
# (``tiny-encoder``, ``toy_space``), few examples, one epoch, small attacks, a subset of each sweep
# (the values kept are the claims' points where a claim names some); every method, attack,
# privacy setting and claim is the committed spec's.
TEXT = {"name": "generated_text", "params": {"n_train": 48, "n_test": 24, "seed": 0}}
PUBLIC = {"name": "generated_text", "params": {"n_train": 64, "n_test": 8, "seed": 7}}
ENCODER = {"name": "tiny-encoder", "params": {"hidden_size": 32, "num_layers": 2, "num_heads": 2,
                                              "seed": 0}}

SND_READ = {"max_tokens": 12, "train_examples": 32, "test_examples": 16, "batch_size": 16,
            "classifier_epochs": 1, "classifier_patience": 1, "mi_tokens": 32,
            "view_tokens": 32}
DENOISER = {"denoiser": {"d_model": 16, "n_layers": 1, "public": PUBLIC, "public_examples": 48,
                         "epochs": 1, "patience": 1, "batch_size": 16}}
SND = {**SND_READ, **DENOISER}

HIDDENECHO = {"epochs": 1, "patience": 1, "batch_size": 16, "max_length": 12,
              "train_examples": 32, "test_examples": 16, "lora_rank": 2, "attack_tokens": 32}
HIDDENECHO_FILTERED = {**HIDDENECHO, "reduction_factor": 4, "ig_steps": 2, "ig_samples": 2}

DPED_CORPUS = {"public_data": "generated_text", "public_data_params": PUBLIC["params"],
               "topic_data": "generated_text", "topic_data_params": TEXT["params"],
               "vocab_size": 30, "min_count": 1, "dim": 8, "window": 2, "epochs": 1,
               "heldout_pairs": 200, "validation_pairs": 200}
DPED_TEACHERS = {**DPED_CORPUS, "teachers": 4, "teacher_epochs": 1, "teacher_patience": None}
DPED_STUDENT = {**DPED_TEACHERS, "student_epochs": 2, "student_patience": 1}
DPED_SGD = {**DPED_CORPUS, "steps_by_epsilon": {1: 4, 4096: 4}}

OBFUSLM = {"epochs": 1, "patience": 1, "validate_every": 32, "validation_size": 8,
           "batch_size": 16, "max_length": 12, "max_train": 32, "max_test": 16,
           "public_dataset": "generated_text", "public_params": PUBLIC["params"],
           "attack_docs": 16}

SHRINKS = {
    "snd": Shrink(
        data=TEXT, model=ENCODER,
        params={"snd": SND, "snd_server_denoise": SND, "tokembpriv": SND_READ,
                "snd_text2text": SND_READ, "snd_clean": SND_READ},
        attacks={"nn_inversion": {"max_queries": 32}},
        keep={"eta": [100, 200]}),  # the claim "at η ≥ 100" names both
    "dped": Shrink(
        data=TEXT,
        params={"dped": DPED_STUDENT, "dped_pate": DPED_STUDENT, "dped_dpsgd": DPED_SGD,
                "dped_public_sgd": DPED_SGD, "dped_public": DPED_CORPUS,
                "dped_ensemble": DPED_TEACHERS, "dped_nonprivate_sgd": {**DPED_CORPUS,
                                                                        "steps": 4},
                "dped_nonprivate": DPED_CORPUS},
        keep={"target_epsilon": [1, 4096]},
        rename={"num_queries": {300: 10, 3000: 20}}),  # the generated corpus has 27 words
    "stencil": Shrink(
        data={"name": "toy_text", "params": {"n_docs": 24}}, model={"name": "toy_space"},
        evaluation={"max_docs": 12, "classifier_train_docs": 12, "max_tokens_per_doc": 8},
        keep={"eta": [15, 25, 12], "epsilon": [1]}),
    "hiddenecho": Shrink(
        data=TEXT, model=ENCODER,
        params={"hiddenecho": HIDDENECHO_FILTERED, "hiddenecho_full": HIDDENECHO,
                "hiddenecho_ldp": HIDDENECHO, "snd": SND},
        attacks={"nn_inversion": {"max_queries": 32}},
        keep={"eta": [60]}),
    "obfuslm": Shrink(
        data=TEXT, model=ENCODER,
        params={"obfuslm": OBFUSLM, "obfuslm_plaintext": OBFUSLM},
        attacks={"learned_inversion": {"steps": 2}},
        keep={"k": [10]}),
}

SPECS = Path(__file__).resolve().parents[2] / "specs"
VERDICTS = {"holds", "refuted", "undecided"}
DRAWN = ("k_achieved", "share_below_k")  # (k, ε)-anonymity of the secret draw: not planned


def is_timing(metric: str) -> bool:
    """Wall-clock and CPU timings, which the machine's load decides: ``denoiser_seconds``,
    ``epoch_seconds``, ``epoch_cpu_seconds``, ``train_s``, ``obfuscate_s``, and
    ``epoch_server_cpu_seconds``, which only a server in a process of its own reports (HiddenEcho
    reads that process's CPU clock; in the client's process the client's clock counts it)."""
    return metric.endswith(("_seconds", "_s"))


@pytest.fixture
def tiny_plugins(monkeypatch):
    """The installed plug-ins plus the tiny data and spaces, a server process loading them too;
    no budget store, no download, a cache of the test's own; torch on one thread."""
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", TINY_PLUGINS)
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    monkeypatch.setenv("DPKIT_OFFLINE", "1")
    dpkit.contract.plugins.reset()
    # one thread, which each server inherits: on a loaded 2-core machine OpenMP's second thread
    # makes these tiny models' steps a hundred times slower (a 48×32 MLP: 3.5 s against 0.03 s)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield dpkit.contract.plugins.get_registry()
    torch.set_num_threads(threads)
    dpkit.contract.plugins.reset()


def structure(raw: dict) -> dict:
    """What shrinking must keep: each method's component and label, the attacks, the privacy
    settings and the claims' names and methods."""
    methods = [m for m in (raw.get("defense"), raw.get("mechanism"), *raw.get("baselines", [])) if m]
    return {"methods": [(m["name"], m.get("label")) for m in methods],
            "attacks": [a["name"] for a in raw.get("attacks", [])], "privacy": raw.get("privacy"),
            "claims": [(c["name"], c["method"], c["versus"], c["metric"]) for c in raw["claims"]]}


def run_mode(spec: Path, out: Path, mode: str, monkeypatch) -> dict[str, dict]:
    """``dpkit run`` of ``spec`` into ``out`` with the server ``mode``; its rows by cell key. The
    requests of the run all went through that mode's channel."""
    monkeypatch.setenv("DPKIT_SERVER", mode)
    # nothing shared with the other mode, on disk or in memory: each computes all, as a new run
    monkeypatch.setenv("DPKIT_CACHE", str(out.parent / f"cache-{mode}"))
    dpkit.base.cache.clear_all()
    requests: Counter[str] = Counter()
    for channel in (ProcessChannel, InProcessChannel):
        def counted(self, data, _request=channel.request, _kind=channel.__name__):
            requests[_kind] += 1
            return _request(self, data)

        monkeypatch.setattr(channel, "request", counted)
    status = main(["run", str(spec), "--out", str(out), "--no-progress"])
    failures = out / "failures.jsonl"
    assert status == 0, failures.read_text() if failures.exists() else f"exit {status}"
    used = "ProcessChannel" if mode == "process" else "InProcessChannel"
    assert requests[used] > 0 and set(requests) == {used}, requests
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # each row names where its server ran; a process server was confined where Landlock is
    confined = "process: landlock ABI" if landlock_abi() else "process: unconfined"
    expected = confined if mode == "process" else "inprocess: not isolated"
    servers = {row["server"] for row in rows if row["server"]}  # empty: the cell sent nothing
    assert servers and all(s.startswith(expected) for s in servers), servers
    return {row["key"]: row for row in rows}


def numbers(summary: dict) -> dict[str, float]:
    """A ledger summary with ``"inf"`` (how JSON and a plan write ∞) read as a float."""
    return {k: float(v) for k, v in summary.items()}


def entries(spends: list[dict]) -> list[tuple]:
    """Each ledger entry's label, count and notion."""
    return [(s["label"], s["count"], s["guarantee"]["notion"]) for s in spends]


def assert_ledgers_as_planned(spec: Path, rows: dict[str, dict], registry) -> None:
    """Every cell ran, and its ledger is the planned one (``dpkit budget spec``): the same
    entries, the same ε, finite or ∞, for the same reasons."""
    cells = expand(load_spec(spec, registry=registry), registry)
    assert sorted(rows) == sorted(c.key for c in cells)
    for cell in cells:
        row, plan = rows[cell.key], plan_one(cell, registry)
        assert not plan["refused"], plan["refused"]
        assert row["plan"] == ("equal" if not plan["note"] else "not planned"), row["plan"]
        if not plan["note"]:
            assert entries(row["ledger"]["spends"]) == entries(plan["spends"]), cell.method
        ran, planned = numbers(row["privacy"]), numbers(plan["summary"])
        # the k an anonymity release achieves is the clustering of its secret draw (ObfusLM
        # permutes the vocabulary with the run's noise secret, which a plan has not got): the
        # plan's is another draw's
        for drawn in DRAWN:
            ran.pop(drawn, None)
            planned.pop(drawn, None)
        assert ran == pytest.approx(planned, rel=1e-9), (cell.method, ran, planned)
        assert sorted(row["ledger"]["no_guarantee_reasons"]) == sorted(plan["reasons"])
        assert math.isinf(ran.get("epsilon", 0.0)) == bool(plan["reasons"]), cell.method


def assert_claims_evaluated(spec: Path, out: Path) -> None:
    """Every claim of the spec has a verdict in ``claims.json``, judged on every seed at each of
    its points. Tiny data decides nothing about the papers: any verdict will do, and a claim
    may have no point at all (matched privacy whose ranges do not overlap) if it says why."""
    written = yaml.safe_load(spec.read_text(encoding="utf-8"))
    judged = json.loads((out / "claims.json").read_text())["claims"]
    assert [c["claim"] for c in judged] == [c["name"] for c in written["claims"]]
    for claim in judged:
        assert claim["verdict"] in VERDICTS
        assert claim["points"] or claim["reason"], claim["claim"]
        for point in claim["points"]:
            assert point["seeds"] == written["seeds"], (claim["claim"], point)


def same_results(a: dict, b: dict) -> None:
    """Equal metrics (NaN equal to NaN, timings left out), ledgers and privacy summaries."""
    def comparable(metrics: dict) -> dict:
        return {k: "nan" if isinstance(v, float) and math.isnan(v) else v
                for k, v in metrics.items() if not is_timing(k)}

    assert comparable(a["metrics"]) == comparable(b["metrics"]), a["method"]
    assert a["ledger"] == b["ledger"] and a["privacy"] == b["privacy"], a["method"]


@pytest.mark.parametrize("name", list(SHRINKS))
def test_paper_spec_runs_small_through_the_process_boundary(name, tiny_plugins, tmp_path,
                                                            monkeypatch):
    spec = write_small_spec(SPECS / f"{name}.yaml", SHRINKS[name], tmp_path)
    assert structure(yaml.safe_load(spec.read_text())) == structure(read_yaml(SPECS / f"{name}.yaml"))
    confined = run_mode(spec, tmp_path / "process", "process", monkeypatch)
    assert_ledgers_as_planned(spec, confined, tiny_plugins)
    assert_claims_evaluated(spec, tmp_path / "process")

    (tmp_path / "inprocess").mkdir()  # the same noise secret: the same draws
    shutil.copy(tmp_path / "process" / SECRET_FILE, tmp_path / "inprocess" / SECRET_FILE)
    inprocess = run_mode(spec, tmp_path / "inprocess", "inprocess", monkeypatch)
    assert sorted(inprocess) == sorted(confined)
    for key, row in confined.items():
        same_results(row, inprocess[key])
    verdicts = [[(c["claim"], c["verdict"]) for c in
                 json.loads((tmp_path / mode / "claims.json").read_text())["claims"]]
                for mode in ("process", "inprocess")]
    assert verdicts[0] == verdicts[1]
