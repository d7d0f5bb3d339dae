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


def init_distributed() -> Dist:
    """DDP under torchrun (``WORLD_SIZE`` > 1): NCCL on CUDA, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
    return Dist(dist.get_rank(), world, local)


def default_device(d: Dist) -> torch.device:
    return torch.device(f"cuda:{d.local_rank}") if torch.cuda.is_available() else torch.device("cpu")
