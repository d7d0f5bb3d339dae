"""The instruction set and the thread count a stage's float work runs with: the same bytes on
any x86-64 machine (``compute.isa: avx2``, the default) or this CPU's fastest kernels
(``native``).

A float result depends on the order of its additions, and three libraries choose that order per
machine: MKL picks its GEMM code path for the CPU it finds, ATen dispatches its vectorised
kernels to the widest instruction set (AVX-512 where there is one), oneDNN blocks its
convolutions for the CPU's ISA and caches; the CPU LSTM kernel is compiled for the instruction
set ATen dispatches to (:func:`ctxrep.models.lstmp_cpu.compiler_flags`). Each reduction is also
split across the threads it runs on. Portable mode pins all of them to one baseline every
x86-64 CPU since 2015 has (AVX2 with FMA), and the thread count to a param:

- ``MKL_CBWR=AVX2``: MKL's conditional numerical reproducibility, the AVX2 code path on any CPU;
- ``ATEN_CPU_CAPABILITY=avx2``: ATen's kernels, and so the LSTM kernel's compiler flags;
- ``ONEDNN_MAX_CPU_ISA=AVX2``, and ``torch.backends.mkldnn`` off in the stage: convolutions run
  ATen's own (unfold + an MKL GEMM), whose order does not depend on the CPU's caches;
- ``OPENBLAS_CORETYPE=Haswell``: numpy's and scipy's OpenBLAS (scikit-learn's baselines,
  gensim's word2vec) on its AVX2 kernels, which it too would pick per CPU;
- ``OMP_NUM_THREADS`` = ``MKL_NUM_THREADS`` = ``OPENBLAS_NUM_THREADS`` = ``compute.threads``,
  however many cores there are (fewer cores than threads costs time, not bytes).

These are read when the libraries load or first run, so they are set before the stage's Python
starts: by :mod:`ctxrep.launch`, which ``dvc.yaml`` runs every stage through; a stage checks them
(:func:`enter`) and refuses to run under others, so what ``dvc.lock`` records is what ran. Both
settings are params, so a native run and a portable one never share a lock entry. Not covered:
another compiler or glibc builds the LSTM kernel's fast-math exp/tanh differently (the kernel
is compiled on each machine), and non-x86 CPUs have no AVX2 (the launcher says so and runs).
"""

from __future__ import annotations

import os
import platform
import sys

PORTABLE, NATIVE = "avx2", "native"
ISAS = (PORTABLE, NATIVE)
X86 = ("x86_64", "amd64", "x64")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                "OPENBLAS_CORETYPE": "Haswell"}


class NotLaunched(RuntimeError):
    """A stage started outside :mod:`ctxrep.launch` with another instruction set or thread count
    than its params say."""


def environment(isa: str, threads: int) -> dict[str, str]:
    """The environment variables a stage with these ``compute`` params starts under."""
    env = {var: str(threads) for var in THREAD_VARS}
    if isa == PORTABLE:
        env.update(PORTABLE_ENV)
    return env


def is_x86() -> bool:
    return platform.machine().lower() in X86


def mismatches(isa: str, threads: int, env=os.environ) -> list[str]:
    """``NAME=value (wanted w)`` for each variable of :func:`environment` that ``env`` lacks."""
    return [f"{k}={env.get(k, '(unset)')} (wanted {v})"
            for k, v in environment(isa, threads).items() if env.get(k) != v]


def enter(params) -> None:
    """Check that this process runs with ``params`` (a ``compute`` section), then set what only
    Python can: torch's thread count, and ATen's convolutions in portable mode. Raises
    :class:`NotLaunched` naming the variables that differ and how to start the stage."""
    wrong = mismatches(params.isa, params.threads)
    if wrong:
        raise NotLaunched(
            f"compute.isa={params.isa}, compute.threads={params.threads}, but this process has "
            f"{', '.join(wrong)}: start the stage with `python -m ctxrep.launch stages/<stage>.py` "
            f"(dvc.yaml does), which sets them before torch loads")
    torch = sys.modules.get("torch")  # a stage that does no tensor work never imports it
    if torch is not None:
        torch.set_num_threads(params.threads)
        if params.isa == PORTABLE:
            torch.backends.mkldnn.enabled = False


def is_portable(env=os.environ) -> bool:
    """Whether this process runs in portable mode: the launcher set :data:`PORTABLE_ENV`."""
    return all(env.get(k) == v for k, v in PORTABLE_ENV.items())


def check_compile(device) -> None:
    """``torch.compile`` on a CPU generates C++ for this CPU's own vector unit, which no
    environment variable pins: a compiled CPU run is not portable, so a stage in portable mode
    refuses it (in torch 2.13 the generated AVX2 code also fails an index check that the
    AVX-512 code passes). On CUDA the CPU's settings do not matter."""
    if device.type == "cpu" and is_portable():
        from ctxrep.config import ParamError

        raise ParamError("compute.isa", PORTABLE, "native for a CPU run with compile: true "
                         "(inductor generates code for this CPU, so the bytes are not portable "
                         "anyway): add SET='compute.isa=native'")
