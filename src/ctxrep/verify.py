"""Check outputs against the md5 that dvc.lock records for them, reading every byte.

DVC trusts a file whose size and mtime it has seen before, so a byte flipped with the mtime kept
passes ``dvc status``. This module rehashes instead:

- ``ctxrep verify`` checks every output in the workspace against dvc.lock;
- ``ctxrep verify --repair`` (:func:`repair_workspace`) mends what it finds: DVC never rehashes
  its cache either, so a corrupt cache object is checked out (``dvc checkout``), re-linked
  (``--relink``) and kept (``dvc pull`` finds it present) without a word. Repair removes each
  corrupt object and the bad workspace copy, restores them with ``dvc pull`` + ``dvc checkout
  --relink`` and rehashes; what no remote holds is named with the stage that recomputes it;
- a stage run by DVC checks the upstream outputs it depends on before it reads them
  (:func:`verify_stage_inputs`, called by :func:`ctxrep.stage.stage`).

A folder output's lock entry is the md5 of its ``.dir`` listing in the DVC cache, which holds the
md5 of each file; DVC 3 hashes a file as the plain md5 of its bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
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


def add_arguments(parser) -> None:
    parser.add_argument("--repair", action="store_true", help="remove corrupt DVC cache objects "
                        "and bad workspace copies, restore them (dvc pull, dvc checkout "
                        "--relink), name the stage to rerun for what cannot be restored")


def run(args) -> int:
    return run_verify(".", args.repair, no_run_fails=True)


def run_verify(root: Path | str = ".", repair: bool = False, say=print,
               no_run_fails: bool = False) -> int:
    """``ctxrep verify [--repair]``: the exit status (0: every output matches dvc.lock). With
    ``no_run_fails`` (the command), a pipeline checkout whose dvc.lock records nothing fails."""
    if repair:
        return 0 if repair_workspace(root, say, no_run_fails) else 1
    if not lock_entries(Path(root)):
        lock = Path(root) / "dvc.lock"
        if no_run_fails and (Path(root) / "dvc.yaml").is_file():  # no recorded run
            say(f"ctxrep verify: {lock} {'records no outputs' if lock.exists() else 'is missing'}"
                f": there is no run to check; `make repro` (or `git checkout dvc.lock`) "
                f"records one")
            return 1
        say(f"ctxrep verify: {lock} records no outputs: nothing to check")
        return 0
    problems = verify_workspace(root)
    for line in problems:
        say(line)
    say(f"ctxrep verify: {len(problems)} problem(s). {REPAIR_HINT}." if problems
        else "ctxrep verify: every output matches dvc.lock")
    return 1 if problems else 0


@dataclass
class Damage:
    """An output whose workspace bytes differ from dvc.lock, and the state of its cache objects."""
    stage: str
    path: str
    md5: str
    problems: list[str]
    corrupt: list[tuple[Path, str, str]] = field(default_factory=list)  # (object, md5, what)
    absent: list[tuple[str, str]] = field(default_factory=list)    # (md5, what it holds)
    rebuilt: list[str] = field(default_factory=list)  # objects put back from a good workspace file


def _object(cache: Path, md5: str) -> Path:
    return cache / md5[:2] / md5[2:]


def _check_object(cache: Path, md5: str, what: str, damage: Damage,
                  workspace: Path | None = None) -> bool:
    """Whether the cache object ``md5`` holds its bytes; if not, a workspace file that does
    (``workspace``) is copied back into the cache, else the object is listed as corrupt/absent."""
    obj = _object(cache, md5)
    if obj.is_file() and md5_file(obj) == md5.removesuffix(".dir"):
        return True
    if workspace is not None and workspace.is_file() and md5_file(workspace) == md5:
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp = obj.with_name(f".{obj.name}.tmp-{os.getpid()}")
        shutil.copyfile(workspace, tmp)
        os.chmod(tmp, 0o444)
        os.replace(tmp, obj)
        damage.rebuilt.append(what)
        return True
    if obj.exists():
        damage.corrupt.append((obj, md5, what))
    else:
        damage.absent.append((md5, what))
    return False


def diagnose(root: Path, cache: Path, stage: str, path: str, md5: str) -> Damage | None:
    """``None`` if output ``path`` matches dvc.lock; else its problems and which of its cache
    objects (a file's, or a folder's ``.dir`` listing and each file it lists) are bad."""
    problems = check_output(root, path, md5, cache)
    if not problems:
        return None
    damage = Damage(stage, path, md5, problems)
    if not md5.endswith(".dir"):
        _check_object(cache, md5, path, damage)
    elif _check_object(cache, md5, f"the listing of {path}/ (all its files)", damage):
        for entry in json.loads(_object(cache, md5).read_text()):
            rel = entry["relpath"]
            _check_object(cache, entry["md5"], f"{path}/{rel}", damage, root / path / rel)
    return damage


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True,
                          text=True)


def _default_remote(root: Path) -> tuple[str, str] | None:
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        name = repo.config["core"].get("remote")
        url = repo.config["remote"].get(name, {}).get("url", "?") if name else None
    return (name, url) if name else None


def _dvc_said(proc: subprocess.CompletedProcess) -> str:
    """DVC's first error line (else its last line), on one line and short."""
    lines = [" ".join(line.split()) for line in (proc.stdout + proc.stderr).splitlines()]
    said = [ln for ln in lines if ln.startswith("ERROR")] or [ln for ln in lines if ln][-1:]
    return said[0][:240] if said else f"exit status {proc.returncode}"


# Never removed, whatever dvc.lock says: the repository, DVC's own folder, MLflow's store.
PROTECTED = (".git", ".dvc", "mlflow.db", "mlruns", "dvc.yaml", "dvc.lock", "params.yaml")


def declared_outputs(root: Path) -> set[str]:
    """Every output path ``dvc.yaml`` declares (foreach stages resolved, as DVC resolves them),
    relative to ``root``: the only paths repair may remove. ``dvc.lock`` alone is not trusted:
    it is a file anyone can edit, and it could name ``.git``."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {os.path.normpath(os.path.relpath(out.fs_path, repo.root_dir))
                for stage in repo.index.stages for out in stage.outs}


def removable(root: Path, path: str, declared: set[str]) -> str | None:
    """Why ``path`` (from dvc.lock) must not be removed, or None if it may be."""
    norm = os.path.normpath(path)
    if norm.split(os.sep)[0] in PROTECTED or norm in (".", ".."):
        return "a file of git, DVC or MLflow, never an output"
    if norm not in declared:
        return "not an output that dvc.yaml declares"
    target = root / norm  # a symlink output (cache.type symlink) may point out of the repo
    where = target.parent.resolve() / target.name
    if not where.is_relative_to(root.resolve()) or where == root.resolve():
        return "outside the workspace"
    return None


def _remove(root: Path, path: str) -> bool:
    target = root / os.path.normpath(path)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    return True


def repair_workspace(root: Path | str = ".", say=print, no_run_fails: bool = False) -> bool:
    """``ctxrep verify --repair``: for each output whose bytes differ from dvc.lock, remove its
    corrupt cache objects (DVC would check them out, re-link them and never pull over them) and
    its workspace copy, restore both with ``dvc pull`` (default remote) and ``dvc checkout
    --relink``, and rehash. What cannot be restored is named with the stage that recomputes it.
    True if every output matches dvc.lock at the end."""
    root = Path(root)
    entries = lock_entries(root)
    if not entries:
        say(f"ctxrep verify: {root / 'dvc.lock'} records no outputs: nothing to repair")
        return not (no_run_fails and (root / "dvc.yaml").is_file())
    cache = cache_dir(root)
    damaged = [d for stage, path, md5 in entries if (d := diagnose(root, cache, stage, path, md5))]
    if not damaged:
        say("ctxrep verify: every output matches dvc.lock; nothing to repair")
        return True
    declared = declared_outputs(root)
    refused = {d.path: why for d in damaged if (why := removable(root, d.path, declared))}
    for path, why in refused.items():
        say(f"ctxrep verify: dvc.lock names {path}: {why}; left alone, not repaired")
    damaged = [d for d in damaged if d.path not in refused]
    if not damaged:
        return False
    for d in damaged:
        for line in d.problems:
            say(line)
        for what in d.rebuilt:
            say(f"  cache object of {what}: bad or missing; put back from the workspace copy, "
                f"which matches dvc.lock")
        for obj, _, what in d.corrupt:
            say(f"  cache object of {what}: corrupt (bytes differ from its md5); removed "
                f"{os.path.relpath(obj, root)}")
            obj.unlink()
        if any("cannot check" not in p for p in d.problems) and _remove(root, d.path):
            say(f"  workspace copy of {d.path}: removed")
    remote = _default_remote(root)
    to_pull = [d.path for d in damaged if d.corrupt or d.absent]
    pulled = None
    if to_pull and remote:
        say(f"ctxrep verify: dvc pull {' '.join(to_pull)} (remote '{remote[0]}': {remote[1]})")
        pulled = _dvc(root, "pull", *to_pull)
    say(f"ctxrep verify: dvc checkout --relink {' '.join(d.path for d in damaged)}")
    _dvc(root, "checkout", "--relink", *[d.path for d in damaged])

    lost, rerun = 0, []
    for d in damaged:
        again = diagnose(root, cache, d.stage, d.path, d.md5)
        if again is None:
            source = (f"remote '{remote[0]}'" if d.path in to_pull else "the DVC cache")
            say(f"{d.path}: restored from {source}; matches dvc.lock")
            continue
        lost += 1
        if d.stage not in rerun:
            rerun.append(d.stage)
        for obj, _, _ in again.corrupt:  # the remote's copy is corrupt too: never keep it
            obj.unlink()
        bad = [(md5, what) for _, md5, what in again.corrupt] + again.absent
        if not bad:
            why = "its cache objects are intact but checkout did not restore it" + (
                f" (dvc pull: {_dvc_said(pulled)})" if pulled else "")
        elif again.corrupt:
            why = (f"the copy on remote '{remote[0]}' ({remote[1]}) is corrupt too" if remote
                   else "its cache object is corrupt again") + " (removed)"
        elif remote is None:
            why = "no good copy in the DVC cache, and no default DVC remote is configured"
        else:
            why = (f"no good copy in the DVC cache, and remote '{remote[0]}' ({remote[1]}) has "
                   f"none either" + (f" (dvc pull: {_dvc_said(pulled)})" if pulled else ""))
        objects = ", ".join(f"{what} (md5 {md5})" for md5, what in bad)
        say(f"{d.path}: LOST: {objects or d.path}: {why}. `dvc repro {d.stage}` recomputes it")
    if lost:
        say(f"ctxrep verify: {lost} output(s) could not be restored; recompute them with "
            f"`dvc repro {' '.join(rerun)}`, then run `ctxrep verify` again")
        return False
    say(f"ctxrep verify: repaired {len(damaged)} output(s); every output matches dvc.lock")
    return True
