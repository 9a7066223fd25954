"""Claims are checked with the rest of the spec, before any cell runs."""

from __future__ import annotations

import pytest

from dpkit.base.errors import SpecError
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry

SPEC = """
name: t
data: {{name: toy_text, params: {{n_docs: 8}}}}
model: {{name: toy_space}}
defense: {{name: toy_noise, label: Mild, params: {{eta: 4.0}}, sweep: {{eta: [4.0, 8.0]}}}}
baselines:
  - {{name: toy_noise, label: Heavy, params: {{eta: 0.5}}}}
  - {{name: toy_noise, label: Mild-2, params: {{eta: 4.0, sleep: 0.0001}},
     sweep: {{eta: [4.0, 8.0], fail: [false, true]}}}}
seeds: [0, 1, 2]
device: cpu
report: {{x: eta}}
claims:
  - {claim}
"""


def write(tmp_path, claim: str):
    path = tmp_path / "c.yaml"
    path.write_text(SPEC.format(claim=claim))
    return path


def test_a_valid_claim_loads(tmp_path, toy_plugins):
    spec = load_spec(write(tmp_path, "{method: Mild, versus: Mild-2, metric: preserved, "
                                     "direction: greater, where: {fail: false}, points: [8]}"), registry=get_registry())
    assert spec.claims[0].points == [8]


@pytest.mark.parametrize("claim, location, fragment", [
    ("{method: Mlid, versus: Heavy, metric: preserved, direction: greater}", "claims.0.method",
     "'Mlid'"),
    ("{method: Mild, versus: Heavy, metric: preserved, direction: greater}", "claims.0.points",
     "share no value of eta (Mild: 4, 8; Heavy: 0.5)"),
    ("{method: Mild, versus: Mild-2, metric: preserved, direction: greater}", "claims.0.where",
     "add where: {fail: VALUE}"),
    (("{method: Mild, versus: Mild-2, metric: preserved, direction: greater, points: [3], "
      "where: {fail: false}}"),
     "claims.0.points", "no cell at eta=3"),
    ("{method: Mild, versus: Heavy, metric: preserved, direction: up}", "claims.0.direction",
     "greater"),
    ("{method: Mild, versus: Heavy, metric: preserved, direction: less, at: matched}",
     "claims.0", "needs `privacy:`"),
    (("{method: Mild, versus: Mild-2, metric: preserved, direction: greater, points: [8], "
      "where: {fail: false}, paper_effect: {4: 0.1}, paper_source: Table 1}"),
     "claims.0.paper_effect", "names eta = 4, which the claim does not compare (it compares 8)"),
    ("{method: Mild, versus: Heavy, metric: preserved, direction: less, paper_effect: 0.1}",
     "claims.0", "go together"),
])
def test_bad_claims_are_one_line_errors(tmp_path, toy_plugins, claim, location, fragment):
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, claim), registry=get_registry())
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'c.yaml'}: {location} — "), message
    assert fragment in message and "\n" not in message
