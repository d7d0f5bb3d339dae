"""``make repro PROFILE=<name>``: compose the profile and run the pipeline, safely.

    ctxrep repro PROFILE [OVERRIDE...]      (make repro PROFILE=… SET='key=value …')

1. The profile name is checked (a plain word naming ``conf/profile/<name>.yaml``) and the
   params it composes to, with the overrides (``dvc exp run -S`` syntax), are validated before
   DVC touches any output: a rejected value exits 2 and ``params.yaml`` stays as it was.
2. One run per checkout: a lock of the project's own (``.dvc/tmp/ctxrep-repro.lock``); a second
   ``make repro`` stops at once, naming the PID of the one that holds it. (For experiments in
   parallel, queue them: ``dvc exp run --queue`` then ``dvc queue start -j 2``.) A DVC
   process that outlived a killed ``make repro`` still owns the checkout (:mod:`ctxrep.workspace`,
   which every stage checks): the next ``make repro`` stops, naming it.
3. ``dvc exp run`` can leave HEAD detached at the branch's commit when it is killed; the branch
   is recorded before the run (``.dvc/tmp/ctxrep-branch``) and re-attached after it, and at the
   start of the next run if the last one was killed with -9.
4. ``dvc exp run -S profile=<name>`` then runs, with no shell between us and it, with
   ``CTXREP_PIPELINE_RUN`` set to a fresh id: every stage's MLflow run of this pipeline run is
   nested under one parent run (``ctxrep.tracking.pipeline_key``), and with stages forked
   from warm processes of this run's own (:mod:`ctxrep.warm`: torch, datasets, DVCLive and
   MLflow imported once, not once per stage; ``CTXREP_WARM=0`` starts each stage afresh, as a
   plain ``dvc repro`` does), which end with the run.
5. After a successful run, ``dvc.lock`` loses the entries of stages the pipeline no longer
   defines (a cell of another profile's grid): DVC keeps them forever, so the lock would record
   stages that did not run, and DVC re-reads and re-writes the whole lock after every stage.
   The run cache still holds them: switching back restores those cells without running them.
6. Then every output is rehashed against ``dvc.lock`` (``ctxrep verify``): DVC trusts what it
   restores from its cache, so a corrupt object would otherwise reach the workspace silently.
7. Last, when the run's params are HEAD's, ``ctxrep compare HEAD`` (:mod:`ctxrep.compare`)
   prints whether it reproduced the committed run: the same bytes, or every claim's verdict
   within noise. A verdict that flipped ends ``make repro`` with exit status 4.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from ctxrep import run_record, warm, workspace
from ctxrep.config.composition import effective_overrides
from ctxrep.preflight import check
from ctxrep.tracking import PIPELINE_ENV
from ctxrep.verify import run_verify

LOCK = Path(".dvc/tmp/ctxrep-repro.lock")
NOT_REPRODUCED_EXIT = 4  # the run ran and was recorded; a claim's verdict differs from HEAD's
BRANCH = Path(".dvc/tmp/ctxrep-branch")


def say(message: str) -> None:
    print(f"ctxrep: {message}", file=sys.stderr, flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


def reattach_head() -> None:
    """If HEAD is detached at the commit of the branch recorded before the last run, check the
    branch out again; if HEAD moved elsewhere, say how to return."""
    if not BRANCH.exists() or git("symbolic-ref", "-q", "HEAD"):
        return
    branch = BRANCH.read_text().strip()
    if branch and git("rev-parse", "HEAD") == git("rev-parse", "--verify", "-q", branch):
        subprocess.run(["git", "checkout", "-q", branch], check=False)
        say(f"re-attached HEAD to {branch}")
    elif branch:
        say(f"WARNING: HEAD is detached; return with: git checkout {branch}")


def acquire_lock():
    """An exclusive lock held for the life of this process; exits 3 naming the holder if taken."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    handle = open(LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        say(f"another `make repro` is running in this checkout (PID {holder}); wait for it, or "
            f"queue experiments with `dvc exp run --queue` and `dvc queue start`")
        raise SystemExit(3)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def up_to_date(profile: str, overrides: list[str], root: Path = Path(".")) -> bool:
    """Whether a run would change nothing: the params composed for ``profile`` are params.yaml's
    bytes, locate_data would record what data/sources/ holds (the stage DVC always reruns), and
    ``dvc status`` lists no other stage. Then `make repro` need not start `dvc exp run`, which
    always makes an experiment and an MLflow pipeline run. Any doubt (no lock, an error): False."""
    import tempfile

    from ctxrep.config.composition import PARAMS_FILE, compose

    lock, params_file = root / "dvc.lock", root / PARAMS_FILE
    if not lock.is_file() or not params_file.is_file():
        return False
    try:
        with tempfile.TemporaryDirectory() as tmp:
            composed = compose(profile, list(overrides), root=root, out=Path(tmp) / PARAMS_FILE)
            if (Path(tmp) / PARAMS_FILE).read_bytes() != params_file.read_bytes():
                return False
        if not sources_unchanged(composed, root):
            return False
        dvc = os.environ.get("DVC") or shutil.which("dvc") or "dvc"
        proc = subprocess.run([dvc, "status", "--json"], cwd=root, capture_output=True,
                              text=True, timeout=300)
        import json

        changed = json.loads(proc.stdout or "null") if proc.returncode == 0 else None
        return isinstance(changed, dict) and set(changed) <= {"locate_data"}
    except Exception:  # noqa: BLE001 — when in doubt, run: DVC decides
        return False


def sources_unchanged(params: dict, root: Path) -> bool:
    """locate_data's records, computed now, are the bytes data/sources/ holds (the mirror, or
    whichever location serves each data set, has not changed)."""
    import json

    from ctxrep.data import sources, tasks

    data = params["data"]
    names = [data["corpus"], *params["tasks"]]
    folder = root / sources.LOCATED_DIR
    if sorted(p.name for p in folder.glob("*.json")) != sorted(f"{n}.json" for n in names):
        return False
    for name in names:
        entry = sources.locate(tasks.dataset(name), data["source"])
        if json.loads((folder / f"{name}.json").read_text()) != json.loads(json.dumps(entry)):
            return False
    return True


def say_resolved(resolved: list[str]) -> None:
    """Say what ``compute.isa: auto`` became on this machine, when it is not the portable mode,
    and what that means for the bytes."""
    from ctxrep import compute

    if f"compute.isa={compute.NATIVE}" in resolved:
        say(f"compute.isa: auto is native on this CPU ({compute.cpu_vendor() or 'not x86-64'}): "
            f"MKL honours its AVX2 branch on Intel CPUs only, so the bytes are this CPU's and "
            f"`ctxrep compare` checks the results against the committed run within noise; "
            f"SET='compute.isa=compatible' gives the same bytes on every x86-64 CPU, at about "
            f"half the speed (docs/setup.md)")


def wait_for_group(pgid: int, grace: float = 30.0) -> None:
    """Wait until no process of the group ``pgid`` is left; after ``grace`` seconds, say which
    are and stop them (SIGTERM, then SIGKILL)."""
    import time

    def alive() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    deadline = time.monotonic() + grace
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    for signum, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not alive():
            return
        say(f"processes of the pipeline run outlived DVC (group {pgid}); sending "
            f"{signal.Signals(signum).name}")
        with contextlib.suppress(OSError):
            os.killpg(pgid, signum)
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)


def dvc_command() -> list[str]:
    """How to start DVC: the DVC installed beside this Python (the Makefile's ``$DVC``, or none
    named) runs through :mod:`ctxrep.dvc_cli`, which says once what DVC warns about for every
    output a new stage has not made yet; any other ``$DVC`` (a test's fake) runs as it is."""
    named, own = os.environ.get("DVC"), Path(sys.executable).parent / "dvc"
    if named and not (os.path.exists(named) and own.exists() and os.path.samefile(named, own)):
        return [named]
    return [sys.executable, "-m", "ctxrep.dvc_cli"]


def prune_lock(root: Path = Path(".")) -> list[str]:
    """Drop the ``dvc.lock`` entries of stages ``dvc.yaml`` no longer defines (with the current
    params.yaml), and put the rest in ``dvc.yaml``'s order; returns the names dropped.

    DVC appends the entry of a stage it has not locked before: a stage dropped by one run (an
    empty grid) and defined again by the next would otherwise come back at the end, and the
    same results would give another ``dvc.lock``. A lock already in order is left byte for
    byte."""
    lock = root / "dvc.lock"
    if not lock.exists():
        return []
    from dvc.repo import Repo
    from dvc.utils.serialize import load_yaml, modify_yaml

    with Repo(str(root)) as repo:
        order = [stage.name for stage in repo.index.stages]
    rank = {name: i for i, name in enumerate(order)}
    # Read the names first, so that a lock with nothing to change is left byte for byte.
    locked = list(load_yaml(str(lock)).get("stages", {}))
    stale = sorted(set(locked) - set(rank))
    kept = [name for name in locked if name in rank]
    if stale or kept != sorted(kept, key=rank.__getitem__):
        with modify_yaml(str(lock)) as data:  # DVC's own writer: the lock keeps its format
            entries = data["stages"]
            for name in sorted(kept, key=rank.__getitem__):
                entries[name] = entries.pop(name)  # re-inserted in dvc.yaml's order
            for name in stale:
                del entries[name]
    return stale


def add_arguments(parser) -> None:
    parser.add_argument("profile", help="a profile of conf/profile/")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="key=value, as `dvc exp run -S` takes it")


def run(args) -> int:
    # `make repro SET='a.b=1 c=[x,y]'`: make's overrides come through the environment, split
    # here (no shell, so no globbing of `[x,y]`).
    try:
        overrides = shlex.split(os.environ.get("SET", ""))
    except ValueError as e:  # an unbalanced quote
        say(f"SET={os.environ.get('SET', '')!r}: {e}; quote each key=value as a shell would, "
            f"e.g. SET='transfer.common.seeds=[0,1] grid.tasks=[ud_pos]'")
        return 2
    return main(args.profile, [*args.overrides, *overrides])


def main(profile: str, overrides: list[str]) -> int:
    if not Path(".git").exists():
        say("make repro needs a git checkout (DVC experiments)")
        return 2
    if check(profile, overrides) != 0:
        return 2
    resolved = effective_overrides(profile, overrides)[len(overrides):]
    say_resolved(resolved)
    overrides = [*overrides, *resolved]
    index_lock = Path(git("rev-parse", "--git-path", "index.lock") or ".git/index.lock")
    if index_lock.exists():
        # `dvc exp run` stashes params.yaml and dvc.lock on its way in; with git's index locked
        # it fails half-way and leaves them in the stash. Refuse before it starts.
        say(f"git's index is locked ({index_lock}): another git command is running in this "
            f"checkout, or one was killed. If none is running, remove the lock (rm "
            f"{index_lock}) and run again; nothing was changed")
        return 2
    lock = acquire_lock()
    if up_to_date(profile, overrides):
        say("up to date: params, data and every stage as dvc.lock records them; nothing to run "
            "(no DVC experiment, no MLflow run)")
        lock.close()
        return 0
    owner = workspace.live_owner()  # a DVC process left running by a killed `make repro`
    if owner is not None:
        say(f"a pipeline run still owns this checkout: {owner.describe()}; wait for it to end "
            f"(or stop it), then run again")
        lock.close()
        return workspace.TAKEN_EXIT
    reattach_head()  # a previous run killed with -9 may have left it detached
    branch = git("symbolic-ref", "-q", "--short", "HEAD")
    if branch:
        BRANCH.write_text(branch + "\n")
    dvc = dvc_command()
    sets = [f"profile={profile}", *overrides]
    cmd = [*dvc, "exp", "run", *(arg for value in sets for arg in ("-S", value))]
    print("dvc exp run " + " ".join(f"-S {shlex.quote(value)}" for value in sets), flush=True)
    env = {**os.environ, PIPELINE_ENV: uuid.uuid4().hex}  # one MLflow parent run per run
    warm_folder = own_warm_processes(env)
    started = run_record.start(profile)  # metrics/run.json: commit, clock
    stashes = len(git("stash", "list").splitlines())
    # DVC and its stages run in a process group of their own, which every SIGINT / SIGTERM /
    # SIGHUP / SIGQUIT this process gets is passed to whole: DVC alone ignores SIGINT while a
    # stage runs, and dies on SIGTERM without stopping the stage. Were this process killed
    # with -9, DVC dies with it (ctxrep.dvc_cli), and each stage with DVC (ctxrep.launch).
    # Handlers are set before DVC starts: an ignored SIGINT (a background `make repro &`)
    # would be inherited by DVC and every stage.
    proc, pending = None, []

    def forward(signum, _frame):
        if proc is None:
            pending.append(signum)  # before DVC started: passed on as soon as it has
            return
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signum)

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
    previous = {signum: signal.signal(signum, forward) for signum in handled}
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    for signum in pending:
        forward(signum, None)
    try:
        rc = proc.wait()
        wait_for_group(proc.pid)  # a stage DVC did not wait for ends before make does
    finally:
        for signum, handler in previous.items():  # Ctrl-C during verify stops verify again
            signal.signal(signum, handler)
        reattach_head()
        lock.close()
        warm.close(warm_folder)
    if len(git("stash", "list").splitlines()) > stashes:
        say("DVC left workspace changes (params.yaml, dvc.lock) in `git stash` (stash@{0}): "
            "`git stash pop` puts them back")
    if rc == 0:
        try:
            stale = prune_lock()
        except Exception as e:  # the run itself succeeded: say so, and why the lock was kept
            say(f"WARNING: dvc.lock not pruned ({type(e).__name__}: {e})")
            stale = []
        if stale:
            say(f"dvc.lock: dropped {len(stale)} entries of stages this pipeline no longer "
                f"defines ({', '.join(stale[:3])}{', …' if len(stale) > 3 else ''})")
        run_record.finish(started)  # metrics/run.json, git-tracked: not a DVC output
        # What DVC skipped or restored (checked out, pulled) it trusts: a corrupt cache object
        # that is read-only is never rehashed by DVC. Rehash every output once, here.
        if run_verify(".", say=lambda line: print(line, file=sys.stderr, flush=True)) != 0:
            return 1
        if compare_with_head() != 0:
            return NOT_REPRODUCED_EXIT
        say("done. Report: reports/report.md; numbers: dvc metrics show / dvc exp show")
    return rc


def own_warm_processes(env: dict) -> Path | None:
    """Turn on warm stages in ``env`` (unless ``CTXREP_WARM`` says otherwise) in a socket folder
    of this run's own, which the caller stops and removes at the end; ``None`` when stages start
    afresh or the folder is someone else's (``CTXREP_WARM_DIR`` set: the test suite's)."""
    env.setdefault(warm.SWITCH_ENV, "1")
    return warm.own_folder(env)


def compare_with_head(root: Path = Path(".")) -> int:
    """After a run of the params HEAD records: ``ctxrep compare HEAD``'s table, and its exit
    status (non-zero when a claim's verdict flipped). A run of other params (another profile,
    overrides) is another experiment: it is not compared, and says so."""
    from ctxrep import compare
    from ctxrep.errors import InputError

    committed = compare.git_show("HEAD", compare.PARAMS, root)
    if committed is None or compare.git_show("HEAD", compare.SUMMARY, root) is None:
        say("ctxrep compare: HEAD records no run's results; nothing to compare with")
        return 0
    if not compare.same_experiment(committed, (root / compare.PARAMS).read_text()):
        say("ctxrep compare: skipped, this run's params.yaml is not HEAD's (another profile or "
            "overrides); `ctxrep compare` prints the table anyway")
        return 0
    try:
        comparison = compare.compare("HEAD", root)
    except InputError as e:
        say(f"ctxrep compare: {e}")
        return 0
    except Exception as e:  # noqa: BLE001 — the run is recorded: a broken comparison must not hide it
        say(f"ctxrep compare: WARNING: could not compare with HEAD ({type(e).__name__}: {e})")
        return 0
    print("\n".join(comparison.lines()), flush=True)
    return comparison.exit_status

