"""What the throughput benchmarks share: device sync and the peak-matmul denominator of MFU.

Model FLOP utilisation = (analytic model FLOPs per token × tokens/s) ÷ the best FLOP/s a large
square matmul reaches on the same device, in the same run.
"""

from __future__ import annotations

import time

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_matmul_flops(device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048,
                      seconds: float = 1.0) -> float:
    """Best observed FLOP/s of an n x n x n matmul (2 n^3 FLOPs), run for about ``seconds``."""
    return matmul_flops(n, n, n, device, dtype, seconds)


def matmul_flops(m: int, k: int, n: int, device: torch.device, dtype: torch.dtype = torch.float32,
                 seconds: float = 0.3) -> float:
    """Best observed FLOP/s of one (m x k) @ (k x n) matmul (2 m k n FLOPs): what a shape that
    a model runs many times can reach, beside the peak of a large square one."""
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    a @ b
    repeats = max(4, int(2e8 // (2 * m * k * n)))  # >= 0.2 GFLOP per timing, above the clock's grain
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        synchronize(device)
        best = max(best, repeats * 2 * m * k * n / (time.perf_counter() - start))
    return best
