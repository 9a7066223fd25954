"""``dpkit audit``: exit statuses 0 / 1 / 3 / 2, one-line verdict, JSON report."""

import json

import pytest

from dpkit.cli.main import main


pytestmark = pytest.mark.usefixtures("audit_test_plugins")


def test_pass_exits_0_with_one_line(capsys):
    code = main(["audit", "ref_laplace", "--params", '{"eta": 2}', "--samples", "600"])
    out = capsys.readouterr()
    assert code == 0
    line = out.out.strip()
    assert line.startswith("PASS: ref_laplace") and "claimed" in line and "measured" in line
    assert "\n" not in line


def test_fail_exits_1_and_names_the_witness(capsys):
    code = main(["audit", "broken_identity_substitution", "--samples", "400", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("FAIL") and "output[0] ∈" in out


def test_inconclusive_exits_3(capsys):
    code = main(["audit", "ref_rr", "--params", '{"epsilon": 30}', "--samples", "200"])
    assert code == 3 and capsys.readouterr().out.startswith("INCONCLUSIVE")


def test_json_report(capsys):
    code = main(["audit", "ref_exponential", "--params", '{"epsilon": 1}', "--samples", "400",
                 "--json", "--confidence", "0.99"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["verdict"] == "PASS" and data["confidence"] == 0.99
    assert data["findings"] and data["params"] == {"epsilon": 1.0}


@pytest.mark.parametrize("argv", [
    ["audit", "ref_laplace", "--params", '{"eta": -1}'],
    ["audit", "ref_laplace", "--params", "not json"],
    ["audit", "ref_lapalce", "--params", '{"eta": 1}'],
    ["audit", "ref_laplace", "--params", '{"eta": 1}', "--confidence", "2"],
])
def test_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1


def test_did_you_mean(capsys):
    main(["audit", "ref_lapalce"])
    assert "ref_laplace" in capsys.readouterr().err


def test_space_from_a_registered_model(capsys):
    """--space loads a registered model that is an EmbeddingSpace and audits on it."""
    code = main(["audit", "ref_exponential", "--params", '{"epsilon": 2}', "--samples", "300",
                 "--space", "audit_generated_space", "--space-params", '{"vocab": 12}', "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert all("w0" in f["pair"] and int(f["pair"].split("'")[1][1:]) < 12
               for f in data["findings"])


@pytest.mark.slow
def test_space_from_a_split_model(capsys):
    """--space on a split model uses its as_space() (the tiny seeded encoder's vocabulary)."""
    code = main(["audit", "ref_exponential", "--params", '{"epsilon": 5}', "--samples", "300",
                 "--space", "tiny-encoder"])
    out = capsys.readouterr().out
    assert code in (0, 3) and "ref_exponential" in out
