"""Confinement of a server process: it reads code and public inputs only, never the client.

A process is not a boundary by itself: a child running as the client's user can read the client's
memory (``/proc/<pid>/mem``) and every file that user can, the run's noise secret included. On
Linux, dpkit closes both routes:

* the client's process is made non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): no other process
  without ``CAP_SYS_PTRACE`` can read its memory, its open files or its environment;
* each server process drops every capability (so a root server gets no ``CAP_SYS_PTRACE``) and
  sets ``no_new_privs``; then, before any plug-in code runs in it (the loaders of its public
  model and datasets included), it restricts itself with Landlock. It may **write** only to
  ``/dev/null`` and its kind and a GPU's device files (not ``/dev/shm``), in the tool caches,
  its own temp folder and the server-artifact folder, so it cannot replace the run's noise secret
  or touch the client's artifacts or the budget store. It may **read** those, the Python
  installation, the imported packages' folders, ``sys.path`` (less any folder holding the working
  directory, the home, dpkit's caches or the temp root), the system folders (``/usr``, ``/etc``,
  ``/proc``, ``/sys`` …), converted models, the fetched artifacts other than the cell's private
  corpus, the caches of CUDA, Triton, torch and Hugging Face's models, and the files the spec's
  public components name. It may make **no TCP connection** and, from Landlock ABI 6 on, reach
  no abstract Unix socket and signal no process outside itself. The run's output folder (results
  and noise secret), the client's artifacts, values computed from private data (``shared``), the
  budget store and ``/tmp`` stay out of its reach;
* then a seccomp filter (:mod:`dpkit.boundary.seccomp`) refuses it any new socket, which Landlock
  would not (a named Unix socket: Ray's, PostgreSQL's, D-Bus'; UDP).

Without Landlock (an older kernel, another OS) the server still runs, unconfined, and
:func:`confine_server` says why; without seccomp (another architecture) it runs with Landlock
only, and says so. ``DPKIT_SERVER_CONFINE=off`` turns both measures off (debugging
a server with a debugger or ``py-spy``); ``require`` refuses to start an unconfined server.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import site
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dpkit.boundary.seccomp import forbid_new_sockets

VARIABLE = "DPKIT_SERVER_CONFINE"
MODES = ("auto", "off", "require")
SYSTEM_FOLDERS = ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys",
                  "/run/nvidia-persistenced")
DEVICE_FILES = ("null", "zero", "full", "random", "urandom")
GPU_DEVICES = ("nvidia", "dri", "kfd")
TOOL_CACHES = (".nv", ".triton", ".cache/torch", ".cache/huggingface/hub")
"""Caches of CUDA's JIT, Triton, torch and Hugging Face's models under the home folder (public
code and weights; not Hugging Face's datasets), and the variables that move them."""
TOOL_CACHE_VARIABLES = {"HF_HOME": "hub", "HF_HUB_CACHE": "", "TORCH_HOME": "",
                        "TRITON_CACHE_DIR": "", "CUDA_CACHE_PATH": ""}

_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 4, 38, 24
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_RULE_PATH_BENEATH, _VERSION = 1, 1
_WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 1, 1 << 2, 1 << 3
_MAKE_AND_REMOVE = sum(1 << bit for bit in range(4, 13))  # remove dir/file, make char … symlink
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def confine_mode() -> str:
    """``auto`` (default), ``off`` or ``require``, from ``$DPKIT_SERVER_CONFINE``."""
    mode = os.environ.get(VARIABLE, "auto")
    if mode not in MODES:
        raise ValueError(f"{VARIABLE} must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)  # runs ldconfig


def shield_client() -> bool:
    """Make this (the client's) process non-dumpable; True when done."""
    libc = _libc()
    if libc is None or confine_mode() == "off":
        return False
    return libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    libc = _libc()
    if libc is None:
        return 0
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(int(version), 0)


def device_files() -> set[Path]:
    """The device files a server may use: ``/dev/null`` and its kind, and a GPU's (NVIDIA's,
    DRM's, ROCm's). Not ``/dev/shm``, where another process's shared memory may be named."""
    dev = Path("/dev")
    try:
        gpu = {entry for entry in dev.iterdir() if entry.name.startswith(GPU_DEVICES)}
    except OSError:
        gpu = set()
    return {dev / name for name in DEVICE_FILES} | gpu


def writable_roots(extra: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """The folders and files a server may write (and read): :func:`device_files`, the tool
    caches, and ``extra`` (its temp folder, the server-artifact folder). Not the output folder,
    whose noise secret a server could otherwise replace with one it knows, nor dpkit's caches or
    the budget store."""
    roots = {*device_files(), *(Path.home() / name for name in TOOL_CACHES)}
    roots |= {Path(os.environ[v]) / sub for v, sub in TOOL_CACHE_VARIABLES.items()
              if os.environ.get(v)}
    return _outermost({*roots, *map(Path, extra)})


def model_and_artifact_caches(private: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """dpkit's caches a server may read: converted models, and each fetched artifact's folder
    except ``private`` ones (the cell's private corpus). Not ``shared`` (values computed from
    private data live there too), ``artifacts`` (the client's), ``budget`` or ``locks``."""
    from dpkit.base.cache import cache_root

    root = cache_root()
    hidden = {os.path.normpath(p) for p in private}
    entries = [*_children(root / "sources"), *(e for folder in _children(root / "downloads")
                                               for e in _children(folder))]
    return [root / "converted", *(e for e in entries if os.path.normpath(e) not in hidden)]


def _children(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _outermost(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """The existing ``roots`` that lie in no other (a rule for a folder covers what it holds)."""
    kept: list[str] = []  # sorted by parts, a folder's contents follow it
    for path in sorted({os.path.normpath(p) for p in roots}, key=lambda p: p.split(os.sep)):
        if not (kept and (path == kept[-1] or path.startswith(kept[-1].rstrip(os.sep) + os.sep))):
            kept.append(path)
    return [Path(p) for p in kept if os.path.exists(p)]  # what lies in a missing folder is missing


def readable_roots(extra: Iterable[str | os.PathLike] = ()) -> list[Path]:
    """The folders and files a server may read, besides :func:`writable_roots` (see the module
    docstring)."""
    roots = {str(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots |= set(sysconfig.get_paths().values())
    roots |= {*site.getsitepackages(), site.getusersitepackages(), *SYSTEM_FOLDERS}
    for name, module in list(sys.modules.items()):  # the imported packages' own folders
        roots.update(_module_roots(name, module))
    roots |= {p for p in sys.path if p and not _too_broad(Path(p).resolve())}
    roots |= {str(p) for p in extra}
    return _outermost(roots | {str(p) for p in installed_package_folders()})


_MODULE_ROOTS: dict[str, tuple[Any, tuple[str, ...]]] = {}
"""A module's folders or file by its name, kept with the module they were read from: computed
once per process for thousands of modules (a server inherits the fork server's)."""


def _module_roots(name: str, module: Any) -> tuple[str, ...]:
    known = _MODULE_ROOTS.get(name)
    if known is not None and known[0] is module:
        return known[1]
    folders = getattr(module, "__path__", None)
    if isinstance(folders, Iterable) and not isinstance(folders, (str, bytes)):
        roots = tuple(folder for folder in folders if isinstance(folder, str))
        if not isinstance(folders, list):  # a namespace package's path follows sys.path
            return roots
    elif isinstance(file := getattr(module, "__file__", None), str):
        roots = (file,)
    else:
        roots = ()
    _MODULE_ROOTS[name] = (module, roots)
    return roots


def installed_package_folders() -> set[Path]:
    """The folders of the packages installed in editable mode (this project's plug-ins among
    them), which are found through a finder's mapping rather than ``sys.path``."""
    folders: set[Path] = set()
    for name, module in list(sys.modules.items()):
        mapping = getattr(module, "MAPPING", None)
        if name.startswith("__editable__") and isinstance(mapping, dict):
            folders |= {Path(folder) for folder in mapping.values() if isinstance(folder, str)}
    return folders


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails harmlessly past the last capability
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _landlock(libc: ctypes.CDLL, abi: int, readable: list[Path], writable: list[Path]) -> None:
    write = (_WRITE_FILE | _MAKE_AND_REMOVE | (_REFER if abi >= 2 else 0)
             | (_TRUNCATE if abi >= 3 else 0))
    attr = _RulesetAttr(_READ_FILE | _READ_DIR | write,
                        _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        file_rights = _READ_FILE | _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
        rules = [(root, _READ_FILE | _READ_DIR) for root in readable]
        rules += [(root, _READ_FILE | _READ_DIR | write) for root in writable]
        for root, rights in rules:
            fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(rights if root.is_dir() else rights & file_rights, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {root}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def confine_server(readable: Iterable[str | os.PathLike] = (),
                   writable: Iterable[str | os.PathLike] = (), mode: str | None = None,
                   private: Iterable[str | os.PathLike] = ()) -> str:
    """Confine this (a server's) process; returns how (``landlock ABI n; seccomp: no new
    sockets``) or why not.
    ``readable`` and ``writable`` add to :func:`readable_roots` and :func:`writable_roots`,
    ``private`` are cache folders to keep out (:func:`model_and_artifact_caches`); ``mode`` is
    the client's :func:`confine_mode` (default: this process's)."""
    mode = mode or confine_mode()
    if mode == "off":
        return f"unconfined: {VARIABLE}=off"
    libc = _libc()
    abi = landlock_abi()
    if libc is None or abi == 0:
        reason = f"unconfined: no Landlock on this system ({sys.platform})"
        if mode == "require":
            raise RuntimeError(f"{reason}, and {VARIABLE}=require; use a Linux kernel ≥ 5.13 "
                               "with Landlock enabled, or set it to auto")
        return reason
    _drop_capabilities(libc)
    caches = model_and_artifact_caches(private)
    _landlock(libc, abi, readable_roots([*readable, *caches]), writable_roots(writable))
    try:  # no_new_privs is set: the filter needs it
        sockets = forbid_new_sockets(libc)
    except OSError as exc:
        if mode == "require":
            raise RuntimeError(f"no seccomp filter ({exc}), and {VARIABLE}=require; use a Linux "
                               "kernel with seccomp filters on x86_64 or aarch64, or set it to "
                               "auto") from exc
        sockets = f"no seccomp: {exc}"
    return f"landlock ABI {abi}; {sockets}"


def _too_broad(path: Path) -> bool:
    """A folder holding the working directory, the home, dpkit's caches or the temp root."""
    import tempfile

    from dpkit.base.cache import cache_root

    guarded = [Path.cwd(), Path.home(), cache_root(), Path(tempfile.gettempdir())]
    return path.is_dir() and any(g.resolve().is_relative_to(path) for g in guarded)


def public_paths(*params: object) -> list[str]:
    """Existing files and folders named by string values in ``params`` (the spec's model and the
    approved public datasets: a local model folder, a local public corpus), for the server's
    readable roots; never a folder that holds the working directory, the home, dpkit's caches or
    the temp root, nor a dpkit secret."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif isinstance(value, (str, os.PathLike)) and 0 < len(str(value)) < 4096:
            try:
                path = Path(value).expanduser().resolve()
                if path.exists() and not path.name.startswith(".dpkit") and not _too_broad(path):
                    found.append(str(path))
            except OSError:
                pass

    for value in params:
        walk(value)
    return found
