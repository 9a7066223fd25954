"""What a confined server may read (code, system folders, public inputs) and write (public caches)
— never the client's places (output folder, artifacts, budget store, the shared temp folder)."""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from dpkit.boundary import seccomp
from dpkit.testing.shared_memory import make_segment, remove_segment
from dpkit.boundary.confine import (_outermost, confine_mode, landlock_abi,
                                    model_and_artifact_caches, public_paths, readable_roots,
                                    writable_roots)


def _reaches(roots: list[Path], place: Path) -> bool:
    return any(place.resolve().is_relative_to(root.resolve()) for root in roots)


def test_the_client_places_are_outside_every_readable_root(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DPKIT_CACHE", str(cache))
    for name in ("sources/public-corpus", "sources/private-corpus", "downloads/pypi/pkg==1",
                 "converted", "shared/hiddenecho_tokens", "artifacts", "budget", "locks"):
        (cache / name).mkdir(parents=True)
    out = tmp_path / "runs" / "spec"
    out.mkdir(parents=True)
    writable = writable_roots()
    roots = [*readable_roots(), *writable,
             *model_and_artifact_caches([cache / "sources" / "private-corpus"])]
    for public in ("sources/public-corpus", "downloads/pypi/pkg==1", "converted"):
        assert _reaches(roots, cache / public), public
    assert _reaches(roots, Path(__import__("dpkit").__file__))
    assert not _reaches(writable, Path(__import__("dpkit").__file__))
    assert not _reaches(writable, cache / "converted")
    for private in ("sources/private-corpus", "shared/hiddenecho_tokens", "artifacts", "budget",
                    "locks"):
        assert not _reaches(roots, cache / private), private
    assert not _reaches(roots, out) and not _reaches(roots, Path("/tmp"))


def test_public_paths_keep_named_files_but_no_folder_above_the_client_nor_a_secret(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    corpus = tmp_path / "public.csv"
    corpus.write_text("text\nhello\n")
    secret = tmp_path / ".dpkit-noise-secret"
    secret.write_text("x")
    found = public_paths({"path": str(model), "files": [str(corpus), str(secret)]},
                         [{"root": "/"}, {"here": "."}, {"home": str(Path.home())},
                          {"temp": tempfile.gettempdir()}, {"word": "mean"}, None, 3])
    assert found == [str(model.resolve()), str(corpus.resolve())]


def test_an_unknown_confinement_mode_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "strict")
    with pytest.raises(ValueError, match="DPKIT_SERVER_CONFINE must be one of auto, off, require"):
        confine_mode()


def test_the_cells_private_corpus_is_named_by_its_artifacts_cache_folders(tmp_path, monkeypatch):
    from dpkit.boundary.session import private_cache_paths
    from dpkit.contract.plugins import get_registry

    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    registry = get_registry()
    ctx = SimpleNamespace(registry=registry, dataset_ref={"name": "rotten_tomatoes", "params": {}})
    artifact = registry.build("dataset", "rotten_tomatoes", {}).artifact
    assert private_cache_paths(ctx) == [str(tmp_path / "sources" / artifact.key),
                                        str(tmp_path / "downloads" / "pypi" /
                                            f"{artifact.package}=={artifact.version}")]
    assert private_cache_paths(SimpleNamespace(registry=registry, dataset_ref=None)) == []


def _kernel_landlock_abi() -> int:
    """The kernel's own answer (landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)


def test_the_landlock_abi_is_the_kernels():
    assert landlock_abi() == _kernel_landlock_abi()


landlock_only = pytest.mark.skipif(_kernel_landlock_abi() == 0,
                                   reason="server confinement needs Linux with Landlock")


def _python(code_or_script: list[str], cwd: Path | None = None, extra_path: str = "",
            **env: str) -> str:
    """Run a fresh Python on this process's module path (a mutant reaches it too)."""
    environ = {k: v for k, v in os.environ.items() if k != "DPKIT_SERVER_CONFINE"}
    paths = [*(p for p in sys.path if p), *([extra_path] if extra_path else [])]
    environ.update(PYTHONPATH=os.pathsep.join(paths), **env)
    done = subprocess.run([sys.executable, *code_or_script], env=environ, capture_output=True,
                          text=True, timeout=60, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
@pytest.mark.parametrize("mode, shielded", [("auto", "True 0"), ("require", "True 0"),
                                            ("off", "False 1")])
def test_the_client_is_made_non_dumpable_unless_confinement_is_off(mode, shielded):
    code = ("import ctypes; from dpkit.boundary.confine import shield_client; done = "
            "shield_client(); print(done, ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")
    assert _python(["-c", code], DPKIT_SERVER_CONFINE=mode).split() == shielded.split()


def _confined_tries(tmp_path: Path, mode: str | None) -> tuple[dict, dict]:
    """Confine a fresh process as a server; what it could read, write, reach; the places."""
    cache = tmp_path / "cache"
    places = {name: cache / name / "file" for name in (
        "sources/public-corpus", "sources/private-corpus", "downloads/pypi/public==1",
        "downloads/pypi/private==1", "converted", "shared/values", "artifacts", "budget")}
    places |= {"public": tmp_path / "public" / "corpus.txt", "scratch": tmp_path / "scratch" / "f",
               "client": tmp_path / "client" / "f", "loose module": tmp_path / "loose" / "mod.py",
               "loose sibling": tmp_path / "loose" / "sibling.txt",
               "writable file": tmp_path / "alone" / "file.txt",
               "scratch a": tmp_path / "scratch" / "a" / "f", "scratch b": tmp_path / "scratch" / "b" / "f",
               "cwd": tmp_path / "cwd" / "f", "here package": tmp_path / "cwd" / "herepkg" / "__init__.py",
               "here later": tmp_path / "cwd" / "herepkg" / "later.py"}
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
    shared_memory = Path("/dev/shm") / f"dpkit-confine-test-{os.getpid()}"  # a client's file there
    if shared_memory.parent.is_dir():
        shared_memory.write_text("x = 1\n")
        places["dev shm"] = shared_memory
    private = [cache / "sources/private-corpus", cache / "downloads/pypi/private==1"]
    try:
        segment = make_segment(b"the client's private bytes")  # System V: listed in /proc/sysvipc
    except OSError as exc:
        pytest.skip(f"no System V shared memory here ({exc})")
    with socket.socket() as tcp, socket.socket(socket.AF_UNIX) as unix, \
            socket.socket(socket.AF_UNIX) as named, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        name = f"dpkit-confine-test-{os.getpid()}"
        unix.bind("\0" + name)
        unix.listen()
        named.bind(str(tmp_path / "client" / "socket"))  # a socket file, as Ray's or PostgreSQL's
        named.listen()
        udp.bind(("127.0.0.1", 0))
        editable = _an_editable_package_folder()
        spec = {"readable": [str(places["public"])],
                "writable": [str(tmp_path / "scratch"), str(places["writable file"])],
                "loose": str(places["loose module"]),
                "private": [str(p) for p in private], "mode": mode,
                "read": {**{k: str(p) for k, p in places.items()},
                         "dpkit": __import__("dpkit.boundary.confine").__file__,
                         **({"editable": str(editable / "__init__.py")} if editable else {})},
                "list": {"scratch": str(tmp_path / "scratch"), "client": str(tmp_path / "client")},
                "write": {"scratch": str(tmp_path / "scratch" / "new"),
                          "scratch file": str(places["scratch"]), "dev": "/dev/null",
                          "dev shm": f"/dev/shm/dpkit-confine-test-new-{os.getpid()}",
                          "public": str(places["public"]), "client": str(places["client"]),
                          "converted": str(cache / "converted" / "new"),
                          "client new": str(tmp_path / "client" / "new"),
                          "writable file": str(places["writable file"])},
                "truncate": {k: str(places[k]) for k in ("client", "public", "scratch",
                                                         "writable file")},
                "move": {"within scratch": [str(places["scratch a"]), str(places["scratch b"])],
                         "out of public": [str(places["public"]), str(tmp_path / "scratch" / "p")]},
                "preimport": ["herepkg"], "import": ["colorsys", "dpkit.base.errors", "herepkg.later"],
                "tcp_port": tcp.getsockname()[1], "abstract": name, "client": os.getpid(),
                "unix": named.getsockname(), "udp_port": udp.getsockname()[1], "shm": segment}
        # on the path, tmp_path and cwd hold the working directory: not roots, but the package
        # imported from there is (its own folder)
        try:
            out = _python([str(Path(__file__).with_name("confined_probe.py")), json.dumps(spec)],
                          cwd=tmp_path / "cwd", DPKIT_CACHE=str(cache),
                          extra_path=os.pathsep.join([str(tmp_path), str(tmp_path / "cwd")]))
        finally:
            shared_memory.unlink(missing_ok=True)
            remove_segment(segment)
    return json.loads(out), places


def _an_editable_package_folder() -> Path | None:
    """A package folder that only an editable install's finder maps (no path holds it)."""
    for name, module in list(sys.modules.items()):
        mapping = getattr(module, "MAPPING", None)
        if name.startswith("__editable__") and isinstance(mapping, dict):
            for package, folder in sorted(mapping.items()):
                if package != "dpkit" and (Path(folder) / "__init__.py").exists():
                    return Path(folder)
    return None


@landlock_only
def test_a_confined_server_reads_writes_and_reaches_only_what_it_may(tmp_path):
    tried, _ = _confined_tries(tmp_path, None)
    assert tried["how"] == f"landlock ABI {_kernel_landlock_abi()}; {seccomp.DESCRIPTION}"
    denied = "PermissionError"
    ok = {"sources/public-corpus", "downloads/pypi/public==1", "converted", "public", "scratch",
          "dpkit", "editable", "loose module", "writable file", "scratch a", "scratch b",
          "here package", "here later"}
    assert {k for k, v in tried["read"].items() if v == "ok"} == ok & set(tried["read"])
    assert set(tried["read"].values()) == {"ok", denied}
    assert tried["list"] == {"scratch": "ok", "client": denied}
    assert tried["write"] == {"scratch": "ok", "scratch file": "ok", "dev": "ok", "public": denied,
                              "client": denied, "converted": denied, "client new": denied,
                              "writable file": "ok", "dev shm": denied}
    assert tried["truncate"] == {"client": denied, "public": denied, "scratch": "ok",
                                 "writable file": "ok"}
    assert tried["move"] == {"within scratch": "ok", "out of public": denied}
    assert set(tried["import"].values()) == {"ok"}  # code stays readable
    assert (tried["tcp"], tried["signal"]) == (denied, denied)
    if _kernel_landlock_abi() >= 6:  # scoped abstract sockets and signals
        assert tried["abstract"] == denied
    # no new socket (a socket file, UDP, netlink; x32's, i386's and io_uring's ways around the
    # socket call), but a pair of connected stream sockets (multiprocessing, asyncio)
    assert tried["sockets"] == {**dict.fromkeys(tried["sockets"], denied), "pair stream": "ok"}
    assert os.uname().machine != "x86_64" or "i386" in tried["sockets"]
    # no System V or POSIX IPC (the client's segment by its id, new ones), no way into another
    # process's memory or descriptors, not even a child's
    assert tried["ipc"] == dict.fromkeys(tried["ipc"], denied) and len(tried["ipc"]) == 8
    # no capability left (a root server gets no CAP_SYS_PTRACE), none to regain
    status = tried["status"]
    assert {k: int(v, 16) for k, v in status.items() if k.startswith("Cap")} == {
        "CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}
    assert status["NoNewPrivs"].strip() == "1"


@landlock_only
def test_control_with_confinement_off_every_try_succeeds(tmp_path):
    tried, places = _confined_tries(tmp_path, "off")
    assert tried["how"] == "unconfined: DPKIT_SERVER_CONFINE=off"
    assert set(tried["read"].values()) == set(tried["write"].values()) == {"ok"}
    assert set(tried["truncate"].values()) == set(tried["move"].values()) == {"ok"}
    assert set(tried["import"].values()) == {"ok"}
    assert (tried["tcp"], tried["abstract"], tried["signal"]) == ("ok", "ok", "ok")
    assert tried["status"]["NoNewPrivs"].strip() == "0"
    sockets = tried["sockets"]
    assert sockets.pop("x32") in ("ok", "OSError")  # ENOSYS where the kernel has no x32
    io_uring = sockets.pop("io_uring")  # refused by the kernel's io_uring_disabled, if set
    assert io_uring == "ok" or Path("/proc/sys/kernel/io_uring_disabled").read_text() != "0\n"
    assert set(sockets.values()) == {"ok"}
    assert set(tried["ipc"].values()) == {"ok"}


def test_the_tool_caches_are_writable_but_not_hugging_faces_datasets(tmp_path, monkeypatch):
    home, hf, torch_home = tmp_path / "home", tmp_path / "hf", tmp_path / "torch"
    for folder in (home / ".nv", home / ".cache/huggingface/hub", home / ".cache/huggingface/datasets",
                   hf / "hub", hf / "datasets", torch_home, tmp_path / "triton"):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(hf))
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    for variable in ("HF_HUB_CACHE", "CUDA_CACHE_PATH"):
        monkeypatch.delenv(variable, raising=False)
    roots = writable_roots([tmp_path / "scratch", tmp_path / "missing"])
    devices = [p for p in roots if p.parts[1] == "dev"]
    assert Path("/dev/null") in devices and not {Path("/dev"), Path("/dev/shm")} & set(devices)
    assert all(p.name in ("null", "zero", "full", "random", "urandom")
               or p.name.startswith(("nvidia", "dri", "kfd")) for p in devices)
    assert [p for p in roots if p not in devices] == sorted([
        home / ".cache/huggingface/hub", home / ".nv", hf / "hub", tmp_path / "triton", torch_home])
    (tmp_path / "scratch").mkdir()
    assert tmp_path / "scratch" in writable_roots([tmp_path / "scratch"])


def test_a_root_inside_another_is_dropped_and_a_missing_one_too(tmp_path):
    for name in ("a", "a/b", "a-c", "ab"):
        (tmp_path / name).mkdir()
    roots = [tmp_path / "a/b", tmp_path / "ab", tmp_path / "a-c", tmp_path / "a", tmp_path / "gone",
             tmp_path / "a/b"]
    assert _outermost(roots) == [tmp_path / "a", tmp_path / "a-c", tmp_path / "ab"]


def test_a_one_letter_public_folder_is_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    assert public_paths({"path": "m"}, "") == [str(tmp_path / "m")]


def test_an_empty_cache_gives_only_its_converted_models(tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    assert model_and_artifact_caches() == [tmp_path / "converted"]


def test_only_an_editable_installs_finder_maps_readable_folders(tmp_path, monkeypatch):
    client = tmp_path / "client"
    client.mkdir()
    monkeypatch.setitem(sys.modules, "some_module_with_a_mapping",
                        SimpleNamespace(MAPPING={"client": str(client)}))
    assert not _reaches(readable_roots(), client / "file")
    monkeypatch.setitem(sys.modules, "__editable___pkg_finder",
                        SimpleNamespace(MAPPING={"pkg": str(client)}))
    assert _reaches(readable_roots(), client / "file")


def test_without_a_listing_of_dev_a_server_gets_the_plain_device_files(monkeypatch):
    from dpkit.boundary.confine import device_files

    real = Path.iterdir

    def unlisted(self):
        if self == Path("/dev"):
            raise PermissionError("/dev")
        return real(self)

    monkeypatch.setattr(Path, "iterdir", unlisted)
    assert device_files() == {Path("/dev") / n for n in ("null", "zero", "full", "random", "urandom")}


def test_a_module_replaced_under_its_name_gives_its_own_folders(tmp_path, monkeypatch):
    """The roots remembered per module follow the module object, not its name."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.setitem(sys.modules, "swapped_package", SimpleNamespace(__path__=[str(first)]))
    assert _reaches(readable_roots(), first / "f") and not _reaches(readable_roots(), second / "f")
    monkeypatch.setitem(sys.modules, "swapped_package", SimpleNamespace(__path__=[str(second)]))
    assert _reaches(readable_roots(), second / "f") and not _reaches(readable_roots(), first / "f")


def test_a_namespace_packages_path_is_read_again_each_time(tmp_path, monkeypatch):
    class GrowingPath:  # like importlib's _NamespacePath: follows sys.path
        def __init__(self):
            self.folders: list[str] = []

        def __iter__(self):
            return iter(self.folders)

    path = GrowingPath()
    monkeypatch.setitem(sys.modules, "growing_namespace", SimpleNamespace(__path__=path))
    assert not _reaches(readable_roots(), tmp_path / "f")
    path.folders.append(str(tmp_path))
    assert _reaches(readable_roots(), tmp_path / "f")


def test_the_python_installation_stays_readable_with_nothing_on_the_path(monkeypatch):
    """The standard library and site-packages come from the installation's own paths, not only
    from ``sys.path``: a module of each, never imported here, stays readable."""
    import sysconfig

    monkeypatch.setattr(sys, "path", [])
    roots = readable_roots()
    assert _reaches(roots, Path(sysconfig.get_paths()["stdlib"]) / "this.py")
    assert _reaches(roots, Path(sysconfig.get_paths()["purelib"]) / "some_package" / "x.py")
    assert _reaches(roots, Path("/usr/bin/env"))


def test_a_modules_folders_are_read_once_per_module_object(tmp_path, monkeypatch):
    """What makes a server's roots cheap: a module's folders are remembered with the module (the
    fork server reads them for all its servers), and read again only for another object."""
    from dpkit.boundary import confine

    reads = []

    class Counted:
        @property
        def __path__(self):
            reads.append(1)
            return [str(tmp_path)]

    monkeypatch.setattr(confine, "_MODULE_ROOTS", {})
    monkeypatch.setitem(sys.modules, "counted_package", Counted())
    monkeypatch.setitem(sys.modules, "counted_package_neighbour", SimpleNamespace(__path__=[]))
    assert _reaches(readable_roots(), tmp_path / "f") and _reaches(readable_roots(), tmp_path / "f")
    assert len(reads) == 1
    assert confine._MODULE_ROOTS["counted_package"][1] == (str(tmp_path),)
