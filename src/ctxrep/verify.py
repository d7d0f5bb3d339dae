"""``ctxrep verify [--repair]``: every output rehashed and compared with dvc.lock, and mended.

- ``ctxrep verify`` checks every output in the workspace against dvc.lock
  (:func:`ctxrep.lockfile.verify_workspace`);
- ``ctxrep verify --repair`` (:func:`repair_workspace`) mends what it finds: DVC never rehashes
  its cache either, so a corrupt cache object is checked out (``dvc checkout``), re-linked
  (``--relink``) and kept (``dvc pull`` finds it present) without a word. Repair removes each
  corrupt object and the bad workspace copy, restores them with ``dvc pull`` + ``dvc checkout
  --relink`` and rehashes; what no remote holds is named with the stage that recomputes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.lockfile import (REPAIR_HINT, cache_dir, check_output, lock_entries, md5_file,
                             verify_workspace)


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
