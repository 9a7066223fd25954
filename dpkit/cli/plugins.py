"""``dpkit plugins``: installed plug-ins, their versions, components and errors."""

from __future__ import annotations

import json


def register(sub) -> None:
    """Add the ``plugins`` sub-command."""
    p = sub.add_parser("plugins", help="list plug-ins and the components they register")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=_plugins)


def plugin_table() -> list[dict]:
    """One record per plug-in: name, module, version, components by kind, errors."""
    from dpkit.contract.plugins import get_plugin_system

    system = get_plugin_system()
    registry = system.registry
    out = []
    for name, info in sorted(system.info.items()):
        components = {kind: sorted(e.name for e in entries.values() if e.plugin == name)
                      for kind, entries in registry.entries.items()}
        audits = sorted(a.defense for a in registry.audits.values() if a.plugin == name)
        if audits:
            components["defense audit"] = audits
        out.append({"name": name, "module": info.module, "version": info.version,
                    "distribution": info.distribution,
                    "components": {k: v for k, v in components.items() if v},
                    "errors": list(info.errors)})
    return out


def _plugins(args) -> int:
    from tabulate import tabulate

    table = plugin_table()
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    rows = []
    for p in table:
        comps = "; ".join(f"{k}s: {', '.join(v)}" for k, v in p["components"].items()) or "-"
        status = "BROKEN: " + " | ".join(p["errors"]) if p["errors"] else "ok"
        rows.append([p["name"], p["version"] or "-", comps, status])
    print(tabulate(rows, headers=["plug-in", "version", "components", "status"],
                   tablefmt="simple", maxcolwidths=[None, None, 70, 50]))
    return 0
