"""What every stage entry point shares: logging, params, the MLflow run, the closing line.

A stage script is then only its own work::

    with stage("tokenize", "tokenize") as ctx:
        meta = build(...)
        ctx.summary(docs=..., tokens=...)
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ctxrep import compute, config, workspace
from ctxrep.errors import (NO_SPACE_EXIT, TOO_LARGE_EXIT, InputError, file_too_large, no_space_left,
                           no_space_message, too_large_message)
from ctxrep.families import is_left_to_right_module
from ctxrep.io import write_json
from ctxrep.lockfile import verify_stage_inputs

log = logging.getLogger("ctxrep")
# Each stage's cost: data, parameters, FLOPs, a declared DVC output of its stage (not a metric).
COMPUTE_DIR = Path("reports/compute")
# Its wall time, and throughput and seconds to each held-out point: these differ run to run, so
# they go to MLflow and to this folder, which no stage reads and DVC does not record (so
# dvc.lock is the same bytes on every run); `ctxrep timings` tabulates it.
TIMINGS_DIR = Path("reports/timings")


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("CTXREP_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr, force=True)
    for noisy in ("alembic", "mlflow", "urllib3", "filelock", "datasets", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    store_log = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _RaisedAfterwards) for f in store_log.filters):
        store_log.addFilter(_RaisedAfterwards())
    quiet_library_progress_bars()


class _RaisedAfterwards(logging.Filter):
    """Drops MLflow's log of a SQLite store error ("SQLAlchemy database error", with its
    traceback): MLflow raises the same error right after it, and the stage reports it once (one
    line for a locked store, a full disk or ``ulimit -f``; the traceback for anything else)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


def quiet_library_progress_bars() -> None:
    """No progress bars from the libraries a stage calls (datasets' "Generating train split",
    transformers' "Loading weights", MLflow's "Downloading artifacts"): in a log each is a run of
    carriage-return redraws; the stage's own bars and log lines say where it is. A library that
    is already imported (by the stage script's imports) is told directly, later ones by their
    environment variables."""
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()


@dataclass
class StageContext:
    name: str
    params: dict                      # the whole merged params (profile applied)
    section: object                   # the validated dataclass of this stage's section
    run: object = None                # tracking.StageRun
    _summary: dict = field(default_factory=dict)
    _compute: dict | None = None
    _timings: dict = field(default_factory=dict)
    _unchanged: bool = False

    def unchanged(self) -> None:
        """This run reproduced its outputs byte for byte (a check that runs every time, like
        ``locate_data``): its MLflow run is deleted at the end instead of kept, and so is
        the pipeline run if nothing else ran in it."""
        self._unchanged = True

    def summary(self, **items) -> None:
        self._summary.update(items)

    def compute(self, *, amount: int, unit: str, params: int | None = None,
                flops: float | None = None, **timings) -> None:
        """This stage's line in the report's compute ledger: the data it processed (``amount``
        ``unit``, e.g. training tokens), the parameters it trained or ran and estimated FLOPs,
        written to ``reports/compute/<stage>.json`` when it ends. ``timings`` (numbers such as
        ``tokens_per_s``, or a pretraining stage's ``heldout_curve`` against training seconds)
        go with the stage's wall time to ``reports/timings/<stage>.json`` and to MLflow."""
        self._compute = {"amount": int(amount), "unit": unit, "params": params,
                         "flops": None if flops is None else float(f"{flops:.4g}")}
        self._timings = dict(timings)

    def log_params(self, params: dict) -> None:
        """Params this stage resolved itself (e.g. a transfer cell's), logged to its MLflow run."""
        if self.run:
            self.run.log_params(params)

    def tag(self, key: str, value: str) -> None:
        """A fact about how this run ran (e.g. which kernel ran the LSTMs), as an MLflow tag."""
        if self.run:
            self.run.set_tag(key, value)

    def write_metrics(self, path: Path | str, metrics: dict) -> None:
        """Small metrics JSON for ``dvc metrics``, also logged to MLflow."""
        write_json(path, metrics)
        if self.run:
            self.run.log_metrics(_numbers(metrics))


def _numbers(d: dict) -> dict:
    from ctxrep.tracking import flatten

    return {k: v for k, v in flatten(d).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


@contextlib.contextmanager
def stage(name: str, section: str | None, track: bool = True,
          logged_params: dict | None = None) -> Iterator[StageContext]:
    """Validate params (before any work), open the MLflow run, print one line at the end.

    ``section`` is the params section this stage reads (None: the stage validates its own,
    e.g. transfer cells, and passes what to log as ``logged_params``). A :class:`ParamError`
    anywhere exits with status 2 and the key named. A full disk (``OSError`` ENOSPC, or what
    ``torch.save`` raises instead: ``RuntimeError ... unexpected pos``) exits with status
    :data:`~ctxrep.errors.NO_SPACE_EXIT` and one line saying so: outputs are written to a
    temporary sibling and renamed when complete, so the ones already finished are kept."""
    stop_on_signals()
    try:
        with _stage(name, section, track, logged_params) as ctx:
            yield ctx
    except KeyboardInterrupt as e:
        how = e.args[0] if e.args else "Ctrl-C (SIGINT)"
        log.error("%s: stopped by %s; the outputs finished so far are kept (each is written "
                  "whole or not at all), and a rerun resumes from the last checkpoint", name, how)
        raise SystemExit(143 if "SIGTERM" in str(how) else 130) from None
    except Exception as e:
        too_large, path = file_too_large(e)  # first: a short write under `ulimit -f` reads
        if too_large:                        # as a full disk to no_space_left
            log.error("%s: %s", name, too_large_message(path))
            raise SystemExit(TOO_LARGE_EXIT) from e
        full, path = no_space_left(e)
        if full:
            log.error("%s: %s", name, no_space_message(path))
            raise SystemExit(NO_SPACE_EXIT) from e
        raise


REPEAT_WINDOW_S = 2.0  # a second stop signal within this is the same request


def stop_on_signals() -> None:
    """SIGINT and SIGTERM both stop a stage as Ctrl-C does (KeyboardInterrupt: partial outputs
    are removed, the MLflow run is closed). SIGINT is set explicitly: a process started in the
    background by a shell (`make repro &`) inherits it ignored, so `kill -INT` did nothing."""
    first: list[float] = []

    def stop(signum, _frame):
        # One stop: the same signal often comes twice at once (from `make repro`, which passes
        # it to the whole run, and from the parent-death signal when DVC dies of it), and that
        # second one must not interrupt the clean-up of the first; a signal seconds later is
        # someone asking again, and a clean-up that hangs then ends at once.
        code = 143 if signum == signal.SIGTERM else 130
        if first:
            if time.monotonic() - first[0] < REPEAT_WINDOW_S:
                return
            os._exit(code)
        first.append(time.monotonic())
        raise KeyboardInterrupt("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C (SIGINT)")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # a torchrun rank: it dies with its agent
        from ctxrep.launch import die_with_parent

        die_with_parent()


# `dvc exp run -S key=bad` writes params.yaml before any stage can refuse the value.
def bad_params_hint() -> str:
    """What to do about a value `dvc exp run -S key=bad` already wrote into params.yaml: rewrite
    the file for the profile that ran (its name is in the file), or take the committed one."""
    import yaml

    try:
        profile = yaml.safe_load(Path(config.PARAMS_FILE).read_text()).get("profile")
    except Exception:  # noqa: BLE001 — a hint must never fail
        profile = None
    named = isinstance(profile, str) and re.fullmatch(r"[A-Za-z0-9_-]+", profile)
    again = (f"`ctxrep check-params {profile} --write` rewrites it for profile '{profile}' "
             f"without the override, " if named else "")
    return (f"params.yaml keeps the rejected value: {again}`git checkout params.yaml` restores "
            f"the committed one; `make repro SET='key=value …'` checks overrides before writing "
            f"anything")


@contextlib.contextmanager
def _stage(name: str, section: str | None, track: bool,
           logged_params: dict | None) -> Iterator[StageContext]:
    from ctxrep import tracking

    setup_logging()
    start = time.perf_counter()
    trace_reads(name)
    atexit.register(config.write_trace, name)
    try:  # before params are read: one run owns the checkout, with the params it started with
        params_at_start = workspace.params_sha256()
        owner = workspace.claim()
    except workspace.WorkspaceTaken as e:
        log.error("%s: %s", name, e)
        raise SystemExit(workspace.TAKEN_EXIT) from e
    try:
        params = config.read_params()
        sec = config.load_section(section, params=params) if section else None
        compute.enter(config.load_section("compute", params=params))
    except config.ParamError as e:
        log.error("%s: bad params: %s\n%s", name, e, bad_params_hint())
        raise SystemExit(2) from e
    except compute.NotLaunched as e:
        log.error("%s: %s", name, e)
        raise SystemExit(2) from e
    try:
        verify_stage_inputs(name)  # under DVC: upstream outputs are the bytes dvc.lock records
    except InputError as e:
        log.error("%s: bad input: %s", name, e)
        raise SystemExit(2) from e
    ctx = StageContext(name, params, sec)
    profile = dict.get(params, "profile")  # provenance only: not a value the stage computes with
    log.info("%s: profile '%s'", name, profile)
    logged = {"profile": profile, **(logged_params or {})}
    if sec is not None:
        logged[section] = config.as_dict(sec)
    if track and int(os.environ.get("RANK", "0")) != 0:
        track = False  # under torchrun: rank 0's run is the stage's run
    if track and not tracking.enabled():
        log.info("%s: no MLflow run (%s=%s)", name, tracking.SWITCH_ENV,
                 os.environ[tracking.SWITCH_ENV])
        track = False
    try:
        if track:
            # The pipeline run records every param; read around the params trace (these are
            # provenance, not values this stage computes with).
            every_param = {k: v for k, v in dict.items(params)}
            with tracking.stage_run(name, logged, pipeline_params=every_param) as run:
                ctx.run = run
                yield ctx
                run.log_metrics({"wall_s": time.perf_counter() - start,
                                 **{k: v for k, v in ctx._timings.items() if k.endswith("_s")}})
            if ctx._unchanged:
                tracking.discard(run)
        else:
            yield ctx
    except config.ParamError as e:
        log.error("%s: bad params: %s", name, e)
        raise SystemExit(2) from e
    except InputError as e:
        log.error("%s: bad input: %s", name, e)
        raise SystemExit(2) from e
    try:  # MKL ran the branch the params ask for (torch may have loaded during the stage)
        compute.check_honoured(config.load_section("compute", params=params).isa)
    except compute.NotHonoured as e:
        log.error("%s: %s", name, e)
        raise SystemExit(2) from e
    try:  # DVC records the params it reads after the stage: they must be the ones it ran with
        workspace.check_params(owner, started=params_at_start)
    except workspace.WorkspaceTaken as e:
        log.error("%s: %s", name, e)
        raise SystemExit(workspace.TAKEN_EXIT) from e
    seconds = time.perf_counter() - start
    if ctx._compute is not None and int(os.environ.get("RANK", "0")) == 0:
        write_json(COMPUTE_DIR / f"{name}.json", ctx._compute)
        write_json(TIMINGS_DIR / f"{name}.json", {"wall_s": round(seconds, 1), **ctx._timings})
    items = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                      for k, v in ctx._summary.items())
    print(f"[{name}] done in {seconds:.1f} s: {items}", flush=True)


TASK_MODULES = "ctxrep.data.tasks."  # imported by name, not by code


def found_by_name(module: str) -> bool:
    """A task's module or a left-to-right family's (the families package's other modules, the
    core families and their records, are imported by code, and are in every manifest)."""
    return module.startswith(TASK_MODULES) or is_left_to_right_module(module)


def trace_reads(stage_name: str) -> None:
    """With ``CTXREP_PARAMS_TRACE`` set (the dependency tests), note every file under the working
    directory this process opens for reading, and write the list to
    ``<trace dir>/<stage>.files.json`` at exit, with the task and family modules it ran in
    ``<stage>.modules.json``: a check that dvc.yaml declares what is read."""
    folder = os.environ.get(config.TRACE_ENV)
    if not folder:
        return
    import json

    root, seen = Path.cwd().resolve(), set()

    def hook(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if "r" in mode and "+" not in mode and not flags & (os.O_WRONLY | os.O_RDWR):
                path = Path(os.fsdecode(args[0]))
                seen.add(str(path if path.is_absolute() else root / path))

    def dump():
        # an output being built in `.<name>.tmp-<pid>` is the output itself
        inside = {re.sub(r"(^|/)\.([^/]+)\.tmp-\d+(?=/|$)", r"\1\2", os.path.relpath(p, root))
                  for p in seen if p.startswith(str(root) + os.sep)}
        inside = sorted(p for p in inside if (root / p).is_file())  # not failed lookups
        out = Path(folder) / f"{stage_name}.files.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(inside))
        # The modules found by name (tasks, left-to-right families), which no code manifest
        # holds: those this process ran, for the check that its stage lists each.
        named = sorted(m for m in sys.modules if found_by_name(m))
        (Path(folder) / f"{stage_name}.modules.json").write_text(json.dumps(named))

    sys.addaudithook(hook)
    atexit.register(dump)
