"""DDP under the shared loop: two CPU processes (gloo) take the same steps as one process."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ctxrep.training import loop
from ctxrep.training.distributed import init_distributed
from tests.test_loop import ToyObjective, cfg, weights


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, ckpt, out):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)})
    torch.set_num_threads(1)
    d = init_distributed()
    obj = ToyObjective(batch_size=8)
    obj.model[1].p = 0.0  # dropout masks depend on the micro-batch shape, not on the math
    loop.train(obj, cfg(steps=6, checkpoint_every=0), ckpt, dist_info=d)
    if rank == 0:
        torch.save(weights(obj.model), out)
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_match_one_on_the_same_global_batch(tmp_path):
    single = ToyObjective(batch_size=8)
    single.model[1].p = 0.0
    loop.train(single, cfg(steps=6, checkpoint_every=0), tmp_path / "single")
    out = tmp_path / "ddp.pt"
    mp.spawn(_worker, args=(2, _free_port(), tmp_path / "ddp", out), nprocs=2, join=True)
    assert torch.allclose(torch.load(out, weights_only=True), weights(single.model), atol=1e-6)
