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

PORTABLE, COMPATIBLE, NATIVE, AUTO = "avx2", "compatible", "native", "auto"
ISAS = (AUTO, PORTABLE, COMPATIBLE, NATIVE)
INTEL = "GenuineIntel"
X86 = ("x86_64", "amd64", "x64")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# What each portable mode pins; the MKL branch is the one difference between them.
PINNED_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
              "OPENBLAS_CORETYPE": "Haswell"}
MKL_BRANCH = {PORTABLE: "AVX2", COMPATIBLE: "COMPATIBLE"}
ISA_ENV = {isa: {**PINNED_ENV, "MKL_CBWR": branch} for isa, branch in MKL_BRANCH.items()}
PORTABLE_ENV = ISA_ENV[PORTABLE]
ENV_VARS = tuple(ISA_ENV[PORTABLE])  # every variable a portable mode sets


class NotLaunched(RuntimeError):
    """A stage started outside :mod:`ctxrep.launch` with another instruction set or thread count
    than its params say."""


class NotHonoured(NotLaunched):
    """A library ignored the setting a portable mode asked of it (MKL's CNR branch on a CPU of
    another vendor): the bytes would not be the portable ones."""


def resolve(isa: str) -> str:
    """The mode ``isa`` stands for on this machine: ``auto`` is ``avx2`` on an Intel x86-64
    CPU (whose MKL honours its AVX2 branch: the same bytes on every Intel CPU) and ``native``
    on any other (MKL would run its own branch anyway, so this CPU's fastest kernels cost
    nothing in identity); any other value is itself."""
    if isa != AUTO:
        return isa
    return PORTABLE if is_x86() and cpu_vendor().startswith(INTEL) else NATIVE


def environment(isa: str, threads: int) -> dict[str, str]:
    """The environment variables a stage with these ``compute`` params starts under."""
    env = {var: str(threads) for var in THREAD_VARS}
    env.update(ISA_ENV.get(resolve(isa), {}))
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
    isa = resolve(params.isa)
    wrong = mismatches(isa, params.threads)
    if wrong:
        raise NotLaunched(
            f"compute.isa={params.isa}, compute.threads={params.threads}, but this process has "
            f"{', '.join(wrong)}: start the stage with `python -m ctxrep.launch stages/<stage>.py` "
            f"(dvc.yaml does), which sets them before torch loads")
    torch = sys.modules.get("torch")  # a stage that does no tensor work never imports it
    if torch is not None:
        torch.set_num_threads(params.threads)
        if isa in MKL_BRANCH:
            torch.backends.mkldnn.enabled = False
    check_honoured(isa)


def cpu_vendor() -> str:
    """The CPU's vendor and model, as /proc/cpuinfo names them ("" where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            head = [next(f, "") for _ in range(30)]
    except OSError:
        return ""
    fields = {key.strip(): value.strip() for key, _, value in
              (line.partition(":") for line in head if ":" in line)}
    return " ".join(fields.get(k, "") for k in ("vendor_id", "model name")).strip()


_BRANCH_SEEN: list[str | None] = []


def mkl_branch() -> str | None:
    """The CNR branch MKL's SGEMM runs under in this process ("AVX2", "COMPATIBLE", "AUTO",
    "OFF"), as MKL's own verbose line reports it for one small matmul; None where torch has no
    MKL. Trust what MKL reports, not what was asked: MKL reads ``MKL_CBWR`` and, on a CPU that
    is not Intel's, silently runs ``CNR:AUTO`` for any instruction-set branch (2026-12-06, an
    AMD EPYC), honouring only ``COMPATIBLE``. Probed once per process (a millisecond)."""
    if _BRANCH_SEEN:
        return _BRANCH_SEEN[0]
    import re

    import torch

    if not torch.backends.mkl.is_available():
        _BRANCH_SEEN.append(None)
        return None
    try:
        text = _mkl_verbose_of_one_matmul(torch)
    except Exception as e:  # noqa: BLE001 — MKL's verbose mode unavailable: say so, assume nothing
        import logging

        logging.getLogger(__name__).warning("MKL's branch could not be read (%s: %s); the "
                                            "mode is not checked", type(e).__name__, e)
        text = ""
    found = re.search(r"SGEMM.*?CNR:([A-Z0-9_]+)", text)
    _BRANCH_SEEN.append(found.group(1) if found else None)
    return _BRANCH_SEEN[0]


def _mkl_verbose_of_one_matmul(torch) -> str:
    """What MKL writes to the C stdout (fd 1) in verbose mode for one small matmul."""
    import ctypes
    import tempfile

    libc = ctypes.CDLL(None)
    a = torch.ones(4, 4)
    sys.stdout.flush()
    libc.fflush(None)
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(1)
        os.dup2(captured.fileno(), 1)
        try:
            with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                torch.mm(a, a)
        finally:
            libc.fflush(None)  # MKL's line is in C's buffer: into the file, not the terminal
            os.dup2(saved, 1)
            os.close(saved)
        captured.seek(0)
        return captured.read().decode(errors="replace")


def check_honoured(isa: str) -> None:
    """In a portable mode, MKL runs the branch that mode asks for; else :class:`NotHonoured`
    naming the CPU and the two modes that can run here. Only once torch is loaded (a stage
    that does no tensor work never runs MKL)."""
    isa = resolve(isa)
    wanted = MKL_BRANCH.get(isa)
    if wanted is None or "torch" not in sys.modules:
        return
    found = mkl_branch()
    if found is None:
        import logging

        logging.getLogger(__name__).warning(
            "compute.isa=%s: MKL reported no branch for its matmul (MKL_VERBOSE_OUTPUT_FILE "
            "set?), so the mode is not checked", isa)
        return
    if found == wanted:
        return
    raise NotHonoured(
        f"compute.isa={isa} asks MKL for its {wanted} branch (MKL_CBWR={wanted}), but MKL runs "
        f"CNR:{found} on this CPU ({cpu_vendor() or platform.machine()}): MKL honours its "
        f"instruction-set branches on Intel CPUs only, so the bytes would not be the ones "
        f"compute.isa={isa} stands for. Set compute.isa=compatible (the same bytes on every "
        f"x86-64 CPU, Intel and AMD; slower) or compute.isa=native (this CPU's fastest "
        f"kernels; `ctxrep compare` then checks the results against the committed run "
        f"within noise): make repro SET='compute.isa=compatible'")


def is_portable(env=os.environ) -> bool:
    """Whether this process runs in a portable mode: the launcher set one of :data:`ISA_ENV`."""
    return any(all(env.get(k) == v for k, v in pinned.items()) for pinned in ISA_ENV.values())


def refuses_compile(device) -> bool:
    """Whether a ``torch.compile`` run on ``device`` must be refused: on a CPU, inductor
    generates C++ for this CPU's own vector unit, which no environment variable pins, so a
    compiled CPU run is never portable (in torch 2.13 the generated AVX2 code also fails an
    index check that the AVX-512 code passes). On CUDA the CPU's settings do not matter."""
    return device.type == "cpu" and is_portable()
