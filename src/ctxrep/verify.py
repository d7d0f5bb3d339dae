"""Check outputs against the md5 that dvc.lock records for them, reading every byte.

DVC trusts a file whose size and mtime it has seen before, so a byte flipped with the mtime kept
passes ``dvc status``. This module rehashes instead:

- ``ctxrep verify`` checks every output in the workspace against dvc.lock;
- a stage run by DVC checks the upstream outputs it depends on before it reads them
  (:func:`verify_stage_inputs`, called by :func:`ctxrep.stage.stage`).

A folder output's lock entry is the md5 of its ``.dir`` listing in the DVC cache, which holds the
md5 of each file; DVC 3 hashes a file as the plain md5 of its bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import yaml

from ctxrep.errors import InputError
from ctxrep.io import sha256_file


def md5_file(path: Path) -> str:
    return sha256_file(path, algorithm="md5")


def lock_outputs(root: Path) -> dict[str, str]:
    """Every output path in dvc.lock → its recorded md5 (``….dir`` for a folder)."""
    lock = Path(root) / "dvc.lock"
    if not lock.exists():
        return {}
    stat = lock.stat()
    return dict(_lock_outputs(str(lock.resolve()), stat.st_mtime_ns, stat.st_size))


@lru_cache(maxsize=4)
def _lock_outputs(lock: str, mtime_ns: int, size: int) -> tuple:
    # libyaml: the lock of a full pipeline is ~250 kB, which pure-Python YAML takes seconds on
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stages = (yaml.load(Path(lock).read_text(), Loader=loader) or {}).get("stages", {})
    return tuple((o["path"], o["md5"]) for s in stages.values() for o in s.get("outs", [])
                 if "md5" in o)


@contextlib.contextmanager
def dvc_stage(name: str, root: Path | str = ".") -> Iterator:
    """The DVC stage ``name`` as dvc.yaml defines it (its deps and outs), for the span of the
    ``with``. Resolved from dvc.yaml alone: ``repo.stage.collect`` would also parse dvc.lock with
    DVC's pure-Python YAML reader, seconds per stage on a full pipeline's lock."""
    from dvc.dvcfile import ProjectFile
    from dvc.repo import Repo
    from dvc.stage.loader import StageLoader

    with Repo(str(root)) as repo:
        dvcfile = ProjectFile(repo, os.path.join(repo.root_dir, "dvc.yaml"))
        yield StageLoader(dvcfile, dvcfile.contents)[name]


def cache_dir(root: Path) -> Path:
    """The DVC cache of ``root`` (also from inside a ``dvc exp run --temp/--queue`` copy)."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return Path(repo.cache.local.path)


def check_output(root: Path, path: str, md5: str, cache: Path | None) -> list[str]:
    """Problems of one output (empty when its bytes are what dvc.lock records)."""
    target = root / path
    if not md5.endswith(".dir"):
        if not target.is_file():
            return [f"{path}: missing"]
        actual = md5_file(target)
        return [] if actual == md5 else [f"{path}: md5 {actual}, dvc.lock records {md5}"]
    listing = cache / md5[:2] / md5[2:] if cache else None
    if listing is None or not listing.exists():
        return [f"{path}: cannot check (the folder's listing {md5} is not in the DVC cache)"]
    expected = {e["relpath"]: e["md5"] for e in json.loads(listing.read_text())}
    if not target.is_dir():
        return [f"{path}: missing"]
    actual = {p.relative_to(target).as_posix(): p for p in target.rglob("*") if p.is_file()}
    problems = [f"{path}/{rel}: missing" for rel in sorted(set(expected) - set(actual))]
    problems += [f"{path}/{rel}: not in dvc.lock's listing" for rel in sorted(set(actual) - set(expected))]
    for rel in sorted(set(expected) & set(actual)):
        got = md5_file(actual[rel])
        if got != expected[rel]:
            problems.append(f"{path}/{rel}: md5 {got}, dvc.lock records {expected[rel]}")
    return problems


def verify_workspace(root: Path | str = ".") -> list[str]:
    """Every output dvc.lock records, rehashed."""
    root = Path(root)
    outs = lock_outputs(root)
    cache = cache_dir(root) if outs else None
    return [p for path, md5 in sorted(outs.items()) for p in check_output(root, path, md5, cache)]


def verify_stage_inputs(stage: str, root: Path | str = ".") -> int:
    """Before ``stage`` reads its upstream outputs, check their bytes against dvc.lock; raise
    :class:`InputError` naming each file that differs. Only under DVC (``DVC_STAGE`` set): a
    stage run by hand has no lock entry to trust. Returns the number of outputs checked."""
    if not os.environ.get("DVC_STAGE"):
        return 0
    root = Path(root)
    outs = lock_outputs(root)
    with dvc_stage(stage, root) as defined:
        deps = [d.def_path for d in defined.deps]
        cache = Path(defined.repo.cache.local.path)
    checked = [d for d in deps if d in outs]
    problems = [p for d in checked for p in check_output(root, d, outs[d], cache)]
    if problems:
        raise InputError(f"inputs of {stage} differ from what dvc.lock records (changed after "
                         f"their stage wrote them): " + "; ".join(problems[:5])
                         + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
                         + ". Restore them with `dvc checkout --relink`, or rerun their stages "
                         "with `dvc repro --force <stage>`.")
    return len(checked)
