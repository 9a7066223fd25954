"""``dpkit new plugin NAME``: write a ready plug-in package (entry point, mechanism, tests)."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from dpkit.base.errors import ParamsError

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "$title: a dpkit plug-in (k-ary randomized response over the vocabulary)"
requires-python = ">=3.10"
dependencies = ["dpkit"]

# The whole plug-in boundary: one entry point in group "dpkit", naming the module with the hooks.
[project.entry-points.dpkit]
$snake = "$package"

[tool.setuptools]
packages = ["$package"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

MODULE = '''\
"""$title: k-ary randomized response over the vocabulary, pure ε-DP per token.

Replace the mechanism with your own; keep ``name``, ``domain``, ``Params``, ``guarantee`` and
``privatize``. See dpkit's docs/plugins.md for the whole contract.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

import dpkit
from dpkit.accounting import DpGuarantee


class $cls:
    """Keep the token with probability e^ε / (e^ε + V − 1), else output one of the V − 1 others
    uniformly: any two tokens give output probabilities within a factor e^ε (ε-DP, replace-one)."""

    name = "$snake"
    domain = "token"

    class Params(dpkit.Params):
        """ε of one token release."""

        epsilon: float = Field(2.0, gt=0, le=50, description="ε of one token (pure ε-DP)")

    def __init__(self, params: Params):
        self.params = params

    def guarantee(self, space: dpkit.EmbeddingSpace | None = None) -> DpGuarantee:
        """Pure ε-DP per token, stated for replacing one token (space may be None)."""
        return DpGuarantee.pure(self.params.epsilon, "$snake: randomized response per token",
                                neighboring="replace_one")

    def keep_probability(self, vocab: int) -> float:
        """P[output = input] = 1 / (1 + (V − 1)·e^{−ε})."""
        return 1.0 / (1.0 + (vocab - 1) * math.exp(-self.params.epsilon))

    def output_log_probs(self, ids: torch.Tensor, space: dpkit.EmbeddingSpace) -> torch.Tensor:
        """Exact ``[n, V]`` output log-probabilities (the auditor checks draws against them)."""
        keep = self.keep_probability(space.size)
        other = math.log((1 - keep) / (space.size - 1))
        out = torch.full((len(ids), space.size), other, dtype=torch.float64, device=ids.device)
        return out.scatter(1, ids.long().reshape(-1, 1), math.log(keep))

    def privatize(self, x: torch.Tensor, *, space: dpkit.EmbeddingSpace,
                  generator: torch.Generator) -> torch.Tensor:
        """Token ids of any shape; id −1 (an unknown word under ``oov: keep``) passes through."""
        vocab = space.size
        coin = torch.rand(x.shape, generator=generator, device=x.device)
        shift = 1 + torch.randint(vocab - 1, x.shape, generator=generator, device=x.device)
        out = torch.where(coin < self.keep_probability(vocab), x, (x + shift) % vocab)
        return torch.where(x < 0, x, out)


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register this package's mechanisms."""
    register($cls)
'''

TESTS = '''\
"""$title: dpkit's contract suite plus the mechanism's own checks."""

from __future__ import annotations

import math

import torch

from dpkit.accounting import Ledger
from dpkit.audit import make_test_space
from dpkit.testing import MechanismContract

from $package import $cls


class Test${cls}Contract(MechanismContract):
    """Guarantee declared, params validated, seeded, batch-invariant, audited (no FAIL, no
    LAW_MISMATCH)."""

    mechanism = "$snake"
    params = {"epsilon": 2.0}
    invalid_params = [{"epsilon": 0}, {"epsilon": -1.0}, {"eps": 2.0}]


def make(epsilon: float = 2.0) -> $cls:
    return $cls($cls.Params(epsilon=epsilon))


def test_output_law_is_normalised_and_epsilon_dp():
    space = make_test_space()
    log_probs = make(1.5).output_log_probs(torch.arange(space.size), space)
    assert torch.allclose(log_probs.exp().sum(1), torch.ones(space.size, dtype=torch.float64))
    worst = (log_probs.unsqueeze(1) - log_probs.unsqueeze(0)).max()
    assert math.isclose(float(worst), 1.5, rel_tol=1e-9)


def test_unknown_words_pass_through():
    space = make_test_space()
    x = torch.tensor([-1, 0, 5, -1])
    y = make().privatize(x, space=space, generator=torch.Generator().manual_seed(0))
    assert y[0] == -1 and y[3] == -1 and bool(((y[1:3] >= 0) & (y[1:3] < space.size)).all())


def test_ledger_charges_at_most_n_epsilon():
    ledger = Ledger(neighboring="replace_one", accountant="pld")
    ledger.spend(make(1.0).guarantee(), "tokens", count=10)
    assert 9.0 < ledger.epsilon() <= 10.0 + 1e-3
'''

README = """\
# $dist

A dpkit plug-in: `$snake`, k-ary randomized response over the vocabulary, declared as pure
ε-DP per token (`DpGuarantee.pure(ε, neighboring="replace_one")`).

```console
pip install -e .
dpkit plugins                    # lists "$snake" under this package
python -m pytest                 # dpkit's contract suite + the mechanism's own tests
dpkit audit $snake --params '{"epsilon": 2}'
```

Its ε is stated for replacing one token, so a spec that uses it sets
`privacy: {neighboring: replace_one}` (an `add_remove` ledger refuses the spend and says so).
Replace `$package/__init__.py` with your mechanism; dpkit's `docs/plugins.md` lists the contract.
"""

GITIGNORE = """\
__pycache__/
*.py[cod]
*.egg-info/
build/
dist/
.pytest_cache/
.venv/
results/
"""


def names(name: str) -> dict[str, str]:
    """Distribution, package, entry-point/mechanism and class names derived from ``name``."""
    if not _NAME.match(name):
        raise ParamsError(f"plug-in name {name!r} must be lower-case letters and digits, words "
                          "joined by - or _, starting with a letter (e.g. my-mechanism)")
    snake = name.replace("-", "_")
    bare = snake.removeprefix("dpkit_") or snake
    return {"dist": f"dpkit-{bare.replace('_', '-')}", "package": f"dpkit_{bare}", "snake": bare,
            "cls": "".join(part.capitalize() for part in bare.split("_")),
            "title": bare.replace("_", " ").capitalize()}


def write_plugin(name: str, parent: Path | None = None, *, into: Path | None = None) -> Path:
    """Write the package for plug-in ``name`` into the folder ``into`` (new or empty), else into
    ``parent``/dpkit-NAME; returns the folder."""
    values = names(name)
    root = Path(into) if into is not None else Path(parent or ".") / values["dist"]
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ParamsError(f"{root} already exists and is not an empty folder; pick another name "
                          "or --dir, or remove it")
    files = {"pyproject.toml": PYPROJECT, "README.md": README, ".gitignore": GITIGNORE,
             f"{values['package']}/__init__.py": MODULE,
             f"tests/test_{values['snake']}.py": TESTS}
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template).substitute(values), encoding="utf-8")
    return root


def register(sub) -> None:
    """Add the ``new`` sub-command (``dpkit new plugin NAME``)."""
    p = sub.add_parser("new", help="write a new plug-in package from the template")
    kinds = p.add_subparsers(dest="what", metavar="WHAT")
    kinds.required = True
    plugin = kinds.add_parser("plugin", help="a plug-in package: entry point, one mechanism, its "
                              "contract tests, README and .gitignore")
    plugin.add_argument("name", help="plug-in name, e.g. my-mechanism (package dpkit_my_mechanism)")
    plugin.add_argument("--dir", help="the package's folder, written as told (new or empty; "
                        "default: ./dpkit-NAME)")
    plugin.set_defaults(func=_new_plugin)


def _new_plugin(args) -> int:
    root = write_plugin(args.name, into=Path(args.dir) if args.dir else None)
    values = names(args.name)
    print(f"wrote {root}/ (mechanism {values['snake']!r} in {values['package']}/__init__.py)\n"
          f"next: cd {root} && pip install -e . && dpkit plugins && python -m pytest")
    return 0
