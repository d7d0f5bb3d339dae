"""``python -m ctxrep.launch stages/<stage>.py``: start a training stage with as many processes
as the ``launch`` params say, the way ``dvc.yaml`` starts the pretraining stages.

One process on one machine: the stage itself, in place of this process. More: ``torchrun``,
each process a DDP rank: ``--standalone`` on one machine; on several, a static rendezvous at
``CTXREP_RDZV_ENDPOINT`` (host:port of the first machine) with ``CTXREP_NODE_RANK`` (0 on the
first machine, whose rank 0 writes the outputs that its DVC records). Where the rendezvous is
and which machine is which are facts of the cluster, not of the results, so they come from the
environment; how many processes ran is a param, and the stage refuses to train with any other
number (:func:`ctxrep.training.distributed.init_distributed`).
"""

from __future__ import annotations

import os
import shutil
import sys

RDZV_ENDPOINT_ENV, NODE_RANK_ENV = "CTXREP_RDZV_ENDPOINT", "CTXREP_NODE_RANK"


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


def main(argv: list[str] | None = None) -> None:
    from ctxrep import config

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].endswith(".py"):
        raise SystemExit("usage: python -m ctxrep.launch stages/<stage>.py")
    try:
        p = config.load_section("launch", config.read_params())
    except config.ParamError as e:
        raise SystemExit(f"ctxrep.launch: bad params: {e}") from e
    cmd = command(args[0], p.nproc_per_node, p.nnodes)
    sys.stdout.flush()
    os.execv(cmd[0], cmd)  # the stage (or torchrun) takes this process's place: DVC waits on it


if __name__ == "__main__":
    main()
