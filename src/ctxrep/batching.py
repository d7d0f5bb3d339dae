"""Batches of similar-length examples, for every training loop that pads to a batch's longest."""

from __future__ import annotations

import random
from collections.abc import Sequence


def bucket_by_length(
    lengths: Sequence[int], batch_size: int, rng: random.Random, pool_batches: int = 50
) -> list[list[int]]:
    """Batches of indices with similar lengths, in random order (less padding, still shuffled).

    Indices are shuffled, cut into pools of pool_batches * batch_size, sorted by length within a
    pool and split into batches; the batch order is then shuffled. The last batch may be smaller.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: expected a positive integer, got {batch_size!r}")
    indices = list(range(len(lengths)))
    rng.shuffle(indices)
    pool = pool_batches * batch_size
    batches = []
    for begin in range(0, len(indices), pool):
        chunk = sorted(indices[begin : begin + pool], key=lambda i: lengths[i])
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches
