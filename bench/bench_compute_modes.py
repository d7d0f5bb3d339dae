"""What the portable modes cost: the biLM's and BERT's training steps under ``compute.isa: avx2``
and ``compatible``
against ``native``, on this CPU.

The two modes differ in environment variables that torch reads when it loads
(:func:`ctxrep.compute.environment`), so each measurement is its own process: the biLM bench
(``bench/bench_bilm.py``, the default profile's sizes) and the BERT bench
(``bench/bench_bert.py``, the own-bert profile's BERT-tiny, 16 x 64 tokens, 40 % masks), each
run under one mode then the other, ``--rounds`` times alternating, so that a drift of the
machine falls on both. Portable mode also turns oneDNN's convolutions off in the process, as a
stage does (:func:`ctxrep.compute.enter`). Prints ctxrep's median tokens/s per mode and their
ratio; ``--json`` keeps them.

    python bench/bench_compute_modes.py --rounds 2 --json bench/results/compute-modes.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ctxrep.compute import COMPATIBLE, ENV_VARS, NATIVE, PORTABLE, cpu_vendor, environment

BENCHES = {
    "bilm (default profile, batch 16)": ("bench/bench_bilm.py", ["--repeats", "3"],
                                         lambda d: d["ctxrep"]["tokens_per_second"]),
    "bert-tiny (own-bert profile, 16 x 64)": (
        "bench/bench_bert.py", ["--layers", "2", "--hidden", "128", "--heads", "2",
                                "--intermediate", "512", "--vocab-size", "16000", "--seq-len", "64",
                                "--batch-size", "16", "--mlm-prob", "0.4", "--dropout", "0",
                                "--steps", "8", "--repeats", "3"],
        lambda d: d["tokens_per_s"]["ctxrep"]),
}
# A stage in portable mode also runs ATen's convolutions, not oneDNN's (ctxrep.compute.enter).
RUN = ("import os, runpy, sys, torch; torch.backends.mkldnn.enabled = {mkldnn}; "
       "sys.argv = sys.argv[1:]; sys.path.insert(0, os.path.dirname(sys.argv[0])); "
       "runpy.run_path(sys.argv[0], run_name='__main__')")


def measure(script: str, args: list[str], read, isa: str, threads: int) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(environment(isa, threads))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        code = RUN.format(mkldnn=isa == NATIVE)
        subprocess.run([sys.executable, "-c", code, script, *args, "--json", str(out)], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        return float(read(json.loads(out.read_text())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="compute.threads (the default profile's)")
    p.add_argument("--modes", nargs="+", default=[NATIVE, PORTABLE, COMPATIBLE],
                   choices=[NATIVE, PORTABLE, COMPATIBLE], help="compute.isa values to compare")
    p.add_argument("--json", dest="json_path", type=Path)
    a = p.parse_args()
    results = {}
    for name, (script, args, read) in BENCHES.items():
        rates = {isa: [] for isa in a.modes}
        for _ in range(a.rounds):
            for isa in rates:
                rates[isa].append(measure(script, args, read, isa, a.threads))
        median = {isa: statistics.median(r) for isa, r in rates.items()}
        results[name] = {"tokens_per_s": median, "tokens_per_s_all": rates,
                         **{f"{isa}_over_native": median[isa] / median[NATIVE]
                            for isa in rates if isa != NATIVE and NATIVE in rates}}
        print(f"{name}: " + ", ".join(
            f"{isa} {median[isa]:,.0f} tokens/s" + (f" ({median[isa] / median[NATIVE]:.2f} x native)"
                                                    if isa != NATIVE and NATIVE in median else "")
            for isa in rates), flush=True)
    if a.json_path:
        import torch

        a.json_path.write_text(json.dumps({
            "threads": a.threads, "rounds": a.rounds, "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine": platform.processor() or platform.machine(), "cpu": cpu_vendor(),
            "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
