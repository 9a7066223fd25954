"""``dpkit new plugin NAME --kind KIND``: write a ready plug-in package of one component kind.

Each kind's template (``dpkit/cli/templates/<kind>/``, over ``templates/common/``) is a working,
installable, tested component: a mechanism (k-ary randomized response, audited, with a planted
bug its audit catches), a defense (client and server parts, a declared release, a noiseless row,
a canary audit and planted bugs), an attack, or a dataset. Every template registers its
component by reference and imports only ``dpkit`` and ``dpkit.testing``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from string import Template

from dpkit.base.errors import ParamsError

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class KindTemplate:
    """What one kind's template declares: its module, hook and one-line summary."""

    module: str
    hook: str
    summary: str


KINDS: dict[str, KindTemplate] = {
    "mechanism": KindTemplate("mechanism", "dpkit_register_mechanisms",
                           "k-ary randomized response over the vocabulary, pure ε-DP per token"),
    "defense": KindTemplate("defense", "dpkit_register_defenses",
                         "noisy class sums up, class centroids down, (ε, δ)-DP per document"),
    "attack": KindTemplate("attack", "dpkit_register_attacks",
                        "nearest-word inversion of noisy token embeddings"),
    "dataset": KindTemplate("dataset", "dpkit_register_datasets",
                         "a generated two-topic labelled text corpus"),
}
"""Component kind -> its template."""


def names(name: str, kind: str = "mechanism") -> dict[str, str]:
    """Distribution, package, entry-point/component and class names derived from ``name``, and
    the template values of ``kind``."""
    if not _NAME.match(name):
        raise ParamsError(f"plug-in name {name!r} must be lower-case letters and digits, words "
                          "joined by - or _, starting with a letter (e.g. my-mechanism)")
    if kind not in KINDS:
        raise ParamsError(f"unknown --kind {kind!r}; choose one of {', '.join(KINDS)}")
    snake = name.replace("-", "_")
    bare = snake.removeprefix("dpkit_") or snake
    template = KINDS[kind]
    return {"dist": f"dpkit-{bare.replace('_', '-')}", "package": f"dpkit_{bare}", "snake": bare,
            "cls": "".join(part.capitalize() for part in bare.split("_")),
            "title": bare.replace("_", " ").capitalize(), "kind": kind,
            "module": template.module, "hook": template.hook, "summary": template.summary}


def template_files(kind: str) -> dict[str, Path]:
    """Relative output path (with placeholders) -> template file, the kind's over the common."""
    files = {}
    for folder in (TEMPLATES / "common", TEMPLATES / kind):
        for path in sorted(folder.rglob("*.tmpl")):
            relative = str(path.relative_to(folder)).removesuffix(".tmpl")
            files[".gitignore" if relative == "gitignore" else relative] = path
    return files


def write_plugin(name: str, parent: Path | None = None, *, into: Path | None = None,
                 kind: str = "mechanism") -> Path:
    """Write the package for plug-in ``name`` (one ``kind`` component) into the folder ``into``
    (new or empty), else into ``parent``/dpkit-NAME; returns the folder."""
    values = names(name, kind)
    root = Path(into) if into is not None else Path(parent or ".") / values["dist"]
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ParamsError(f"{root} already exists and is not an empty folder; pick another name "
                          "or --dir, or remove it")
    for relative, template in template_files(kind).items():
        path = root / Template(relative).substitute(values)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = Template(template.read_text(encoding="utf-8")).substitute(values)
        path.write_text(text, encoding="utf-8")
    readme = TEMPLATES / "README.md.tmpl"
    (root / "README.md").write_text(Template(readme.read_text(encoding="utf-8")).substitute(
        values, usage=USAGE[kind].format(**values)), encoding="utf-8")
    return root


USAGE = {
    "mechanism": "dpkit audit {snake} --params '{{\"epsilon\": 2}}'\n",
    "defense": "dpkit audit --defense {snake} --params '{{\"noise_multiplier\": 2}}'\n",
    "attack": "",
    "dataset": "dpkit data info {snake}\n",
}
"""The kind's own command in the README (after install, plugins and pytest)."""


def register(sub) -> None:
    """Add the ``new`` sub-command (``dpkit new plugin NAME --kind KIND``)."""
    p = sub.add_parser("new", help="write a new plug-in package from a template")
    kinds = p.add_subparsers(dest="what", metavar="WHAT")
    kinds.required = True
    plugin = kinds.add_parser("plugin", help="a plug-in package: entry point, one component, its "
                              "tests, README and .gitignore")
    plugin.add_argument("name", help="plug-in name, e.g. my-mechanism (package dpkit_my_mechanism)")
    plugin.add_argument("--kind", choices=list(KINDS), default="mechanism",
                        help="the component the package holds (default: mechanism)")
    plugin.add_argument("--dir", help="the package's folder, written as told (new or empty; "
                        "default: ./dpkit-NAME)")
    plugin.set_defaults(func=_new_plugin)


def _new_plugin(args) -> int:
    root = write_plugin(args.name, into=Path(args.dir) if args.dir else None, kind=args.kind)
    values = names(args.name, args.kind)
    print(f"wrote {root}/ ({args.kind} {values['snake']!r} in "
          f"{values['package']}/{values['module']}.py)\n"
          f"next: cd {root} && pip install -e . && dpkit plugins && python -m pytest")
    return 0
