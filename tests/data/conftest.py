"""Helpers for source tests: tiny archives pinned by their real sha256, in a private cache."""

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from dpkit.data import PinnedArtifact

FILES = {"pkg/data/a.txt": b"alpha\n" * 1000, "pkg/data/b.txt": b"beta\n" * 1000,
         "pkg/__init__.py": b""}


def make_wheel(path: Path, files: dict[str, bytes] = FILES) -> str:
    """Write a zip (wheel) with ``files``; return its sha256."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_sdist(path: Path, files: dict[str, bytes] = FILES) -> str:
    """Write a .tar.gz (sdist) with ``files`` under ``demo-1.0/``; return its sha256."""
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"demo-1.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def placed(root: Path, maker=make_wheel, kind: str = "wheel", name: str = "demo") -> PinnedArtifact:
    """A pinned artifact whose file is already placed by hand in ``root``'s download folder."""
    scratch = root / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    suffix = ".whl" if kind == "wheel" else ".tar.gz"
    src = scratch / f"{name}-1.0{suffix}"
    digest = maker(src)
    art = PinnedArtifact(name, "1.0", digest, kind=kind)
    folder = art.download_dir(root)
    folder.mkdir(parents=True)
    src.rename(folder / src.name)
    return art


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private DPKIT_CACHE."""
    root = tmp_path / "cache"
    monkeypatch.setenv("DPKIT_CACHE", str(root))
    return root
