"""One MLflow run per executed stage, in one SQLite store.

The store is ``sqlite:///<repo root>/mlflow.db`` (absolute). Under ``dvc exp run --temp`` or
``--queue`` a stage runs in a copy of the repo at ``<repo root>/.dvc/tmp/exps/...``; the root is
found above that copy, so every experiment lands in the same store. ``MLFLOW_TRACKING_URI``
overrides it. Telemetry is off.

Each run is named after the stage and tagged with the git commit (+ dirty flag), the DVC
experiment name when set, the hashes of the stage's inputs, and its params section (flattened).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import yaml
from filelock import FileLock

log = logging.getLogger(__name__)

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

_SECRET_WORDS = ("token", "password", "secret", "key", "credential")


def repo_root(start: Path | None = None) -> Path:
    """The project root, seen through a ``dvc exp`` temporary copy if we are in one."""
    here = (start or Path.cwd()).resolve()
    parts = here.parts
    for i in range(len(parts) - 3):
        if parts[i:i + 3] == (".dvc", "tmp", "exps"):
            return Path(*parts[:i])
    for p in (here, *here.parents):
        if (p / "dvc.yaml").exists() or (p / ".git").exists():
            return p
    return here


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{repo_root() / 'mlflow.db'}"


def git_state(root: Path) -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {"git_commit": commit, "git_dirty": str(dirty).lower()}


def input_hashes(stage: str, cwd: Path | None = None) -> dict:
    """md5 of each dependency of ``stage``, as DVC computes it.

    An upstream output's hash is read from its stage's ``dvc.lock`` entry (final by the time
    this stage starts); any other dep (code, params files) is hashed by DVC itself."""
    cwd = cwd or Path.cwd()
    lock = cwd / "dvc.lock"
    stages = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}) if lock.exists() else {}
    outs = {o["path"]: o.get("md5") for s in stages.values() for o in s.get("outs", [])}
    try:
        from dvc.repo import Repo

        with Repo(str(cwd)) as repo:
            (dvc_stage,) = repo.stage.collect(stage)
            hashes = {}
            for dep in dvc_stage.deps:
                path = dep.def_path
                if path in outs:
                    hashes[f"input:{path}"] = outs[path]
                elif not getattr(dep, "is_params", False) and dep.exists:
                    hashes[f"input:{path}"] = dep.get_hash().value
            return hashes
    except Exception as e:  # noqa: BLE001 — provenance must never break a stage
        log.warning("could not read input hashes of %s from DVC: %s", stage, e)
        return {}


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}."))
        elif any(w in k.lower() for w in _SECRET_WORDS) and isinstance(v, str) and v:
            out[key] = "***"  # never log credentials
        else:
            out[key] = v
    return out


class StageRun:
    """Handle on the active run: metrics per step and at the end, artifacts."""

    def __init__(self, mlflow, run):
        self._mlflow, self.run = mlflow, run

    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        clean = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        if clean:
            self._mlflow.log_metrics(clean, step=step)

    def log_artifact(self, path: Path | str) -> None:
        self._mlflow.log_artifact(str(path))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def close_orphans(client, stage: str) -> list[str]:
    """Mark KILLED the runs of ``stage`` still RUNNING whose process on this host is gone (a
    stage killed with -9 cannot end its own run). Returns their ids."""
    exp = client.get_experiment_by_name("ctxrep")
    if exp is None:
        return []
    closed = []
    for run in client.search_runs([exp.experiment_id],
                                  filter_string=f"tags.stage = '{stage}' "
                                                f"and attributes.status = 'RUNNING'"):
        tags = run.data.tags
        if tags.get("host") == socket.gethostname() and tags.get("pid", "").isdigit() \
                and not _alive(int(tags["pid"])):
            client.set_terminated(run.info.run_id, status="KILLED")
            closed.append(run.info.run_id)
    if closed:
        log.warning("MLflow: marked %d run(s) of %s KILLED (their process is gone)", len(closed),
                    stage)
    return closed


@contextlib.contextmanager
def stage_run(stage: str, params: dict | None = None) -> Iterator[StageRun]:
    """Open the MLflow run of one executed stage (name = ``stage``)."""
    import mlflow

    logging.getLogger("alembic").setLevel(logging.WARNING)
    root = repo_root()
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    # Stages of queued experiments start together; the first to touch a new SQLite store creates
    # its schema, and two doing so at once collide ("duplicate column"): serialise that step.
    lock = (FileLock(uri.removeprefix("sqlite:///") + ".lock", timeout=600)
            if uri.startswith("sqlite:///") else contextlib.nullcontext())
    with lock:
        # Artifacts beside the store, not in the working directory (which, under `dvc exp run
        # --temp/--queue`, is a copy that DVC deletes).
        if mlflow.get_experiment_by_name("ctxrep") is None:
            mlflow.create_experiment("ctxrep", artifact_location=(root / "mlartifacts").as_uri())
        mlflow.set_experiment("ctxrep")
    close_orphans(mlflow.MlflowClient(), stage)
    tags = {"stage": stage, "pid": str(os.getpid()), "host": socket.gethostname(),
            **git_state(Path.cwd())}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_exp_baseline_rev"] = os.environ["DVC_EXP_BASELINE_REV"]
    tags.update({k: str(v) for k, v in input_hashes(stage).items()})
    with mlflow.start_run(run_name=stage, tags=tags) as run:
        if params:
            flat = flatten(params)
            mlflow.log_params({k: str(v)[:6000] for k, v in flat.items()})
            mlflow.set_tags({f"param.{k}": str(v)[:5000] for k, v in flat.items()})
        log.info("MLflow run %s (%s) in %s", run.info.run_id, stage, root / "mlflow.db")
        yield StageRun(mlflow, run)
