"""A server's temp folder: named after its client, and removed once that client is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import pytest

import dpkit.boundary.scratch as scratch

_SLEEPER = ("import signal, time; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
            "signal.signal(signal.SIGINT, signal.SIG_DFL); print(1, flush=True); time.sleep(60)")


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.fixture
def live_pid():
    """A live process that a stray signal would end (so that probing it must send none)."""
    child = subprocess.Popen([sys.executable, "-c", _SLEEPER], stdout=subprocess.PIPE, text=True)
    child.stdout.readline()  # its handlers are set
    yield child.pid
    assert child.poll() is None, "probing the process ended it"
    child.kill()
    child.wait()


def test_folders_of_dead_clients_are_removed_and_the_rest_kept(tmp_path, live_pid):
    dead, day = _dead_pid(), scratch.LEGACY_AGE_S
    folders = {name: tmp_path / name for name in (
        f"dpkit-server-{dead}-abc", f"dpkit-server-{live_pid}-def",
        "dpkit-server-old", "dpkit-server-new", "dpkit-server-12345", "someone-else")}
    for folder in folders.values():
        folder.mkdir()
        (folder / "file").write_text("x")
    for name in ("dpkit-server-old", "dpkit-server-12345", "someone-else"):
        os.utime(folders[name], (time.time() - day - 60,) * 2)
    os.utime(folders["dpkit-server-new"], (time.time() - day + 60,) * 2)
    assert scratch.remove_orphaned_temp_folders(str(tmp_path)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        f"dpkit-server-{live_pid}-def", "dpkit-server-new", "someone-else"])  # a fresh unnamed
    # one may still be in use


def test_a_clients_first_folder_sweeps_once_and_names_the_client(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_SWEPT", [])
    orphan = tmp_path / f"dpkit-server-{_dead_pid()}-x"
    orphan.mkdir()
    first = scratch.private_temp_folder()
    assert not orphan.exists() and scratch._SWEPT == [1]
    orphan.mkdir()
    second = scratch.private_temp_folder()
    assert orphan.exists()  # swept once per client: not on every server's start
    for folder in (first, second):
        assert os.path.dirname(folder) == str(tmp_path)
        assert os.path.basename(folder).startswith(f"dpkit-server-{os.getpid()}-")


def test_the_liveness_probe_tells_a_live_process_from_a_dead_one(live_pid):
    assert scratch._alive(live_pid)
    time.sleep(0.2)  # a signal sent instead of the probe has ended it by now (the fixture checks)
    assert not scratch._alive(_dead_pid())


def test_an_owner_only_in_the_old_names_digits_is_not_read_as_a_pid(tmp_path):
    legacy = tmp_path / f"dpkit-server-{_dead_pid()}"  # mkdtemp's suffix, all digits by chance
    legacy.mkdir()
    assert scratch.remove_orphaned_temp_folders(str(tmp_path)) == 0 and legacy.exists()


def test_entries_that_vanish_or_cannot_be_removed_end_nothing(tmp_path):
    dead = _dead_pid()
    for i in range(5):  # dangling links: stat fails (old names), rmtree refuses a link (new names)
        (tmp_path / f"dpkit-server-gone{i}").symlink_to(tmp_path / "nowhere")
        (tmp_path / f"dpkit-server-{dead}-link{i}").symlink_to(tmp_path / "nowhere")
        (tmp_path / f"dpkit-server-{dead}-dir{i}").mkdir()
    scratch.remove_orphaned_temp_folders(str(tmp_path))
    assert not list(tmp_path.glob("dpkit-server-*-dir*"))  # every orphan gone, whatever the order


def test_a_process_it_may_not_signal_is_taken_as_alive(monkeypatch):
    def refused(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refused)
    assert scratch._alive(12345)  # another user's process: alive, its folder kept


def test_an_early_fork_servers_list_left_by_a_dead_client_is_removed(tmp_path, live_pid):
    dead = tmp_path / f"dpkit-fork-server-{_dead_pid()}-abc"
    dead.mkdir()
    (dead / "rest.json").write_text("{}")  # a client killed after writing, with its fork server
    alive = tmp_path / f"dpkit-fork-server-{live_pid}-def"
    alive.mkdir()
    assert scratch.remove_orphaned_temp_folders(str(tmp_path)) == 1
    assert not dead.exists() and alive.exists()
