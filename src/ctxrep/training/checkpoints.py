"""Checkpoints of a training run: atomic ``step-<n>`` folders to resume from exactly, and the
key that names a run's checkpoint folder (a changed run or changed code never resumes an old
run's checkpoints)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import torch


class Checkpoints:
    """``<dir>/step-00001234/`` folders, each complete before it is renamed into place.

    A kill at any point leaves the newest complete folder usable; tensors are stored with
    ``torch.save`` and read back with ``weights_only=True`` (no pickle of arbitrary objects)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def latest(self) -> Path | None:
        done = sorted(p for p in self.root.glob("step-*") if (p / "COMPLETE").exists())
        return done[-1] if done else None

    def save(self, step: int, state: dict, keep: int = 1) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step-{step:08d}"
        tmp = self.root / f".tmp-step-{step:08d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save(state, tmp / "state.pt")
        (tmp / "COMPLETE").write_text(str(step))
        with open(tmp / "state.pt", "rb") as f:
            os.fsync(f.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in sorted(p for p in self.root.glob("step-*") if p != final)[:-keep or None]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def load(self, path: Path) -> dict:
        try:
            return torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise RuntimeError(f"{path / 'state.pt'}: unreadable checkpoint ({e})") from e

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def run_key(*parts) -> str:
    """A checkpoint folder name from a run's params and data and the package's code: a changed
    run, or the same run under changed code, never resumes an old one's checkpoints."""
    blob = json.dumps([code_fingerprint(), *parts], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the ctxrep package's source files, Python and the C++ it compiles (paths and
    bytes): resuming a checkpoint written by other code would mix two programs in one run."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.cpp")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
