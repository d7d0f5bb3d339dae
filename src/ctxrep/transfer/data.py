"""Task data as transfer sees it: the canonical splits, subsampled the same way everywhere."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxrep import seeds
from ctxrep.data import tasks as registered_tasks
from ctxrep.data.readers import DataError
from ctxrep.batching import bucket_by_length

# Training batches of a task model hold examples of similar length, sorted within shuffled
# pools of this many batches. A BiLSTM runs as many time steps as its batch's longest text,
# and a Transformer pads to it, so random batches mixing short and long sentences cost about
# twice the work; small pools keep each batch's membership changing from epoch to epoch.
BUCKET_POOL_BATCHES = 4


def training_batches(lengths: Sequence[int], batch_size: int, seed: int) -> list[list[int]]:
    """One epoch of a task model's training batches: positions into ``lengths``, seeded."""
    return bucket_by_length(lengths, batch_size, random.Random(seed), BUCKET_POOL_BATCHES)


class TaskUnavailable(RuntimeError):
    pass


def task_dir(task: str) -> Path:
    return Path("data/raw/tasks") / task


def load_splits(task: str):
    """Every split of a fetched task (a ``DatasetDict``), its fetch manifest checked first;
    :class:`TaskUnavailable` where no location served the task."""
    import datasets

    from ctxrep.data.sources import verify

    manifest_path = task_dir(task) / "MANIFEST.json"
    if not manifest_path.exists():
        raise DataError(manifest_path, f"missing; run fetch_tasks@{task} first")
    manifest = verify(task_dir(task))
    if not manifest.get("available"):
        raise TaskUnavailable(manifest.get("reason", f"task {task} is unavailable"))
    return datasets.load_from_disk(str(task_dir(task) / "dataset"))


# The split a task is evaluated on, in order of preference after transfer.common.eval_split:
# a task published as train/test keeps its test file as `test` and is evaluated on it.
EVAL_SPLIT_FALLBACK = ("validation", "test")


def evaluated_split(task: str, available, asked: str) -> str:
    """``asked`` (``transfer.common.eval_split``) where ``task`` has it, else its ``validation``
    split, else its ``test`` split."""
    for name in (asked, *EVAL_SPLIT_FALLBACK):
        if name in available:
            return name
    raise DataError(task_dir(task) / "dataset",
                    f"task {task}: no split to evaluate on: it has {sorted(available)}, and "
                    f"transfer.common.eval_split={asked!r}; name one of its files "
                    f"{' or '.join(EVAL_SPLIT_FALLBACK)} in its read_mirror")


def load_task(task: str, common) -> tuple[dict, str]:
    """``({"train": Dataset, <evaluated split>: Dataset}, <evaluated split>)``, subsampled by
    ``transfer.common``."""
    dd = load_splits(task)
    eval_split = evaluated_split(task, dd, common.eval_split)
    return {"train": subsample(dd["train"], common.max_train_examples),
            eval_split: subsample(dd[eval_split], common.max_eval_examples)}, eval_split


@dataclass
class CellData:
    """What every seed of a cell trains and is scored on."""

    task: str
    method: str
    kind: str                  # the task's kind (:mod:`ctxrep.kinds`)
    metrics: str | Sequence[str]  # the task's metric module(s); the first names the primary score
    splits: dict               # "train" and the evaluated split → Dataset
    eval_split: str
    train_idx: list[int]       # rows of splits["train"] trained on
    dev_idx: list[int]         # rows of splits["train"] held out to select on
    patience: int              # dev evaluations without improvement before stopping


def subsample(dataset, n: int):
    if not n or n >= len(dataset):
        return dataset
    order = np.random.default_rng(seeds.SUBSAMPLE).permutation(len(dataset))[:n]
    return dataset.select(sorted(order.tolist()))


def spec(task: str):
    return registered_tasks.get(task)
