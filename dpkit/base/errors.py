"""Exceptions raised by dpkit.

Hierarchy::

    DpkitError                      base of everything dpkit raises on purpose
    ├── SpecError                   a spec file is unreadable or invalid (CLI exit 2)
    ├── ComponentNotFoundError      a name is not registered (did-you-mean; also a KeyError)
    ├── PluginError                 a plug-in failed to load or registered something invalid
    ├── ParamsError                 a component's params failed validation
    ├── AccountingError             a guarantee cannot be composed or queried as asked
    │   └── BudgetExceededError     a spend would exceed the ledger's ceiling or a dataset's cap
    ├── BudgetStoreError            the budget store cannot be opened, read or written (CLI exit 2)
    ├── DataSourceError             an artifact is missing, offline, or fails its hash
    ├── OutputLockedError           another ``dpkit run`` holds the output folder (CLI exit 2)
    ├── ServerError                 a cell's server (its own process) raised; carries its traceback
    └── AuditError                  an audit cannot be run for this mechanism

Messages follow one pattern: what failed, the offending value, and what to do next.
"""

from __future__ import annotations


class DpkitError(Exception):
    """Base class for every error dpkit raises deliberately."""


class SpecError(DpkitError):
    """A spec is invalid; ``location`` is a dotted path inside the file, or empty."""

    def __init__(self, path: str, location: str, message: str):
        self.path, self.location, self.message = str(path), location, message
        where = f"{self.path}: {location} — " if location else f"{self.path}: "
        super().__init__(f"{where}{message}")


class ComponentNotFoundError(DpkitError, KeyError):
    """A component name is not registered under the requested kind."""

    def __init__(self, kind: str, name: str, suggestions: list[str], available: list[str]):
        self.kind, self.name, self.suggestions, self.available = kind, name, suggestions, available
        hint = f"did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else (
            f"registered {kind}s: {', '.join(available) or '(none)'}"
        )
        super().__init__(f"unknown {kind} {name!r}; {hint}")

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return self.args[0]


class PluginError(DpkitError):
    """A plug-in could not be loaded or registered an invalid component."""


class ParamsError(DpkitError):
    """A component's params failed validation."""


class AccountingError(DpkitError):
    """A guarantee cannot be composed or queried as asked."""


class BudgetExceededError(AccountingError):
    """A spend would exceed the ledger's ceiling; nothing was recorded."""


class DataSourceError(DpkitError):
    """An artifact could not be fetched, verified or read."""


class AuditError(DpkitError):
    """An audit cannot be run for this mechanism and these params."""


class OutputLockedError(DpkitError):
    """Another ``dpkit run`` holds the output folder; the message names its pid and host."""


class BudgetStoreError(DpkitError):
    """The persistent budget store cannot be opened, read or written (never reset silently)."""


class ServerError(DpkitError):
    """The server side of a cell failed (raised in its own process); carries its traceback."""

    def __init__(self, kind: str, message: str, remote_traceback: str = ""):
        super().__init__(f"the server raised {kind}: {message}")
        self.kind, self.message, self.remote_traceback = kind, message, remote_traceback

    def __reduce__(self):
        """Pickled with its own arguments (a Ray cell's failure reaches the driver this way)."""
        return type(self), (self.kind, self.message, self.remote_traceback)
