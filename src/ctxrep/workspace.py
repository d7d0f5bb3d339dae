"""One pipeline run owns the workspace, and computes with the params it started with.

DVC runs every stage as a child of its own process (``dvc repro``, ``dvc exp run``, or the
``dvc exp exec-run`` a queue worker starts per experiment). A second DVC process in the same
checkout breaks the first one's run without either noticing: ``dvc exp run -S …`` rewrites
``params.yaml`` before it fails on DVC's lock, and the running pipeline's next stages read the
other run's params; a ``make repro`` started after only its predecessor's wrapper was killed
runs beside the orphaned DVC process. So each stage, before any work:

1. finds the DVC process above it (none: a stage run by hand, which owns nothing);
2. reads the owner record ``.dvc/tmp/ctxrep-owner.json`` (pid and start time of the owning DVC
   process, and the sha256 of ``params.yaml`` when its first stage started);
3. no owner, or an owner that is gone (its pid dead, or reused by a process started at another
   time): this DVC process becomes the owner, with the current ``params.yaml``;
4. another live owner: the stage stops (exit 3) naming it;
5. the owner is this DVC process: ``params.yaml`` must still have the recorded bytes, at the
   start of the stage and again when it has finished (so DVC never records, nor puts in its run
   cache, a result computed with other params than the ones it would record); otherwise the
   stage stops (exit 3) saying that another run rewrote it.

Queued and ``--temp`` experiments run in their own copy of the repository, with their own
``.dvc/tmp``: they never meet. ``make repro`` (:mod:`ctxrep.repro`) also refuses to start while
a live DVC process owns the checkout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

OWNER = Path(".dvc/tmp/ctxrep-owner.json")
PARAMS = Path("params.yaml")
TAKEN_EXIT = 3  # as a second `make repro` exits


class WorkspaceTaken(RuntimeError):
    """Another run owns this checkout, or rewrote the params this run started with."""


# How DVC's own command line is started: the ``dvc`` script, or a Python module that runs it
# (``make repro`` runs DVC as ``python -m ctxrep.dvc_cli``, :mod:`ctxrep.repro`).
DVC_SCRIPT = "dvc"
DVC_MODULES = ("dvc", "ctxrep.dvc_cli")


def is_dvc(argv: list[str]) -> bool:
    """Whether a process's command line is DVC's: ``dvc …``, ``python …/dvc …``, or
    ``python [flags] -m dvc|ctxrep.dvc_cli …``."""
    if any(os.path.basename(a) == DVC_SCRIPT for a in argv[:2]):
        return True
    # python [-u -X … -W …] -m <module>: the interpreter's own flags may come first
    if "-m" in argv[1:]:
        i = argv.index("-m", 1)
        return i + 1 < len(argv) and argv[i + 1] in DVC_MODULES \
            and all(a.startswith("-") or argv[j - 1] in ("-X", "-W") for j, a in
                    enumerate(argv[1:i], start=1))
    return False


def dvc_process():
    """The nearest ancestor process that is DVC itself (``dvc repro``, ``dvc exp run``, the
    ``dvc exp exec-run`` a queue worker starts per experiment, or ``make repro``'s
    ``python -m ctxrep.dvc_cli exp run``); ``None`` when there is none. A stage forked by a
    warm process (:mod:`ctxrep.warm`) looks from its launcher, the process DVC started."""
    import psutil

    try:
        launcher = os.environ.get("CTXREP_WARM_LAUNCHER")  # ctxrep.warm.LAUNCHER_ENV
        if launcher:
            first = psutil.Process(int(launcher))
            ancestors = [first, *first.parents()]
        else:
            ancestors = psutil.Process().parents()
        for proc in ancestors:
            try:
                argv = proc.cmdline()
            except (psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if is_dvc(argv):
                return proc
    except (psutil.Error, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Owner:
    pid: int
    started: float       # the process's start time: a pid alone is reused
    command: str
    params_sha256: str

    def alive(self) -> bool:
        import psutil

        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) < 0.01
        except psutil.Error:
            return False

    def describe(self) -> str:
        return f"PID {self.pid} ({self.command})"


def params_sha256(path: Path = PARAMS) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def read_owner(path: Path = OWNER) -> Owner | None:
    """The recorded owner; ``None`` when there is none or the record is unreadable (a record
    half-written by a killed process owns nothing)."""
    try:
        return Owner(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``<path>.lock`` for a read-modify-write of the record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def live_owner(path: Path = OWNER) -> Owner | None:
    """The owner of the checkout if it is still running."""
    owner = read_owner(path)
    return owner if owner is not None and owner.alive() else None


def claim(path: Path = OWNER, params: Path = PARAMS) -> Owner | None:
    """Check (and if free, take) the checkout for the DVC process above this one; returns the
    owner (``None`` for a stage run by hand). Raises :class:`WorkspaceTaken`."""
    proc = dvc_process()
    if proc is None:
        return None
    with _locked(path):
        owner = read_owner(path)
        mine = owner is not None and owner.pid == proc.pid and owner.alive() \
            and abs(owner.started - proc.create_time()) < 0.01
        if owner is not None and not mine and owner.alive():
            raise WorkspaceTaken(
                f"another pipeline run owns this checkout: {owner.describe()}. This stage was "
                f"started by PID {proc.pid}; wait for the other run to end, or run experiments "
                f"side by side with `dvc exp run --queue` and `dvc queue start`")
        if not mine:
            owner = Owner(proc.pid, proc.create_time(), " ".join(proc.cmdline()[:6]),
                          params_sha256(params))
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            tmp.write_text(json.dumps(owner.__dict__))
            os.replace(tmp, path)
    check_params(owner, params)
    return owner


def check_params(owner: Owner | None, params: Path = PARAMS, started: str | None = None) -> None:
    """``params.yaml`` still has the bytes its owner's run started with, and (``started``, its
    sha256 when this stage began) the bytes this stage read: DVC records the params it reads
    after the stage, so a stage must never end on params it did not compute with, whether or
    not a DVC process above it was recognised."""
    now = params_sha256(params)
    if owner is not None and now != owner.params_sha256:
        raise WorkspaceTaken(
            f"{params} changed while this pipeline run ({owner.describe()}) was running: "
            f"another run (a `dvc exp run -S …` in this checkout?) rewrote it. This run stops "
            f"rather than compute with another run's params; start it again once the other "
            f"has ended")
    if started is not None and now != started:
        raise WorkspaceTaken(
            f"{params} changed while this stage ran: another command (a `dvc exp run -S …` "
            f"in this checkout?) rewrote it. The stage stops without recording results computed "
            f"with the params it started with under the new ones; run again once the other "
            f"has ended")
