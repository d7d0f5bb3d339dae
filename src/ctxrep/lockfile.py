"""What dvc.lock records for each output, and the output's bytes checked against it.

DVC trusts a file whose size and mtime it has seen before, so a byte flipped with the mtime kept
passes ``dvc status``; these checks rehash instead. A stage run by DVC checks the upstream
outputs it depends on before it reads them (:func:`verify_stage_inputs`, called by
:func:`ctxrep.stage.stage`); ``ctxrep verify`` (:mod:`ctxrep.verify`, with its repair) checks
every output. Stages import this module, never the command's, so editing the repair code
leaves every stage up to date.

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

from ctxrep import codedeps
from ctxrep.errors import InputError
from ctxrep.io import sha256_file


def md5_file(path: Path) -> str:
    return sha256_file(path, algorithm="md5")


def lock_outputs(root: Path) -> dict[str, str]:
    """Every output path in dvc.lock → its recorded md5 (``….dir`` for a folder)."""
    return {path: md5 for _, path, md5 in lock_entries(root)}


def lock_entries(root: Path) -> tuple[tuple[str, str, str], ...]:
    """``(stage, output path, md5)`` of every output dvc.lock records an md5 for; a dvc.lock
    that is not YAML or not shaped as DVC writes it raises :class:`InputError` naming it."""
    lock = Path(root) / "dvc.lock"
    if not lock.exists():
        return ()
    stat = lock.stat()
    return _lock_outputs(str(lock.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _lock_outputs(lock: str, mtime_ns: int, size: int) -> tuple:
    # libyaml: the lock of a full pipeline is ~250 kB, which pure-Python YAML takes seconds on
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(Path(lock).read_text(), Loader=loader) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        why = " ".join(str(e).replace(' in "<unicode string>"', "").split())
        raise InputError(f"{lock}: not valid YAML ({why}); restore it "
                         f"with `git checkout dvc.lock`") from None
    shape = ("not shaped as DVC writes it ({}); expected 'stages: {{<stage>: {{outs: [{{path: "
             "…, md5: …}}]}}}}': restore it with `git checkout dvc.lock`")
    stages = data.get("stages", {}) if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise InputError(f"{lock}: " + shape.format("no mapping of stages"))
    entries = []
    for name, stage in stages.items():
        outs = stage.get("outs", []) if isinstance(stage, dict) else None
        if not isinstance(outs, list):
            raise InputError(f"{lock}: " + shape.format(f"stage {name!r} has no list of outs"))
        for out in outs:
            if not (isinstance(out, dict) and isinstance(out.get("path"), str)
                    and isinstance(out.get("md5", ""), str)):
                raise InputError(f"{lock}: " + shape.format(f"an out of stage {name!r} is "
                                                            f"{out!r}"))
            if "md5" in out:
                entries.append((str(name), out["path"], out["md5"]))
    return tuple(entries)


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


def _inside(rel: str, folder: str) -> bool:
    """Whether the relative path ``rel`` is ``folder`` or below it."""
    return rel == folder or rel.startswith(folder + "/")


def check_output(root: Path, path: str, md5: str, cache: Path | None,
                 within: str | None = None) -> list[str]:
    """Problems of one output (empty when its bytes are what dvc.lock records); ``within``: only
    that file or subfolder of a folder output (a stage that depends on part of it)."""
    target = root / path
    if not md5.endswith(".dir"):
        if not target.is_file():
            return [f"{path}: missing"]
        actual = md5_file(target)
        return [] if actual == md5 else [f"{path}: md5 {actual}, dvc.lock records {md5}"]
    listing = cache / md5[:2] / md5[2:] if cache else None
    if listing is None or not listing.exists():
        return [f"{path}: cannot check (the folder's listing {md5} is not in the DVC cache)"]
    if md5_file(listing) != md5.removesuffix(".dir"):
        return [f"{path}: cannot check (the folder's listing {md5} in the DVC cache is corrupt)"]
    expected = {e["relpath"]: e["md5"] for e in json.loads(listing.read_text())}
    if not target.is_dir():
        return [f"{path}: missing"]
    actual = {p.relative_to(target).as_posix(): p for p in target.rglob("*") if p.is_file()}
    if within is not None:
        expected = {rel: v for rel, v in expected.items() if _inside(rel, within)}
        actual = {rel: v for rel, v in actual.items() if _inside(rel, within)}
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
    checked, problems = [], []
    for dep in deps:
        if dep in outs:
            checked.append(dep)
            problems += check_output(root, dep, outs[dep], cache)
        elif (folder := _folder_holding(dep, outs)) is not None:  # part of a folder output
            checked.append(dep)
            problems += check_output(root, folder, outs[folder], cache,
                                     within=dep[len(folder) + 1:])
    # Its code: what the stage `code` recorded, which DVC records in turn (a missing manifest
    # DVC itself refuses, as any missing dependency).
    code = [dep for dep in deps if dep.startswith(codedeps.CODE_DIR.as_posix() + "/")
            and (root / dep).exists()]
    for dep in code:
        changed = codedeps.changed_since(root / dep, root)
        if changed:
            raise InputError(
                f"{stage}: its code changed since stage `code` wrote {dep} ({', '.join(changed[:5])}"
                f"{', …' if len(changed) > 5 else ''}): DVC would record code other than what "
                f"ran. Run `dvc repro {stage}` (`code` runs first; `--single-item` skips it)")
    if problems:
        raise InputError(f"inputs of {stage} differ from what dvc.lock records (changed after "
                         f"their stage wrote them): " + "; ".join(problems[:5])
                         + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
                         + f". {REPAIR_HINT}, or rerun their stages with "
                         "`dvc repro --force <stage>`.")
    return len(checked)


def _folder_holding(path: str, outs: dict[str, str]) -> str | None:
    """The folder output of dvc.lock that ``path`` lies inside, if any."""
    for out, md5 in outs.items():
        if md5.endswith(".dir") and path.startswith(out.rstrip("/") + "/"):
            return out
    return None


REPAIR_HINT = ("Repair them with `ctxrep verify --repair`: it removes corrupt DVC cache objects "
               "and the bad workspace copies, restores them with `dvc pull` and `dvc checkout "
               "--relink`, and names the stage to rerun for what no remote holds")
