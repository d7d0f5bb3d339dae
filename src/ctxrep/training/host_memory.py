"""glibc's allocator, told to keep the memory a CPU training step frees for the next step.

A training step allocates and frees the same tens of megabytes every step: activations, saved
tensors, the softmax's dense (V, P) gradient. glibc serves a block above its mmap threshold
(128 KiB at first, then adapting) with a fresh mapping and unmaps it on free, so the next step
faults every page in again: about 2,500 page faults a step at the default biLM, about 3 ms of
a 75 ms step (``bench/bench_bilm.py``). With the threshold at its maximum (32 MiB) and the trim
threshold above the process's working set, freed blocks stay in the heap and are reused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's largest on 64-bit (4 * 1024 * 1024 * sizeof(long))
TRIM_THRESHOLD = 1024**3


@functools.cache
def keep_freed_memory() -> bool:
    """Process-wide, once; changes where memory comes from, never a value computed. Returns
    False, changing nothing, where the C library has no ``mallopt`` (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    log.debug("glibc mallopt: freed blocks kept for reuse: %s", done)
    return done
