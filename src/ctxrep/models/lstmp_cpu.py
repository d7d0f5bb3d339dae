"""LSTMP layers as a C++ kernel for CPU training (``lstmp_cpu.cpp`` beside this file).

Same math as ``torch.nn.LSTM(proj_size=P)`` (see ``LstmWithProjection``), split where it is
sequential and where it is not:

    forward:   X_gates = X W_ih^T + b_ih + b_hh          one matmul over all T steps
               for t: a_t, c_t, h_t                       the time loop (2 matmuls, one fused cell loop)
    backward:  for t (reversed): dA_t, dH_total_t         the time loop
               dX = dA W_ih,  dW_ih = dA^T X,  dW_hh = dA^T H_{t-1},  dW_hr = dH_total^T M,
               db = sum dA                                one matmul each, over all T steps

One call takes several independent layers (the biLM's layer l of both directions) and runs each
on its own thread. torch's CPU LSTM with a projection runs each step as a chain of small ATen
calls, each split across the cores, and in backward accumulates the weight gradients one step at
a time through autograd; at the default biLM's batch of 16 that overhead outweighs the matmuls,
and a matmul of 16 (or 400) rows gains little from a second core where a second layer gains a
whole one (``bench/bench_bilm.py`` prints both).

The kernel is compiled once per machine and kernel version with torch's extension builder (g++
and ninja, ~10-30 s), into a folder named by a hash of its source and build flags under torch's
extension cache (``~/.cache/torch_extensions``, or ``$TORCH_EXTENSIONS_DIR``): every clone of
the project, and every copy of the package a test makes, shares one build of the same source.
Where it cannot be built, :func:`kernel` returns None, says why once, and the layer runs
``torch.nn.LSTM``: the same function, different rounding.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import sysconfig
import warnings
from pathlib import Path

import torch
from torch import nn

SOURCE = Path(__file__).with_suffix(".cpp")
log = logging.getLogger(__name__)


@functools.cache
def kernel():
    """The compiled operators (``torch.ops.ctxrep_lstmp``), or None (with one warning) where
    they cannot be built."""
    try:
        import ninja  # the build tool torch's extension builder runs, from the package index

        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        from torch.utils import cpp_extension

        # torch's builder keys its cache on the source's path as well as its text: built from
        # each clone's own file, two clones (or a test's copy of the package) would rebuild it
        # in turn. So the source is built from a copy inside a folder named by what it compiles.
        flags = compiler_flags()
        text = SOURCE.read_bytes()
        build_info = [" ".join(flags), torch.__version__, sysconfig.get_config_var("EXT_SUFFIX") or ""]
        key = hashlib.sha256(b"\0".join([text, *(info.encode() for info in build_info)]))
        root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root())
        build = root / f"ctxrep_lstmp_cpu-{key.hexdigest()[:16]}"
        build.mkdir(parents=True, exist_ok=True)
        source = build / SOURCE.name
        if not source.is_file() or source.read_bytes() != text:
            tmp = build / f".{SOURCE.name}.{os.getpid()}"
            tmp.write_bytes(text)
            os.replace(tmp, source)  # atomic: a concurrent build never reads half a file
        log.info("loading the CPU LSTM kernel (compiled on a machine's first use: about 15 s, once)")
        with build_lock(build):
            cpp_extension.load(name="ctxrep_lstmp_cpu", sources=[str(source)], extra_cflags=flags,
                               build_directory=str(build), is_python_module=False)
        return torch.ops.ctxrep_lstmp
    except Exception as error:  # no compiler, no ninja, a failed build: the slower path still works
        last_line = (str(error).strip().splitlines() or [""])[-1]
        warnings.warn(f"ctxrep: the CPU LSTMP kernel could not be built ({type(error).__name__}: {last_line}); "
                      "LSTM layers run torch.nn.LSTM instead (same math, slower)", stacklevel=2)
        return None


@contextlib.contextmanager
def build_lock(build: Path):
    """Hold an OS lock on ``build`` while torch's builder runs there. Torch's own lock is a plain
    file (``build/lock``) that a killed build leaves behind, and the next build waits on it
    forever. The OS releases ours when its process dies, so whoever holds it knows that a
    ``lock`` file left in the folder belongs to no live build, and removes it."""
    with open(build / ".ctxrep-build.lock", "a") as handle:
        if not _try_lock(handle):
            log.info("waiting for another process building the CPU LSTM kernel in %s", build)
            fcntl.flock(handle, fcntl.LOCK_EX)
        stale = build / "lock"
        if stale.exists():
            log.warning("removing %s, left by a kernel build that was killed", stale)
            stale.unlink(missing_ok=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _try_lock(handle) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def compiler_flags() -> list[str]:
    """-O3; OpenMP, without which ATen's ``parallel_for`` in the kernel runs serially; fast math,
    which lets the compiler vectorise the cell loops' exp and tanh (glibc's vector math library);
    and the vector instructions torch itself uses on this CPU, no more (the build is per machine)."""
    vector_isa = {"AVX2": ["-mavx2", "-mfma"], "AVX512": ["-mavx2", "-mfma", "-mavx512f"]}
    return ["-O3", "-fopenmp", "-ffast-math", *vector_isa.get(torch.backends.cpu.get_cpu_capability(), [])]


def applies(x: torch.Tensor) -> bool:
    """Whether ``x`` goes through the kernel: fp32 on CPU, outside autocast (bf16 runs torch's LSTM)."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
            and available())


@torch.compiler.assume_constant_result  # torch.compile asks once; it never traces the build
def available() -> bool:
    """Whether the kernel is built (or builds now) on this machine."""
    return kernel() is not None


class LstmpFunction(torch.autograd.Function):
    """Independent layers' inputs and weights -> each layer's (B, T, P) projected states.

    Arguments, flat for autograd: the n layers' inputs x_k (B, T, I), then the n layers' weights
    (w_ih, w_hh, w_hr, b_ih, b_hh) in that order. The kernel runs the n layers concurrently.
    """

    @staticmethod
    def forward(ctx, n, *args):
        xs, weights = args[:n], [args[n + 5 * k : n + 5 * (k + 1)] for k in range(n)]
        w_ih, w_hh, w_hr = ([w[i] for w in weights] for i in range(3))  # the C++ checks their layout
        saved = kernel().forward(list(xs), w_ih, w_hh, w_hr, [w[3] + w[4] for w in weights])
        ctx.n = n
        ctx.save_for_backward(*saved, *w_ih, *w_hh, *w_hr)
        return tuple(saved[6 * k + 1].transpose(0, 1) for k in range(n))  # H, batch-first

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *dHs):
        n = ctx.n
        saved = ctx.saved_tensors
        w_ih, w_hh, w_hr = (list(saved[6 * n + i * n : 6 * n + (i + 1) * n]) for i in range(3))
        grads = kernel().backward(list(dHs), list(saved[: 6 * n]), w_ih, w_hh, w_hr)
        needs = ctx.needs_input_grad[1:]
        x_grads = [grads[5 * k].transpose(0, 1) if needs[k] else None for k in range(n)]
        weight_grads = []
        for k in range(n):
            dw_ih, dw_hh, dw_hr, db = grads[5 * k + 1 : 5 * k + 5]
            # the two bias vectors get the same gradient, as separate tensors (a clip or an
            # accumulation in place must not touch both)
            weight_grads += [dw_ih, dw_hh, dw_hr, db, db.clone()]
        weight_grads = [g if need else None for g, need in zip(weight_grads, needs[n:])]
        return None, *x_grads, *weight_grads


def weights(lstm: nn.LSTM) -> list[torch.Tensor]:
    """A one-layer ``nn.LSTM(proj_size=P)``'s weights in the order :class:`LstmpFunction` takes them."""
    return [lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.weight_hr_l0, lstm.bias_ih_l0, lstm.bias_hh_l0]


# torch.compile runs the kernel as it is, between two compiled graphs: its operators have no
# fake-tensor (meta) implementation for inductor to trace, and a C++ time loop has nothing left
# for it to fuse.
@torch.compiler.disable
def lstmp(xs: list[torch.Tensor], lstms: list[nn.LSTM]) -> list[torch.Tensor]:
    """``[lstm(x)[0] for x, lstm in zip(xs, lstms)]`` for one-layer, batch-first
    ``nn.LSTM(proj_size=P)`` layers, through the kernel, the layers' time loops run concurrently."""
    return list(LstmpFunction.apply(len(xs), *xs, *(w for lstm in lstms for w in weights(lstm))))
