"""MLflow runs of the pipeline: one parent run per pipeline run, one nested run per stage.

**Where.** The store is ``sqlite:///<repo root>/mlflow.db`` (absolute) and the experiment
``ctxrep``'s artifact root is ``<repo root>/mlartifacts``, fixed when the experiment is created.
Under ``dvc exp run --temp`` or ``--queue`` a stage runs in a copy of the repo under
``<repo root>/.dvc/tmp/exps/...`` that DVC deletes afterwards; the root is the ``DVC_ROOT`` that
DVC gives every stage command (the main repo's root, also for experiments), else it is found
above such a copy, so every experiment lands in the same store and artifact root.
``MLFLOW_TRACKING_URI`` overrides the store; pointing at an ``mlflow server`` (``http(s)://``)
the server's own artifact root is used. Telemetry is off.

**A copied or moved checkout.** MLflow stores the artifact root as an absolute path, so the
``mlflow.db`` of a checkout copied with ``cp -a`` (or moved) still names the original's
``mlartifacts``. Every stage therefore checks, before it opens a run, that the store of this
checkout (``<repo root>/mlflow.db``) has its artifact root in this checkout, and if the root is
another folder's ``mlartifacts`` rewrites it, with the artifact links of the runs and models
made there, to this checkout's (:func:`follow_checkout`, one warning line): new artifacts never
land in the other checkout. A store named by ``MLFLOW_TRACKING_URI`` elsewhere, or a root that
is not an ``mlartifacts`` folder, is left as it is.

**Runs.** Each executed stage opens one run, named after the stage and tagged with the git
commit (+ dirty flag), the DVC experiment name when set, the hashes of the stage's inputs and
its params. It is nested under the *pipeline run* of the ``make repro`` / ``dvc exp run`` /
``dvc repro`` that started it (see :func:`pipeline_key`): a parent run tagged with the DVC
experiment name, the git commit and every param, which holds the headline metrics (logged by
the report stage). A transfer cell's run has one nested run per seed (:meth:`StageRun.child`).

**Runs left RUNNING.** A stage killed with -9 cannot end its run. Every run records the process
that owns it (tags ``host``, ``pid`` and ``pid_start``, the process's start time, so a reused pid
is not mistaken for the owner); a pipeline run is owned by the stage that last reopened it. At
the start of every stage, so also at the start of every pipeline run, :func:`close_orphans`
marks KILLED every RUNNING run whose owner on this host is gone, whichever stage it belongs to:
a killed stage that the next run skips or restores from the run cache is closed too. Runs
owned by a process on another host are left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
from pathlib import Path
from typing import Iterator

from filelock import FileLock

from ctxrep.workspace import dvc_process

log = logging.getLogger(__name__)

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

_SECRET_WORDS = ("token", "password", "secret", "key", "credential")
EXPERIMENT = "ctxrep"
# Set by `make repro` (ctxrep.repro) to a fresh id per pipeline run; see pipeline_key().
PIPELINE_ENV = "CTXREP_PIPELINE_RUN"
PARENT_TAG = "mlflow.parentRunId"
# CTXREP_MLFLOW=0 runs the stages without MLflow runs (DVC still records everything, and every
# output is the same): for quick iterations, and the tests whose assertions are about outputs.
# Opening a stage's run costs a few seconds (MLflow's import and its SQLite store).
SWITCH_ENV = "CTXREP_MLFLOW"


def enabled() -> bool:
    """Whether stages log MLflow runs (on unless ``CTXREP_MLFLOW`` is 0, false or off)."""
    return os.environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "off")


def repo_root(start: Path | None = None) -> Path:
    """The project root, seen through a ``dvc exp`` temporary copy if we are in one.

    Under DVC (``DVC_ROOT`` set for every stage command; for experiments DVC points it at the
    main repo, not at the temporary copy) that root; else the folder above
    ``.dvc/tmp/exps/...``, else the nearest folder above with ``dvc.yaml`` or ``.git``."""
    if start is None and os.environ.get("DVC_ROOT"):
        return Path(os.environ["DVC_ROOT"]).resolve()
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


def is_server(uri: str) -> bool:
    """A tracking server (its own artifact store) rather than a local database or folder."""
    return uri.startswith(("http://", "https://", "databricks"))


def pipeline_key() -> tuple[str, str]:
    """A key shared by every stage of one pipeline run and by no other pipeline run, and where
    it came from: ``(key, source)``.

    A stage cannot see its siblings, so the key is derived from what one invocation of the
    pipeline shares:

    1. ``$CTXREP_PIPELINE_RUN`` (``env``): ``make repro`` sets a fresh uuid per run; set it
       yourself to group runs by hand.
    2. the DVC process that runs the stages (``dvc``): every stage command is a child of the
       ``dvc repro`` / ``dvc exp run`` process (or, for queued experiments, of the
       ``dvc exp exec-run`` process a worker starts per experiment). Its pid with its start
       time is unique on a host (a pid alone is reused); the host name and the DVC experiment
       name (``DVC_EXP_NAME``, when DVC sets one) are added, so two experiments never share it.
    3. no DVC above us (a stage script run by hand, ``process``): this process alone is the
       pipeline run.
    """
    if os.environ.get(PIPELINE_ENV):
        return os.environ[PIPELINE_ENV], "env"
    import hashlib

    import psutil

    proc, source = dvc_process(), "dvc"
    if proc is None:
        proc, source = psutil.Process(), "process"
    ident = f"{socket.gethostname()}:{proc.pid}:{proc.create_time():.3f}:" \
            f"{os.environ.get('DVC_EXP_NAME', '')}"
    return f"{source}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}", source


def git_state(root: Path) -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = git("rev-parse", "HEAD") or "unknown"
    # dvc.lock is rewritten by DVC after every stage of the run itself: not a local change.
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                     ":(exclude)dvc.lock"))
    return {"git_commit": commit, "git_dirty": str(dirty).lower()}


def input_hashes(stage: str, cwd: Path | None = None) -> dict:
    """md5 of each dependency of ``stage``, as DVC computes it.

    An upstream output's hash is read from its stage's ``dvc.lock`` entry (final by the time
    this stage starts); any other dep (code, params files) is hashed by DVC itself."""
    from ctxrep.lockfile import dvc_stage, lock_outputs

    cwd = cwd or Path.cwd()
    outs = lock_outputs(cwd)
    try:
        with dvc_stage(stage, cwd) as defined:
            hashes = {}
            for dep in defined.deps:
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


def _log_params(client, run_id: str, params: dict) -> None:
    """``params`` flattened (credentials masked), once, as MLflow params."""
    from mlflow.entities import Param

    flat = flatten(params)
    client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in flat.items()])


class StageRun:
    """Handle on one run (a stage's, or a seed's inside it): metrics per step and at the end,
    params, artifacts, nested runs, and the pipeline run above it (``parent_id``).

    Every call names its run explicitly (``MlflowClient``), so a nested run never receives
    what was meant for its parent."""

    def __init__(self, client, run, parent_id: str | None = None, tags: dict | None = None):
        self.client, self.run, self.parent_id = client, run, parent_id
        self._tags = tags or {}
        self.last_step = 0  # the highest step logged so far: where final values go

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    def log_metrics(self, metrics: dict, step: int | None = None, run_id: str | None = None) -> None:
        """``metrics`` at ``step``; without one (final and summary values) at the last step
        logged so far, so that a history never jumps back to step 0."""
        import time

        from mlflow.entities import Metric

        if step is None:
            step = self.last_step if run_id in (None, self.run_id) else 0
        elif run_id in (None, self.run_id):
            self.last_step = max(self.last_step, int(step))
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, int(step)) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if batch:
            self.client.log_batch(run_id or self.run_id, metrics=batch)

    def log_params(self, params: dict) -> None:
        _log_params(self.client, self.run_id, params)

    def set_tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)

    def log_artifact(self, path: Path | str, artifact_path: str | None = None,
                     run_id: str | None = None) -> None:
        """A file, or a folder (as ``<artifact_path>/<its name>/``), under ``artifact_path``."""
        path, run_id = Path(path), run_id or self.run_id
        if path.is_dir():
            where = f"{artifact_path}/{path.name}" if artifact_path else path.name
            self.client.log_artifacts(run_id, str(path), where)
        else:
            self.client.log_artifact(run_id, str(path), artifact_path)

    def log_pipeline_metrics(self, metrics: dict) -> None:
        """Metrics on the pipeline run (the headline numbers), not on this stage's run."""
        if self.parent_id:
            self.log_metrics(metrics, run_id=self.parent_id)

    def log_pipeline_artifact(self, path: Path | str, artifact_path: str | None = None) -> None:
        """An artifact of the pipeline run (see :meth:`log_artifact`)."""
        if self.parent_id:
            self.log_artifact(path, artifact_path, run_id=self.parent_id)

    @contextlib.contextmanager
    def child(self, name: str, params: dict | None = None) -> Iterator["StageRun"]:
        """A run nested under this one (e.g. one seed of a transfer cell), FINISHED when the
        block ends, FAILED if it raises. It carries this run's ``stage`` and owner tags,
        so a stage killed with -9 has its nested runs closed with it."""
        tags = {**self._tags, PARENT_TAG: self.run_id, "run_kind": "nested"}
        run = self.client.create_run(self.run.info.experiment_id, run_name=name, tags=tags)
        handle = StageRun(self.client, run, self.parent_id, self._tags)
        if params:
            handle.log_params(params)
        status = "FAILED"
        try:
            yield handle
            status = "FINISHED"
        finally:
            self.client.set_terminated(run.info.run_id, status=status)


def discard(run: StageRun) -> None:
    """Delete ``run`` (a stage run that changed nothing, e.g. ``locate_data`` in a ``make repro``
    that finds every stage up to date), and its pipeline run if no other stage run is in it:
    a no-op repro leaves no empty pipeline run behind. Deleted runs are hidden in the UI and
    searches; ``mlflow gc`` removes them for good."""
    client = run.client
    client.delete_run(run.run_id)
    if not run.parent_id:
        return
    exp_id = run.run.info.experiment_id
    others = client.search_runs([exp_id], max_results=1, filter_string=(
        f"tags.`{PARENT_TAG}` = '{run.parent_id}'"))
    if not others:
        client.delete_run(run.parent_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _started(pid: int) -> float | None:
    """The start time of process ``pid`` (seconds since the epoch), None if unknown."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def owner_tags() -> dict:
    """Tags naming this process as the owner of a run: host, pid and the pid's start time."""
    return {"host": socket.gethostname(), "pid": str(os.getpid()),
            "pid_start": f"{_started(os.getpid()) or 0:.3f}"}


def owner_gone(tags: dict) -> bool:
    """Whether the process a run's tags name as its owner is known to be gone: it ran on this
    host and its pid is no longer alive, or is alive but started at another time (a reused
    pid). A run of another host, or with no owner tags, is never judged gone."""
    pid = tags.get("pid", "")
    if tags.get("host") != socket.gethostname() or not pid.isdigit():
        return False
    if not _alive(int(pid)):
        return True
    try:
        recorded = float(tags.get("pid_start") or 0)
    except ValueError:
        return False
    started = _started(int(pid))
    return bool(recorded) and started is not None and abs(started - recorded) > 1.0


def close_orphans(client, stage: str | None = None, keep: str | None = None) -> list[str]:
    """Mark KILLED the runs still RUNNING whose owning process on this host is gone (a stage
    killed with -9 cannot end its own run): stage runs, their nested runs, pipeline runs, of
    ``stage`` only or (None) of every stage; and the pipeline run above a closed stage run
    unless it is ``keep`` (the current one) or a live run still runs in it. Returns the ids
    of the runs closed."""
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    where = "attributes.status = 'RUNNING'"
    if stage is not None:
        where += f" and tags.stage = '{stage}'"
    closed, parents = [], set()
    for run in client.search_runs([exp.experiment_id], filter_string=where, max_results=10_000):
        tags = run.data.tags
        if run.info.run_id == keep or not owner_gone(tags):
            continue
        client.set_terminated(run.info.run_id, status="KILLED")
        closed.append(run.info.run_id)
        if tags.get("run_kind") == "stage" and tags.get(PARENT_TAG):
            parents.add(tags[PARENT_TAG])
    for parent in sorted(parents - {keep} - set(closed)):
        if client.get_run(parent).info.status != "RUNNING":
            continue
        running = client.search_runs([exp.experiment_id], max_results=1, filter_string=(
            f"tags.`{PARENT_TAG}` = '{parent}' and attributes.status = 'RUNNING'"))
        if not running:  # a stage of another host, or a live one, may still be working in it
            client.set_terminated(parent, status="KILLED")
            closed.append(parent)
    if closed:
        log.warning("MLflow: marked %d run(s) %sKILLED: their process on this host is gone",
                    len(closed), f"of {stage} " if stage else "")
    return closed


def _experiment_id(mlflow, uri: str, root: Path) -> str:
    """The ``ctxrep`` experiment, created on first use with its artifact root fixed: beside the
    store, never in the working directory (under ``dvc exp run --temp/--queue`` a copy that DVC
    deletes); on a server, the server's own artifact root. The root of an existing experiment in
    this checkout's own store is made to follow the checkout (:func:`follow_checkout`)."""
    exp = mlflow.get_experiment_by_name(EXPERIMENT)
    if exp is not None:
        if own_store(uri, root):
            follow_checkout(uri, exp.artifact_location, artifact_root(root))
        return exp.experiment_id
    location = None if is_server(uri) else artifact_root(root)
    return mlflow.create_experiment(EXPERIMENT, artifact_location=location)


ARTIFACTS_DIR = "mlartifacts"


def artifact_root(root: Path) -> str:
    """The artifact root of the store in checkout ``root``: ``<root>/mlartifacts`` as a URI."""
    return (root / ARTIFACTS_DIR).as_uri()


def own_store(uri: str, root: Path) -> bool:
    """Whether ``uri`` is the SQLite store of checkout ``root`` (``<root>/mlflow.db``), whose
    artifacts belong in that checkout; a store elsewhere may be shared on purpose."""
    if not uri.startswith("sqlite:///"):
        return False
    return Path(uri.removeprefix("sqlite:///")).resolve() == (root / "mlflow.db").resolve()


# Columns that hold artifact locations, per table of MLflow's SQL schema (a table or column that
# an older schema lacks is skipped).
LOCATION_COLUMNS = (("runs", "artifact_uri"), ("logged_models", "artifact_location"),
                    ("model_versions", "storage_location"), ("model_versions", "source"))


def follow_checkout(uri: str, current: str, wanted: str) -> bool:
    """Point the ``ctxrep`` experiment of the SQLite store ``uri`` at ``wanted`` (this
    checkout's artifact root) when its ``current`` root is another folder's ``mlartifacts``
    (the store was copied or moved with its checkout), and the artifact links of the runs and
    models logged there with it, so they read this checkout's copy of the files. Any other root
    (chosen on purpose: a shared folder, ``s3://``) is left alone. Returns whether it rewrote.

    MLflow offers no call to change an experiment's artifact root, hence SQL; the caller holds
    the store's lock, so no stage of this checkout writes to it meanwhile."""
    import sqlite3

    if current == wanted or not current.startswith("file://") \
            or Path(current.removeprefix("file://")).name != ARTIFACTS_DIR:
        return False
    with contextlib.closing(sqlite3.connect(uri.removeprefix("sqlite:///"), timeout=60)) as db:
        with db:  # one transaction: the store is rewritten whole or not at all
            db.execute("UPDATE experiments SET artifact_location = ? WHERE name = ? AND "
                       "artifact_location = ?", (wanted, EXPERIMENT, current))
            links = sum(_rewrite_prefix(db, table, column, current, wanted)
                        for table, column in LOCATION_COLUMNS)
    log.warning("MLflow: this store was made in another checkout (artifact root %s); its "
                "artifact root is now this checkout's, %s (%d artifact link(s) rewritten)",
                current, wanted, links)
    return True


def _rewrite_prefix(db, table: str, column: str, old: str, new: str) -> int:
    """Replace the prefix ``old`` (the whole value, or a folder of it) by ``new`` in ``column``
    of ``table``; the number of rows changed (0 where the schema has no such column)."""
    columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    if column not in columns:
        return 0
    cursor = db.execute(
        f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
        f"WHERE {column} = ? OR substr({column}, 1, ?) = ?",
        (new, len(old) + 1, old, len(old) + 1, old + "/"))
    return cursor.rowcount


def pipeline_run(client, experiment_id: str, key: str, source: str,
                 params: dict | None = None) -> str:
    """The id of the pipeline run ``key`` (see :func:`pipeline_key`): found by its tag, or
    created (by the first stage of that pipeline run) with the DVC experiment name, the git
    commit and the whole params file."""
    found = client.search_runs([experiment_id], max_results=1, filter_string=(
        f"tags.pipeline_key = '{key}' and tags.run_kind = 'pipeline'"))
    if found:
        return found[0].info.run_id
    exp_name = os.environ.get("DVC_EXP_NAME", "")
    tags = {"run_kind": "pipeline", "pipeline_key": key, "pipeline_key_source": source,
            **owner_tags(), **git_state(Path.cwd())}
    if exp_name:
        tags["dvc_exp_name"] = exp_name
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_exp_baseline_rev"] = os.environ["DVC_EXP_BASELINE_REV"]
    if params and dict.get(params, "profile") is not None:
        tags["profile"] = str(dict.get(params, "profile"))
    run = client.create_run(experiment_id, run_name=exp_name or f"pipeline {key[-6:]}",
                            tags=tags)
    if params:
        _log_params(client, run.info.run_id, dict(params))
    return run.info.run_id


@contextlib.contextmanager
def store_errors(uri: str) -> Iterator[None]:
    """A SQLite store another process holds locked (SQLAlchemy's "database is locked", after
    SQLite's own wait) becomes one line that says what to do, not a traceback."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 — SQLAlchemy's OperationalError, wrapped by MLflow
        if "database is locked" not in str(e):
            raise
        from ctxrep.errors import InputError

        raise InputError(f"the MLflow store {uri} is locked by another process (an `mlflow ui` "
                         f"or another run writing to it): wait for it or stop it, or run without "
                         f"MLflow ({SWITCH_ENV}=0 make repro)") from None


@contextlib.contextmanager
def stage_run(stage: str, params: dict | None = None,
              pipeline_params: dict | None = None) -> Iterator[StageRun]:
    """Open the MLflow run of one executed stage (name = ``stage``, params ``params``) nested
    under its pipeline run (created with ``pipeline_params`` if this stage is the first)."""
    import mlflow

    logging.getLogger("alembic").setLevel(logging.WARNING)
    root = repo_root()
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    key, source = pipeline_key()
    # Stages of queued experiments start together; the first to touch a new SQLite store creates
    # its schema, and two doing so at once collide ("duplicate column"): serialise that step,
    # and the creation of the experiment and of the pipeline run.
    lock = (FileLock(uri.removeprefix("sqlite:///") + ".lock", timeout=600)
            if uri.startswith("sqlite:///") else contextlib.nullcontext())
    with lock, store_errors(uri):
        client = mlflow.MlflowClient(uri)  # its first use of a new store creates the schema
        experiment_id = _experiment_id(mlflow, uri, root)
        mlflow.set_experiment(experiment_id=experiment_id)
        parent_id = pipeline_run(client, experiment_id, key, source, pipeline_params)
    # Runs of any stage whose process died (a stage killed with -9 that this run skips or
    # restores from the run cache would otherwise stay RUNNING for ever).
    close_orphans(client, keep=parent_id)
    owner = owner_tags()
    from mlflow.entities import RunTag

    # This stage now owns the pipeline run: if it dies, the next start closes that run too.
    client.log_batch(parent_id, tags=[RunTag(k, v) for k, v in owner.items()])
    client.update_run(parent_id, status="RUNNING")
    tags = {"stage": stage, **owner, "run_kind": "stage", "pipeline_key": key,
            **git_state(Path.cwd())}
    if os.environ.get("DVC_EXP_NAME"):
        tags["dvc_exp_name"] = os.environ["DVC_EXP_NAME"]
    if os.environ.get("DVC_EXP_BASELINE_REV"):
        tags["dvc_exp_baseline_rev"] = os.environ["DVC_EXP_BASELINE_REV"]
    if params and params.get("profile") is not None:  # searchable: tags.profile = 'claims'
        tags["profile"] = str(params["profile"])
    tags.update({k: str(v) for k, v in input_hashes(stage).items()})
    status = "FAILED"
    try:
        with mlflow.start_run(run_name=stage, parent_run_id=parent_id, tags=tags) as run:
            if params:
                _log_params(client, run.info.run_id, params)
            log.info("MLflow run %s (%s) in pipeline run %s, %s", run.info.run_id, stage,
                     parent_id, uri)
            yield StageRun(client, run, parent_id,
                           {k: tags[k] for k in ("stage", "pid", "pid_start", "host",
                                                 "pipeline_key")})
            status = "FINISHED"
    finally:
        # The pipeline run ends with its last stage; the next stage of it reopens it.
        client.set_terminated(parent_id, status=status)
