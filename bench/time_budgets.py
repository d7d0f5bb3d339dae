#!/usr/bin/env python3
"""Time one budget from a fresh clone and append it to ``bench/results/budgets.json``.

    bench/time_budgets.py {repro,test,ci} [--rev REV] [--scratch DIR] [--keep] [--dry-run]

The budgets (issue 60): ``make repro`` ≤ 30 min, ``make test`` ≤ 15 min, ``.ci/run`` ≤ 30 min,
each from a fresh clone. This script clones the repository's committed ``REV`` (uncommitted
changes are not timed) into ``SCRATCH/ctxrep``, beside a ``SCRATCH/shared`` symlink to the data
mirror (the ``../shared`` that ``.ci/run`` and ``make`` expect, with ``CTXREP_DATA_MIRROR``
set to its ``data``), runs the command under ``/usr/bin/time -v`` and appends an entry
{budget, command, seconds, commit, date, cpu, vendor, cores, rc, passed, failed, fresh_clone,
source} to the results file; ``ctxrep docs`` writes the README's budgets table from it. Run it
alone on the machine: anything beside it is timed too. ``--dry-run`` prints the plan and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench/results/budgets.json"
COMMANDS = {"repro": ["make", "repro"], "test": ["make", "test"], "ci": [".ci/run"]}
BUDGET_MIN = {"repro": 30, "test": 15, "ci": 30}
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/time_budgets.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("budget", choices=sorted(COMMANDS), help="which command to time")
    ap.add_argument("--rev", default="HEAD", help="the commit to clone and time (default HEAD)")
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                    help="the data mirror's parent, ../shared beside a CI clone")
    ap.add_argument("--scratch", type=Path, default=None,
                    help="an empty or absent folder for the clone (default: a new temporary one)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the file to append to")
    ap.add_argument("--keep", action="store_true", help="keep the clone afterwards")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    args = ap.parse_args(argv)
    if not (args.shared / "data").is_dir():
        ap.error(f"--shared {args.shared}: no data/ folder there (the data mirror)")
    if args.scratch is not None and args.scratch.exists() and (
            not args.scratch.is_dir() or any(args.scratch.iterdir())):
        ap.error(f"--scratch {args.scratch}: exists and is not an empty folder")
    if args.results.is_dir():
        ap.error(f"--results {args.results}: a folder")
    commit = git("rev-parse", "--verify", "-q", f"{args.rev}^{{commit}}")
    if not commit:
        ap.error(f"--rev {args.rev}: no such commit in {REPO}")
    args.commit = commit
    return args


def git(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def cpu() -> dict:
    """Model, vendor and cores, as metrics/run.json records them (ctxrep.run_record.cpu)."""
    sys.path.insert(0, str(REPO / "src"))
    from ctxrep.run_record import cpu as read_cpu

    return read_cpu()


def elapsed_seconds(time_output: str) -> float | None:
    """``Elapsed (wall clock) time (h:mm:ss or m:ss): 19:44.31`` -> 1184.31."""
    m = re.search(r"Elapsed \(wall clock\) time .*?: ([\d:.]+)", time_output)
    if not m:
        return None
    seconds = 0.0
    for part in m.group(1).split(":"):
        seconds = seconds * 60 + float(part)
    return round(seconds, 1)


def pytest_counts(log: str) -> tuple[int | None, int | None]:
    """passed and failed (errors counted as failed) from pytest's last summary line."""
    summaries = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?) in [\d.]+s", log, re.M)
    if not summaries:
        return None, None
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?)",
                                                     summaries[-1])}
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    return counts.get("passed", 0), failed


def plan(args: argparse.Namespace, scratch: Path) -> list[str]:
    clone = scratch / "ctxrep"
    return [f"git clone --no-local {REPO} {clone}  (then checkout {args.commit[:12]})",
            f"ln -s {args.shared.resolve()} {scratch / 'shared'}",
            f"cd {clone} && CTXREP_DATA_MIRROR={scratch / 'shared/data'} /usr/bin/time -v "
            f"{' '.join(COMMANDS[args.budget])}  (budget {BUDGET_MIN[args.budget]} min)",
            f"append the entry to {args.results}"]


def append(results: Path, entry: dict) -> None:
    doc = json.loads(results.read_text()) if results.is_file() else {"entries": []}
    doc.setdefault("entries", []).append(entry)
    tmp = results.with_name(results.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(results)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="ctxrep-budget-"))
    if args.dry_run:
        print("\n".join(plan(args, scratch)))
        if args.scratch is None:
            scratch.rmdir()
        return 0
    scratch.mkdir(parents=True, exist_ok=True)
    clone = scratch / "ctxrep"
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", args.commit], cwd=clone, check=True)
    (scratch / "shared").symlink_to(args.shared.resolve())
    env = {**os.environ, **OFFLINE, "CTXREP_DATA_MIRROR": str(scratch / "shared/data")}
    env.pop("VIRTUAL_ENV", None)
    date = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    time_file, log_file = scratch / "time.txt", scratch / "log.txt"
    with open(log_file, "w") as log:
        proc = subprocess.run(["/usr/bin/time", "-v", "-o", str(time_file),
                               *COMMANDS[args.budget]], cwd=clone, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    seconds = elapsed_seconds(time_file.read_text()) if time_file.is_file() else None
    passed, failed = (pytest_counts(log_file.read_text(errors="replace"))
                      if args.budget in ("test", "ci") else (None, None))
    machine = cpu()
    entry = {"budget": args.budget, "command": " ".join(COMMANDS[args.budget]),
             "seconds": seconds, "commit": args.commit, "date": date, "cpu": machine["model"],
             "vendor": machine["vendor"], "cores": machine["cores"], "rc": proc.returncode,
             "passed": passed, "failed": failed, "fresh_clone": True,
             "source": "bench/time_budgets.py"}
    append(args.results, entry)
    print(json.dumps(entry, indent=2))
    print(f"log: {log_file}")
    if not args.keep:
        shutil.rmtree(clone, ignore_errors=True)
    return 0 if seconds is not None else 1


if __name__ == "__main__":
    sys.exit(main())
