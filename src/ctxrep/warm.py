"""Stages forked from a warm process (``CTXREP_WARM=1``: ``make repro`` and ``make test`` set it;
a plain ``dvc repro`` starts each stage afresh).

A tiny stage spends four fifths of its CPU importing the same libraries (torch, torch._dynamo,
datasets, DVCLive, evaluate, MLflow): docs/notebook/2026-12-07-test-budget-processes.md. With
the switch on, ``python -m ctxrep.launch`` asks a *warm process*, which imported them once, to
fork the stage:

    launcher ──unix socket──▶ warm process ──fork──▶ the stage (runpy, in the launcher's
      (DVC waits on it)       (one per key)             cwd, argv, environment and stdio)

- **One warm process per key**: the interpreter, the installed packages and the environment
  variables that the preloaded libraries read when they load (threads, MKL's branch, the Hub's
  offline switches...). A run under another compute mode gets another warm process.
- **Only third-party libraries are preloaded**, never ctxrep's own modules: the child imports
  those itself, so an edited module never runs stale while DVC records its new manifest.
- **The stage dies with its launcher**: the warm process watches each launcher's connection
  and kills the stage's process group when it closes (the launcher dies with DVC: ctxrep.launch).
- **The stage sees its launcher as its parent** where it asks for its pipeline run
  (``LAUNCHER_ENV``: :func:`ctxrep.workspace.dvc_process` walks up from the launcher).
- The warm process is single-threaded (a selector loop), so forking it is safe; it exits after
  ``IDLE_SECONDS`` without a request, or when :func:`stop` is called on its folder (at the end
  of ``ctxrep repro``, or of the test session). Where anything fails before the stage starts,
  the launcher starts the stage as it always did. Linux only (``SCM_RIGHTS``, ``fork``):
  elsewhere the switch does nothing.

The stage's bytes are the same either way: ``.ci/run`` runs the tiny pipeline with the switch on
and, beside it, off, and compares their ``dvc.lock``.

Protocol: the launcher sends one JSON line {argv, cwd, env, rlimits, launcher} with its fds 0,
1, 2 (SCM_RIGHTS); the warm process answers {"pid": n} when the stage starts and
{"exit": status} when it ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import shutil
import sys
import time
from pathlib import Path

SWITCH_ENV = "CTXREP_WARM"
FOLDER_ENV = "CTXREP_WARM_DIR"        # where the sockets are (default: a per-user folder)
LAUNCHER_ENV = "CTXREP_WARM_LAUNCHER"  # set in the stage: its launcher's pid
IDLE_SECONDS = 120
# The launcher's resource limits, set again in the stage (a fork has the warm process's).
RLIMITS = ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_CPU", "RLIMIT_DATA",
           "RLIMIT_STACK")
PRELOADED = ("torch", "torch._dynamo", "datasets", "evaluate", "dvclive.live", "mlflow",
             "mlflow.store.tracking.sqlalchemy_store")
# Read by those libraries (or the C libraries under them) when they load, not when called.
IMPORT_TIME_PREFIXES = ("OMP_", "MKL_", "KMP_", "OPENBLAS_", "DNNL_", "ONEDNN_", "ATEN_",
                        "TORCH_", "PYTORCH_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_",
                        "MLFLOW_CONFIGURE_LOGGING", "LD_", "PYTHON")


def enabled(env=os.environ) -> bool:
    return sys.platform.startswith("linux") and \
        env.get(SWITCH_ENV, "0").strip().lower() in ("1", "true", "on")


def key(env=os.environ) -> str:
    """What a warm process's loaded libraries depend on."""
    import importlib.metadata

    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    loaded = sorted(f"{k}={v}" for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES))
    text = "\n".join([sys.executable, sys.version, *packages, *loaded])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def folder(env=os.environ) -> Path:
    if env.get(FOLDER_ENV):
        return Path(env[FOLDER_ENV])
    return Path(env.get("XDG_RUNTIME_DIR") or "/tmp") / f"ctxrep-warm-{os.getuid()}"


def socket_path(name: str) -> Path:
    where = folder()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    return where / f"{name}.sock"


def own_folder(env) -> Path | None:
    """A socket folder of the caller's own, named in ``env`` (``CTXREP_WARM_DIR``), for the warm
    processes of a run or a test session; ``None`` where stages start afresh or ``env`` already
    names a folder (someone else's). :func:`close` ends it."""
    if not enabled(env) or env.get(FOLDER_ENV):
        return None
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="ctxrep-warm-"))  # short: a socket path has 107 bytes
    env[FOLDER_ENV] = str(folder)
    return folder


def close(folder: Path | None) -> None:
    """Stop the warm processes of a folder :func:`own_folder` made, and remove it."""
    if folder is not None:
        stop(folder)
        shutil.rmtree(folder, ignore_errors=True)


def stop(where: Path) -> None:
    """End every warm process whose socket is in ``where`` (stages they run go on to their end)."""
    for pid_file in where.glob("*.pid"):
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


# ------------------------------------------------------------------------------------------
# the launcher's side


def run(script: str, args: list[str]) -> int | None:
    """Run ``script args`` in a stage forked by the warm process of this environment; its exit
    status, or None where no warm process could take it (the caller then execs it)."""
    path = socket_path(key())
    conn = _connect(path) or _start_and_connect(path)
    if conn is None:
        return None
    with conn:
        import resource

        limits = {name: resource.getrlimit(getattr(resource, name)) for name in RLIMITS}
        request = {"argv": [script, *args], "cwd": os.getcwd(), "env": dict(os.environ),
                   "rlimits": limits, "launcher": os.getpid()}
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        reader = conn.makefile("r")
        started = reader.readline()
        if not started:
            _say_afresh(f"the warm process ({path}) closed the connection before the stage "
                        f"started")
            return None
        pid = json.loads(started)["pid"]

        def forward(signum, _frame):
            try:
                os.killpg(pid, signum)
            except ProcessLookupError:
                pass
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, forward)
        ended = reader.readline()
        status = json.loads(ended)["exit"] if ended else 1
        return status if status >= 0 else 128 - status  # killed by signal N: 128 + N, as a shell says


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except OSError:
        conn.close()
        return None


def _start_and_connect(path: Path, wait_s: float = 60.0) -> socket.socket | None:
    import fcntl

    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one launcher starts it; the others then connect
        conn = _connect(path)
        if conn is not None:
            return conn
        path.unlink(missing_ok=True)
        with open(path.with_suffix(".log"), "w") as log:  # why a warm process could not start
            server = subprocess.Popen([sys.executable, "-m", "ctxrep.warm", str(path)],
                                      start_new_session=True, stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT, close_fds=True)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and server.poll() is None:
            conn = _connect(path)
            if conn is not None:
                return conn
            time.sleep(0.05)
    log = path.with_suffix(".log")
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    why = f"exited with status {server.returncode}" if server.poll() is not None \
        else f"was not ready after {wait_s:.0f} s"
    _say_afresh(f"no warm process: it {why}" + (f"; its last lines ({log}): " + " | ".join(tail)
                                                    if tail else ""))
    return None


def _say_afresh(why: str) -> None:
    """One line on stderr: the stage starts afresh (same bytes, a few seconds more), and why."""
    print(f"ctxrep.launch: {why}. Starting the stage afresh ({SWITCH_ENV}=0 does so without "
          f"trying)", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------
# the warm process


def serve(path: Path) -> None:
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    path.with_suffix(".pid").write_text(str(os.getpid()))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path) + ".tmp")
    os.replace(str(path) + ".tmp", path)  # connectable only once everything is loaded
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    children: dict[int, socket.socket] = {}   # stage pid -> its launcher's connection
    last = time.monotonic()
    while children or time.monotonic() - last < IDLE_SECONDS:
        for event, _ in selector.select(timeout=0.2):
            if event.data == "accept":
                conn, _ = listener.accept()
                pid = _fork_stage(conn, listener)
                if pid is None:
                    conn.close()
                    continue
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            else:  # a launcher's connection closed: it died, and its stage dies with it
                try:
                    os.killpg(event.data, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                selector.unregister(event.fileobj)
        for pid, conn in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                try:
                    conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
                except OSError:
                    pass
                if conn in [k.fileobj for k in selector.get_map().values()]:
                    selector.unregister(conn)
                conn.close()
                del children[pid]
                last = time.monotonic()
    path.unlink(missing_ok=True)
    path.with_suffix(".pid").unlink(missing_ok=True)


def _fork_stage(conn: socket.socket, listener: socket.socket) -> int | None:
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if len(fds) != 3 or not message.endswith(b"\n"):
        return None
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:  # the stage
        code = 1
        try:
            os.setpgid(0, 0)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(signum, signal.SIG_DFL)
            listener.close()
            conn.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            import resource

            for name, (soft, hard) in request.get("rlimits", {}).items():
                resource.setrlimit(getattr(resource, name), (soft, hard))
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.environ[LAUNCHER_ENV] = str(request["launcher"])
            sys.argv = list(request["argv"])
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
            # The warm process imported ctxrep (and this module) to start: the stage imports its
            # own copy of every project module from the files as they are now.
            for name in [m for m in sys.modules if m == "ctxrep" or m.startswith("ctxrep.")]:
                del sys.modules[name]
            import runpy

            try:
                runpy.run_path(sys.argv[0], run_name="__main__")
                code = 0
            except SystemExit as end:
                code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
        except BaseException:  # noqa: BLE001 — print it as Python would, then exit 1
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            import atexit

            atexit._run_exitfuncs()  # what the stage registered (ctxrep.stage's trace and dump)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
