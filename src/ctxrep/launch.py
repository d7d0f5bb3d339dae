"""``python -m ctxrep.launch [--torchrun] stages/<stage>.py [args]``: start a stage the way
``dvc.yaml`` starts every stage, under the instruction set and thread count of its ``compute``
params (:mod:`ctxrep.compute`: environment variables that torch, MKL and oneDNN read when they
load, so they are set here, before the stage's Python starts).

``--torchrun`` (the pretraining stages): as many processes as the ``launch`` params say. One
process on one machine: the stage itself, in place of this process. More: ``torchrun``,
each process a DDP rank: ``--standalone`` on one machine; on several, a static rendezvous at
``CTXREP_RDZV_ENDPOINT`` (host:port of the first machine) with ``CTXREP_NODE_RANK`` (0 on the
first machine, whose rank 0 writes the outputs that its DVC records). Where the rendezvous is
and which machine is which are facts of the cluster, not of the results, so they come from the
environment; how many processes ran is a param, and the stage refuses to train with any other
number (:func:`ctxrep.training.distributed.init_distributed`).
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import sys

RDZV_ENDPOINT_ENV, NODE_RANK_ENV = "CTXREP_RDZV_ENDPOINT", "CTXREP_NODE_RANK"
# Nothing leaves the machine unless a Hub source is chosen: the libraries' usage reports are off
# in every stage, however the pipeline was started (`make` sets them too; a plain `dvc repro`
# does not). A value already in the environment is kept.
NO_TELEMETRY = {"HF_HUB_DISABLE_TELEMETRY": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
                "DO_NOT_TRACK": "1"}


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Ask the kernel to send this process ``signum`` when its parent dies (Linux; elsewhere
    nothing). A stage's parent is DVC, a rank's is the torchrun agent: a stage must never
    outlive the run that would record it (DVC killed with -9, or by a signal it does not pass
    on, used to leave the stage writing outputs and registering models after make had
    exited). The setting survives ``exec``; a parent already gone when it is set is checked."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signum)


def command(script: str, nproc_per_node: int, nnodes: int, env=os.environ) -> list[str]:
    """The command line that runs ``script`` with ``nproc_per_node`` x ``nnodes`` processes."""
    if nproc_per_node == 1 and nnodes == 1:
        return [sys.executable, script]
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or "torchrun"
    if nnodes == 1:
        where = ["--standalone"]
    else:
        endpoint, node_rank = env.get(RDZV_ENDPOINT_ENV, ""), env.get(NODE_RANK_ENV, "")
        host, _, port = endpoint.rpartition(":")
        if not (host and port.isdigit() and node_rank.isdigit() and int(node_rank) < nnodes):
            raise SystemExit(
                f"ctxrep.launch: launch.nnodes={nnodes} needs, on every machine, "
                f"{RDZV_ENDPOINT_ENV}=host:port (the first machine) and {NODE_RANK_ENV}=0..."
                f"{nnodes - 1} (0 on the first); got {endpoint!r} and {node_rank!r} "
                f"(docs/setup.md, 'More than one process')")
        where = [f"--node-rank={node_rank}", f"--master-addr={host}", f"--master-port={port}"]
    return [torchrun, f"--nnodes={nnodes}", f"--nproc-per-node={nproc_per_node}", *where, script]


USAGE = "usage: python -m ctxrep.launch [--torchrun] stages/<stage>.py [args]"


def main(argv: list[str] | None = None) -> None:
    from ctxrep import compute, config

    args = list(sys.argv[1:] if argv is None else argv)
    distributed = bool(args) and args[0] == "--torchrun"
    rest = args[1:] if distributed else args
    if not rest or not rest[0].endswith(".py"):
        raise SystemExit(USAGE)
    script, *script_args = rest
    for name, value in NO_TELEMETRY.items():
        os.environ.setdefault(name, value)
    try:
        params = config.read_params()
        c = config.load_section("compute", params)
        p = config.load_section("launch", params) if distributed else None
    except config.ParamError:
        # The stage reads the same params first thing and stops on them with its own name,
        # exit status 2 and how to mend params.yaml: one place says it.
        c = p = None
    if c is not None:
        if compute.resolve(c.isa) in compute.MKL_BRANCH and not compute.is_x86():
            print(f"ctxrep.launch: compute.isa={c.isa} pins x86-64 kernels; this CPU is "
                  f"{platform.machine()}, so its results will not match an x86-64 run's "
                  f"bytes: set compute.isa=native (or auto) to say so in params.yaml, and check "
                  f"the results with `ctxrep compare` (the committed run's verdicts, within "
                  f"noise)", file=sys.stderr)
        os.environ.update(compute.environment(c.isa, c.threads))
    cmd = command(script, p.nproc_per_node, p.nnodes) if p else [sys.executable, script]
    cmd += script_args
    sys.stdout.flush()
    if os.environ.get("DVC_STAGE"):  # DVC runs it: the stage (or torchrun) dies with DVC
        die_with_parent()
    if p is None or (p.nproc_per_node == 1 and p.nnodes == 1):
        from ctxrep import warm

        if warm.enabled():  # docs/pipeline.md, "How a stage starts"
            status = warm.run(script, script_args)
            if status is not None:
                sys.exit(status)
    os.execv(cmd[0], cmd)  # the stage (or torchrun) takes this process's place: DVC waits on it


if __name__ == "__main__":
    main()
