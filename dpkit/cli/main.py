"""``dpkit`` entry point: builds the parser from the sub-command modules and maps errors to exits.

Each module in :data:`COMMANDS` defines ``register(subparsers)``, which adds its parser and sets
``func`` (``args -> int`` exit status). Exit statuses: 0 success, 1 failure (e.g. an audit FAIL),
2 bad input (spec, params, arguments), 3 inconclusive audit, 130 interrupted, 141 the reader
of stdout went away (e.g. ``dpkit plugins --json | head``; nothing more is printed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from dpkit.base.errors import DpkitError, ParamsError, SpecError

COMMANDS = ("run", "validate", "plugins", "budget", "audit", "data", "new", "report")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like the rest of dpkit's input errors
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The full ``dpkit`` argument parser."""
    from dpkit import __version__

    parser = _Parser(prog="dpkit", description="Privacy-preserving LM mechanisms, specs and "
                     "privacy accounting.")
    parser.add_argument("--version", action="version", version=f"dpkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"dpkit.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows up here, not at interpreter exit
        return status
    except BrokenPipeError:
        return _reader_gone()
    except (SpecError, ParamsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except DpkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _reader_gone() -> int:
    """The reader of stdout closed it (``dpkit ... | head``): stop quietly, exit 141 like SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python's final flush must not raise again
    return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
