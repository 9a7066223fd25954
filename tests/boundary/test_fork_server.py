"""An early fork server (``dpkit run``): it starts before the client knows its cells, takes on
what the client names later — modules, environment — and ends with a client that never does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from dpkit.base.errors import SpecError
from dpkit.boundary import fork_server
from dpkit.contract.plugins import plugin_modules
from dpkit.runner.preload import spec_server_modules

CLIENT = """
import json, os, sys, threading
from dpkit.boundary import fork_server
from dpkit.testing import fork_server_probe

early = {early}
started = (fork_server.start_early(["netrc"], {{"FORK_PROBE_FIRST_STAGE": "1"}}) if early
           else None)
path = os.path.dirname(fork_server._EARLY.get("path", "")) if early else ""
os.environ["FORK_PROBE_LATER"] = "set after the start"
os.environ.pop("FORK_PROBE_GONE")
fork_server.preload(["colorsys"])
ctx = fork_server.fork_context([])
mine, theirs = ctx.Pipe()
child = ctx.Process(target=fork_server_probe.report,
                    args=(theirs, ["netrc", "colorsys", "tabnanny"]))
child.start()
answer = mine.recv()
child.join()
answer["list_folder_left"] = bool(path) and os.path.exists(path)
for thread in threading.enumerate():
    if thread.name == "dpkit-fork-server":
        thread.join()
answer["started_early"] = started
answer["client_keeps"] = sorted(k for k in os.environ if k in (
    "DPKIT_FORK_SERVER_LIST", "DPKIT_FORK_SERVER_CLIENT", "FORK_PROBE_FIRST_STAGE"))
print(json.dumps(answer))
"""


def _client(early: bool) -> dict:
    environ = {**os.environ, "FORK_PROBE_GONE": "set before the start",
               # inherited from another process (a server's environment has its fork server's)
               "DPKIT_FORK_SERVER_MODULES": json.dumps({"pid": 1, "modules": ["tabnanny"]}),
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    environ.pop("OPENBLAS_THREAD_TIMEOUT", None)
    done = subprocess.run([sys.executable, "-c", CLIENT.format(early=early)], env=environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_early_fork_server_takes_on_what_its_client_names_after_it_started():
    answer = _client(early=True)
    assert answer["environ"]["FORK_PROBE_LATER"] == "set after the start"
    assert "FORK_PROBE_GONE" not in answer["environ"]  # removed after the start: removed there
    assert answer["imported"] == {"netrc": True, "colorsys": True, "tabnanny": False}
    # its first stage's variables and the list's name stay out of every server
    assert not any(k.startswith("DPKIT_FORK_SERVER_LIST") or k == "FORK_PROBE_FIRST_STAGE"
                   for k in answer["environ"])
    assert answer["list_folder_left"] is False  # the client's environment is not left on disk
    assert answer["started_early"] is True and answer["client_keeps"] == []


def test_a_fork_server_started_once_the_cells_are_known_is_told_everything_at_once():
    answer = _client(early=False)
    assert answer["environ"]["FORK_PROBE_LATER"] == "set after the start"
    assert "FORK_PROBE_GONE" not in answer["environ"]
    assert answer["imported"] == {"netrc": False, "colorsys": True, "tabnanny": False}


def test_servers_blas_threads_sleep_when_idle():
    assert _client(early=True)["environ"]["OPENBLAS_THREAD_TIMEOUT"] == "4"


def test_an_early_fork_server_whose_client_never_names_the_rest_ends_with_it(tmp_path):
    script = textwrap.dedent("""
        import os
        from multiprocessing import forkserver
        from dpkit.boundary import fork_server
        fork_server.start_early()
        forkserver.ensure_running()  # after the thread's: the fork server exists
        print(forkserver._forkserver._forkserver_pid, os.path.dirname(fork_server._EARLY["path"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ,
                                            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert done.returncode == 0, done.stderr
    pid, folder = done.stdout.split()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    state = open(f"/proc/{pid}/stat").read().split()[2] if os.path.exists(f"/proc/{pid}") else ""
    assert state in ("", "Z"), f"the fork server {pid} outlived its client (state {state})"
    assert not os.path.exists(folder)


def test_start_early_starts_once():
    fork_server._STARTED.append("started")  # as if this process's fork server had started
    try:
        assert fork_server.start_early() is False
    finally:
        fork_server._STARTED.remove("started")


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("DPKIT_LOAD_PLUGINS", "", []),
    ("DPKIT_LOAD_PLUGINS", "tasks,snd", ["dpkit_snd", "dpkit_tasks"]),
    ("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy", ["dpkit.testing.toy"]),
])
def test_plugin_modules_are_those_loading_the_plugins_would_import(monkeypatch, variable, value,
                                                                   expected):
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.delenv("DPKIT_EXTRA_PLUGINS", raising=False)
    monkeypatch.setenv(variable, value)
    assert plugin_modules() == expected


def test_disabled_plugins_are_not_imported(monkeypatch):
    monkeypatch.delenv("DPKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setenv("DPKIT_DISABLED_PLUGINS", "tasks")
    modules = plugin_modules()
    assert "dpkit_tasks" not in modules and "dpkit_snd" in modules


def test_the_fork_server_finds_a_specs_server_modules_as_the_runner_does(tmp_path, monkeypatch):
    from dpkit.boundary.host import server_class
    from dpkit.contract.plugins import PluginSystem
    from dpkit.testing.toy import ToyNoise

    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy")
    system = PluginSystem()
    system.load_entry_points()
    spec = tmp_path / "toy.yaml"
    spec.write_text("name: toy\ndata: {name: toy_text}\ndefense: {name: toy_noise}\n"
                    "seeds: [0]\ndevice: cpu\n")
    assert spec_server_modules(str(spec), system.registry) == [
        "dpkit.testing.toy", server_class(ToyNoise).__module__]
    spec.write_text("name: toy\ndata: {name: toy_text}\ndefense: {name: no_such_defense}\n")
    with pytest.raises(SpecError, match="no_such_defense"):  # the fork server moves on
        spec_server_modules(str(spec), system.registry)


def _rest_file(tmp_path, rest: dict) -> str:
    folder = tmp_path / "dpkit-fork-server-list"
    folder.mkdir()
    (folder / "rest.json").write_text(json.dumps(rest))
    return str(folder / "rest.json")


@pytest.mark.timeout(20)  # a wait that never ends fails
def test_the_second_stage_takes_on_the_rest_and_removes_its_file(tmp_path, monkeypatch):
    from dpkit.boundary import second_stage

    path = _rest_file(tmp_path, {"modules": ["colorsys"], "set": {"FORK_PROBE_SET": "now"},
                                 "unset": ["FORK_PROBE_UNSET"]})
    monkeypatch.setenv(fork_server.LIST_VARIABLE, path)
    monkeypatch.setenv(fork_server.CLIENT_VARIABLE, str(os.getppid()))
    monkeypatch.setenv("FORK_PROBE_UNSET", "then")
    monkeypatch.setenv(second_stage.CARRIED, json.dumps({"pid": os.getpid() + 1,
                                                         "modules": ["tabnanny"]}))
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    monkeypatch.delitem(sys.modules, "tabnanny", raising=False)
    second_stage.second_stage()
    assert os.environ["FORK_PROBE_SET"] == "now" and "FORK_PROBE_UNSET" not in os.environ
    assert fork_server.LIST_VARIABLE not in os.environ
    assert fork_server.CLIENT_VARIABLE not in os.environ
    assert second_stage.carried() == ["colorsys"]  # for this process's own restart
    assert "colorsys" in sys.modules
    assert "tabnanny" not in sys.modules  # another process's carried list is not this one's
    assert not os.path.exists(os.path.dirname(path))  # nothing of the client's left on disk
    monkeypatch.delenv("FORK_PROBE_SET")
    monkeypatch.delenv(second_stage.CARRIED)


@pytest.mark.timeout(20)  # a wait that never ends fails
def test_a_fork_server_started_again_imports_what_it_carried_without_waiting(monkeypatch):
    from dpkit.boundary import second_stage

    monkeypatch.setenv(second_stage.CARRIED, json.dumps({"pid": os.getpid(),
                                                         "modules": ["colorsys"]}))
    monkeypatch.setenv(fork_server.LIST_VARIABLE, "/nonexistent/rest.json")  # never written
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    second_stage.second_stage()
    assert "colorsys" in sys.modules


@pytest.mark.timeout(20)  # a wait that never ends fails
def test_the_second_stage_ends_the_fork_server_when_its_client_is_gone(tmp_path, monkeypatch):
    from dpkit.boundary import second_stage

    monkeypatch.setenv(second_stage.CARRIED, "not a list of this process")
    monkeypatch.setenv(fork_server.LIST_VARIABLE, str(tmp_path / "never" / "rest.json"))
    monkeypatch.setenv(fork_server.CLIENT_VARIABLE, str(os.getppid() + 1))  # not our parent
    with pytest.raises(SystemExit):
        second_stage.second_stage()
    assert second_stage.wait_for_rest(str(tmp_path / "never" / "rest.json"), os.getppid() + 1) is None


@pytest.mark.timeout(20)  # a wait that never ends fails
def test_waiting_for_the_rest_ends_when_it_is_written(tmp_path):
    import threading

    from dpkit.boundary import second_stage

    folder = tmp_path / "list"
    folder.mkdir()
    path = folder / "rest.json"
    later = threading.Timer(0.2, lambda: path.write_text(json.dumps({"modules": ["m"]})))
    later.start()
    assert second_stage.wait_for_rest(str(path), os.getppid()) == {"modules": ["m"]}
    assert not folder.exists()


def test_the_client_tells_only_what_changed_since_the_start(tmp_path, monkeypatch):
    path = str(tmp_path / "rest.json")
    monkeypatch.setenv("FORK_PROBE_KEPT", "same")
    monkeypatch.setenv("FORK_PROBE_CHANGED", "before")
    monkeypatch.setenv("FORK_PROBE_FIRST", "first stage only")
    monkeypatch.setattr(fork_server, "_EARLY", {"path": path, "environ": dict(os.environ),
                                                "added": ["FORK_PROBE_FIRST"]})
    monkeypatch.setenv("FORK_PROBE_CHANGED", "after")
    monkeypatch.delenv("FORK_PROBE_KEPT")
    fork_server._tell_rest(["a", "b"])
    rest = json.loads(open(path).read())
    assert rest == {"modules": ["a", "b"], "set": {"FORK_PROBE_CHANGED": "after"},
                    "unset": ["FORK_PROBE_FIRST", "FORK_PROBE_KEPT"]}
    assert os.stat(path).st_mode & 0o777 == 0o600 and fork_server._EARLY == {}


class _Context:
    def __init__(self):
        self.preload: list[str] | None = None

    def set_forkserver_preload(self, modules):
        self.preload = modules


@pytest.fixture
def fresh_fork_server(monkeypatch):
    """This module's state as in a process whose fork server has not started (none is)."""
    context, threads, exits = _Context(), [], []
    monkeypatch.setattr(fork_server, "_STARTED", [])
    monkeypatch.setattr(fork_server, "_PENDING", [])
    monkeypatch.setattr(fork_server, "_EARLY", {})
    monkeypatch.setattr(fork_server.multiprocessing, "get_context",
                        lambda method: context if method == "forkserver" else None)
    monkeypatch.setattr(fork_server, "_start_in_thread",
                        lambda unset=(): threads.append(sorted(unset)))
    monkeypatch.setattr(fork_server.atexit, "register", lambda *args: exits.append(args))
    for name in (fork_server.LIST_VARIABLE, fork_server.CLIENT_VARIABLE, "FORK_PROBE_FIRST"):
        monkeypatch.delenv(name, raising=False)
    return context, threads, exits


def test_a_fork_server_started_with_the_first_server_imports_all_it_was_asked(fresh_fork_server):
    context, _, _ = fresh_fork_server
    fork_server.preload(["asked.before"])
    assert fork_server.fork_context(["named.by.the.channel"]) is context
    assert context.preload == [*fork_server.FIRST, "asked.before", "named.by.the.channel",
                               *fork_server.LAST]
    fork_server.preload(["asked.after"])
    fork_server.fork_context(["named.later"])  # started: nothing changes
    assert context.preload[-3:] == ["named.by.the.channel", *fork_server.LAST]


def test_an_early_fork_server_is_started_then_told_once(fresh_fork_server, tmp_path):
    context, threads, exits = fresh_fork_server
    assert fork_server.start_early(["plugin"], {"FORK_PROBE_FIRST": "1"}) is True
    path = fork_server._EARLY["path"]
    folder = os.path.dirname(path)
    assert context.preload == [*fork_server.FIRST, "plugin", fork_server.SECOND_STAGE,
                               *fork_server.LAST]
    assert os.environ[fork_server.LIST_VARIABLE] == path
    assert os.environ[fork_server.CLIENT_VARIABLE] == str(os.getpid())
    assert threads == [sorted([fork_server.LIST_VARIABLE, fork_server.CLIENT_VARIABLE,
                               "FORK_PROBE_FIRST"])]  # removed from this process once started
    assert exits == [(shutil.rmtree, folder, True)]  # the list goes at exit if never read
    assert oct(os.stat(folder).st_mode & 0o777) == oct(0o700)
    assert fork_server.start_early() is False
    fork_server.preload(["asked.after.start"])
    fork_server.fork_context(["named.by.the.channel"])
    rest = json.loads(open(path).read())
    assert rest["modules"] == ["asked.after.start", "named.by.the.channel"]
    assert fork_server._EARLY == {}
    os.remove(path)
    fork_server.fork_context(["named.later"])  # told already: nothing is written again
    assert not os.path.exists(path)
    shutil.rmtree(folder)


def _fork_servers_of(client: int) -> list[int]:
    """Fork servers still running (not zombies) that were started early by process ``client``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline").read()
            environ = open(f"/proc/{entry}/environ").read().split("\0")
            state = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if ("forkserver import main" in argv and state != "Z"
                and f"{fork_server.CLIENT_VARIABLE}={client}" in environ):
            found.append(int(entry))
    return found


def test_a_dpkit_run_that_fails_before_its_first_cell_leaves_no_fork_server(tmp_path):
    spec = tmp_path / "broken.yaml"
    spec.write_text("name: broken\ndata: {name: toy_text}\ndefense: {name: no_such_defense}\n")
    environ = {**os.environ, "DPKIT_SERVER": "process", "DPKIT_BUDGET_STORE": "off",
               "DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy",
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    client = subprocess.Popen([sys.executable, "-m", "dpkit", "run", str(spec), "--out",
                               str(tmp_path / "out"), "--no-progress"], env=environ,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = client.communicate(timeout=300)
    assert client.returncode != 0 and "no_such_defense" in err
    deadline = time.monotonic() + 30
    while _fork_servers_of(client.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _fork_servers_of(client.pid) == []


def test_a_client_killed_outright_takes_its_early_fork_server_with_it():
    script = ("import time\nfrom multiprocessing import forkserver\n"
              "from dpkit.boundary import fork_server\nfork_server.start_early()\n"
              "forkserver.ensure_running()\nprint('ready', flush=True)\ntime.sleep(120)\n")
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ,
                                   "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert client.stdout.readline().strip() == "ready"
    assert len(_fork_servers_of(client.pid)) == 1  # the probe sees it while its client lives
    client.kill()  # no exit handler runs
    client.wait()
    deadline = time.monotonic() + 30
    while _fork_servers_of(client.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _fork_servers_of(client.pid) == []


@pytest.mark.timeout(20)
@pytest.mark.parametrize("client", [None, "", "0"])
def test_a_list_without_its_client_or_no_list_is_not_waited_for(tmp_path, monkeypatch, client):
    from dpkit.boundary import second_stage

    monkeypatch.setenv(second_stage.CARRIED, "inherited, not this process's")
    if client is None:  # no list either
        monkeypatch.delenv(fork_server.LIST_VARIABLE, raising=False)
        monkeypatch.delenv(fork_server.CLIENT_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(fork_server.LIST_VARIABLE, str(tmp_path / "never" / "rest.json"))
        monkeypatch.setenv(fork_server.CLIENT_VARIABLE, client)
    second_stage.second_stage()  # returns at once, takes nothing on
    assert second_stage.carried() == []


@pytest.mark.timeout(20)
def test_the_second_stage_waits_for_a_list_its_live_client_writes_later(tmp_path, monkeypatch):
    import threading

    from dpkit.boundary import second_stage

    folder = tmp_path / "list"
    folder.mkdir()
    path = folder / "rest.json"
    monkeypatch.setenv(fork_server.LIST_VARIABLE, str(path))
    monkeypatch.setenv(fork_server.CLIENT_VARIABLE, str(os.getppid()))
    monkeypatch.setenv(second_stage.CARRIED, "placeholder")
    monkeypatch.setenv("FORK_PROBE_LATE", "placeholder")
    monkeypatch.delenv("FORK_PROBE_LATE")
    rest = {"modules": [], "set": {"FORK_PROBE_LATE": "written later"}, "unset": []}
    threading.Timer(0.2, lambda: path.write_text(json.dumps(rest))).start()
    second_stage.second_stage()
    assert os.environ["FORK_PROBE_LATE"] == "written later" and not folder.exists()
