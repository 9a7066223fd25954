"""A server's temp folder: named after its client, and removed once that client is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import dpkit.boundary.scratch as scratch


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_folders_of_dead_clients_are_removed_and_the_rest_kept(tmp_path):
    dead, day = _dead_pid(), scratch.LEGACY_AGE_S
    folders = {name: tmp_path / name for name in (
        f"dpkit-server-{dead}-abc", f"dpkit-server-{os.getpid()}-def", "dpkit-server-1-ghi",
        "dpkit-server-old", "dpkit-server-new", "dpkit-server-12345", "someone-else")}
    for folder in folders.values():
        folder.mkdir()
        (folder / "file").write_text("x")
    for name in ("dpkit-server-old", "dpkit-server-12345", "someone-else"):
        os.utime(folders[name], (time.time() - day - 60,) * 2)
    os.utime(folders["dpkit-server-new"], (time.time() - day + 60,) * 2)
    assert scratch.remove_orphaned_temp_folders(str(tmp_path)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        f"dpkit-server-{os.getpid()}-def", "dpkit-server-1-ghi", "dpkit-server-new",
        "someone-else"])  # pid 1 is alive (and not ours to judge); a fresh unnamed one may be live


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


def test_the_liveness_probe_tells_a_live_process_from_a_dead_one():
    assert scratch._alive(os.getpid()) and scratch._alive(1)
    assert not scratch._alive(_dead_pid())
