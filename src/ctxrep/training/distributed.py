"""DDP under ``torchrun``: which process this is, and its device."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed(expected_world: int | None = None) -> Dist:
    """DDP under torchrun (``WORLD_SIZE`` > 1): NCCL on CUDA, gloo on CPU. ``expected_world``
    (a stage's ``launch`` params): the number of processes the run must have, or a
    :class:`~ctxrep.config.ParamError` before any work, so the weights are never written by
    another number of processes than ``dvc.lock`` records."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if expected_world is not None and world != expected_world:
        from ctxrep.config import ParamError

        raise ParamError("launch.nproc_per_node", expected_world,
                         f"the number of processes this run has ({world}, torchrun's "
                         f"WORLD_SIZE): start the stage with `python -m ctxrep.launch --torchrun "
                         f"stages/<stage>.py` (dvc.yaml does), or set launch.nproc_per_node and "
                         f"launch.nnodes to what you start by hand")
    if world == 1:
        return Dist()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
    return Dist(dist.get_rank(), world, local)


def global_sum(value: int | float, d: Dist) -> float:
    """``value`` summed over every rank (the value itself in one process)."""
    if d.world == 1:
        return value
    total = torch.tensor(float(value), dtype=torch.float64)
    if torch.cuda.is_available():
        total = total.cuda()
    dist.all_reduce(total)
    return float(total)


def rank_share(count, d: Dist) -> float:
    """``world * count / (count summed over ranks)``: the factor that turns this rank's mean over
    its ``count`` items into its part of the global batch's mean, once DDP has averaged the
    ranks' gradients (sum_r share_r * mean_r / world = sum_r sum_r / sum_r count_r). 1 in one
    process. Every rank must call it at the same point (an all-reduce)."""
    if d.world == 1:
        return 1.0
    return d.world * float(count) / max(global_sum(float(count), d), 1.0)


def default_device(d: Dist) -> torch.device:
    return torch.device(f"cuda:{d.local_rank}") if torch.cuda.is_available() else torch.device("cpu")
