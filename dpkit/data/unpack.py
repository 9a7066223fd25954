"""Safe unpacking of wheels (zip), sdists (tar / zip) and Debian packages (dpkg-deb -x)."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

from tqdm.auto import tqdm

from dpkit.base.errors import DataSourceError


def unpack_archive(archive: Path, dest: Path, kind: str, progress: bool = True) -> None:
    """Extract ``archive`` (``kind``: wheel, sdist or deb) into the existing folder ``dest``."""
    if kind == "deb":
        _unpack_deb(archive, dest)
    elif zipfile.is_zipfile(archive):
        _unpack_zip(archive, dest, progress)
    elif tarfile.is_tarfile(archive):
        _unpack_tar(archive, dest, progress)
    else:
        raise DataSourceError(f"{archive} is neither a zip nor a tar archive; delete it and "
                              "fetch again")


def _inside(dest: Path, name: str) -> Path:
    target = (dest / name).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise DataSourceError(f"archive member {name!r} would be written outside {dest}; "
                              "refusing to extract (the artifact is corrupt or malicious)")
    return target


def _unpack_zip(archive: Path, dest: Path, progress: bool) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        total = sum(m.file_size for m in members)
        with tqdm(total=total, unit="B", unit_scale=True, leave=False,
                  desc=f"unpack {archive.name}", disable=not progress) as bar:
            for member in members:
                target = _inside(dest, member.filename)
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                bar.update(member.file_size)


def _unpack_tar(archive: Path, dest: Path, progress: bool) -> None:
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
        with tqdm(total=sum(m.size for m in members), unit="B", unit_scale=True, leave=False,
                  desc=f"unpack {archive.name}", disable=not progress) as bar:
            for member in members:
                target = _inside(dest, member.name)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                if src is None:  # a link or device entry: nothing to copy
                    continue
                with src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                bar.update(member.size)


def _unpack_deb(archive: Path, dest: Path) -> None:
    tool = shutil.which("dpkg-deb")
    if tool is None:
        raise DataSourceError(f"cannot unpack {archive.name}: dpkg-deb is not installed here; "
                              "unpack it elsewhere with `dpkg -x` and use a local source")
    done = subprocess.run([tool, "-x", str(archive), str(dest)], capture_output=True, text=True)
    if done.returncode != 0:
        raise DataSourceError(f"dpkg-deb -x {archive.name} failed: {done.stderr.strip()[:300]}")
