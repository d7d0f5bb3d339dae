"""Atomic outputs and file hashing.

Every stage output is built in a temporary sibling (``.<name>.tmp-<pid>``) and renamed into place
only when complete, so a crash never leaves a half-written output where DVC or the next stage
would take it as finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def clean_stale_tmp(path: Path) -> None:
    """Remove temporaries left by a killed earlier run of the same output."""
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        remove(stale)


def check_only_holds(folder: Path, files: frozenset[str] | set[str], what: str) -> None:
    """Refuse a ``folder`` that exists and holds anything but ``files`` (plain files, by name),
    before :func:`atomic_dir` replaces it as a whole: a user's other files must never go with
    it. ``what`` names what the folder holds in the message ("a saved BERT's files")."""
    from ctxrep.errors import InputError

    if not folder.exists() and not folder.is_symlink():
        if any(p.exists() and not p.is_dir() for p in folder.parents):
            raise InputError(f"{folder}: a parent path exists and is not a folder; choose "
                             f"another path")
        return
    if folder.is_symlink() or not folder.is_dir():
        raise InputError(f"{folder}: exists and is not a folder; choose a new path")
    others = sorted(p.name for p in folder.iterdir()
                    if p.name not in files or not p.is_file() or p.is_symlink())
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise InputError(f"{folder}: exists and holds files that are not {what} ({shown}); "
                         f"it would be replaced as a whole: move them, or choose a new path")


@contextlib.contextmanager
def atomic_dir(path: Path | str) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``path`` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(path)
    tmp = _tmp_sibling(path)
    tmp.mkdir()
    try:
        yield tmp
        _fsync_tree(tmp)
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        remove(old)
    except BaseException:
        remove(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: Path | str, mode: str = "w") -> Iterator:
    """Open a temporary file that replaces ``path`` when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(path)
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def write_json(path: Path | str, obj, indent: int = 2) -> None:
    with atomic_file(path) as f:
        json.dump(obj, f, indent=indent, sort_keys=True, ensure_ascii=False)
        f.write("\n")


def _fsync_tree(root: Path) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())


def sha256_file(path: Path | str, chunk: int = 1 << 20, algorithm: str = "sha256") -> str:
    """Hex digest of a file's bytes (``algorithm="md5"`` is how DVC 3 hashes a file)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_tree(*paths: Path | str) -> str:
    """One sha256 over the relative names and bytes of every file under ``paths`` (files or
    folders, in order): the identity of a run's inputs, e.g. to key its checkpoints."""
    h = hashlib.sha256()
    for root in map(Path, paths):
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for f in files:
            h.update(f"{f.relative_to(root.parent)}\0{sha256_file(f)}\n".encode())
    return h.hexdigest()


def load_safetensors(path: Path | str) -> dict:
    """Tensors from a safetensors file; a truncated or corrupt file is an error naming it."""
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: weights file not found")
    try:
        return load_file(str(path))
    except Exception as e:  # noqa: BLE001 — safetensors raises several types for bad bytes
        raise ValueError(f"{path}: not a readable safetensors file ({e.__class__.__name__}: {e}); "
                         f"truncated or corrupt — rerun the stage that wrote it") from e
