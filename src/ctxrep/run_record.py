"""The run record, ``metrics/run.json``: what `make repro` ran, where, when and how long.

DVC records what does not change from run to run (``dvc.lock``); this small git-tracked file
records what does, for the run whose results are committed beside it: the profile, the commit
the run started from (and whether the tree was dirty then), the date (UTC), the CPU (model,
vendor, cores), ``compute.isa`` as resolved, the DVC run's wall time and each stage's wall time
read from ``reports/timings/<stage>.json`` (which each timed stage writes when it ends).

A stage is recorded ``ran`` with its seconds when its timing file was written during the run;
``restored`` when its timing file is older than the run (DVC skipped it or restored it from its
cache); ``untimed`` when there is no timing file (a stage that times nothing: fetch,
locate_data, report; or one restored from cache before it ever ran here).

:func:`start` is called before ``dvc exp run``, :func:`finish` after it succeeded
(:mod:`ctxrep.repro`); ``ctxrep docs`` writes the README's run figures from the file. It is
not a DVC output: the wrapper writes it after DVC. Keys are sorted, so the bytes depend only on
the values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

RUN_RECORD = Path("metrics/run.json")
TIMINGS = Path("reports/timings")  # ctxrep.stage.TIMINGS_DIR, where each timed stage writes
STATUSES = {
    "ran": "its timing file was written during this run",
    "restored": "its timing file is older than this run: DVC skipped it or restored it from "
                "its cache",
    "untimed": "no timing file: a stage that times nothing (fetch, locate_data, report), or "
               "one restored from cache before it ever ran in this checkout",
}


@dataclass(frozen=True)
class RunStart:
    """What is known when the run starts: the profile, the commit and the clock."""

    profile: str
    commit: str
    dirty: bool | None
    started: float  # seconds since the epoch


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def start(profile: str, root: Path = Path(".")) -> RunStart:
    """The run's start, read before ``dvc exp run`` changes ``params.yaml`` and ``dvc.lock``."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                            capture_output=True, text=True)
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return RunStart(profile, _git(root, "rev-parse", "HEAD"), dirty, time.time())


def utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu(cpuinfo: Path = Path("/proc/cpuinfo"), meminfo: Path = Path("/proc/meminfo")) -> dict:
    """The CPU's model name and vendor as /proc/cpuinfo names them, its widest vector units
    (what ``compute.isa`` depends on), the cores this process may use and the memory (empty
    where it cannot be read: not Linux)."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() not in fields:
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    flags = set(fields.get("flags", "").split())
    memory_gib = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"model": fields.get("model name", ""), "vendor": fields.get("vendor_id", ""),
            "simd": [f for f in ("avx2", "avx512f") if f in flags], "cores": cores,
            "memory_gib": memory_gib}


def stage_names(root: Path) -> list[str]:
    """The stages ``dvc.lock`` records (the run's, once :func:`ctxrep.repro.prune_lock` ran)."""
    import yaml

    lock = root / "dvc.lock"
    if not lock.is_file():
        return []
    return sorted((yaml.safe_load(lock.read_text()) or {}).get("stages", {}))


def stage_times(root: Path, started: float) -> dict[str, dict]:
    """stage -> {"status": ran | restored | untimed, "wall_s": seconds when it ran}."""
    out = {}
    for name in stage_names(root):
        path = root / TIMINGS / f"{name}.json"
        if not path.is_file():
            out[name] = {"status": "untimed"}
            continue
        if path.stat().st_mtime < started:
            out[name] = {"status": "restored"}
            continue
        try:
            seconds = float(json.loads(path.read_text())["wall_s"])
        except (OSError, ValueError, KeyError, TypeError):  # a stage killed while writing it
            out[name] = {"status": "untimed"}
            continue
        out[name] = {"status": "ran", "wall_s": round(seconds, 1)}
    return out


def compute_params(root: Path) -> dict:
    """``compute`` as the run's ``params.yaml`` holds it (``isa`` resolved: never ``auto``)."""
    import yaml

    try:
        params = yaml.safe_load((root / "params.yaml").read_text()) or {}
    except OSError:
        return {}
    section = params.get("compute") or {}
    return {key: section[key] for key in ("isa", "threads") if key in section}


def build(root: Path, run: RunStart, ended: float, note: str | None = None,
          machine: dict | None = None) -> dict:
    """The record of the run that started at ``run`` and whose DVC run ended at ``ended``."""
    stages = stage_times(root, run.started)
    timed = [s["wall_s"] for s in stages.values() if s["status"] == "ran"]
    record = {
        "profile": run.profile,
        "commit": run.commit,
        "dirty": run.dirty,
        "started_utc": utc(run.started),
        "ended_utc": utc(ended),
        "dvc_wall_s": round(ended - run.started, 1),
        "machine": machine or cpu(),
        "compute": compute_params(root),
        "stages": stages,
        "stage_counts": {status: sum(s["status"] == status for s in stages.values())
                         for status in STATUSES},
        "stages_wall_s": round(sum(timed), 1),
        "statuses": STATUSES,
    }
    if note:
        record["note"] = note
    return record


def write(record: dict, root: Path = Path(".")) -> Path:
    """``metrics/run.json``, keys sorted, written whole or not at all."""
    path = root / RUN_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def finish(run: RunStart, root: Path = Path(".")) -> Path | None:
    """Write the record of the run that just ended; a failure is a warning, never the run's."""
    try:
        path = write(build(root, run, time.time()), root)
    except Exception as e:  # noqa: BLE001 — the run succeeded: its record must not undo that
        print(f"ctxrep: WARNING: {RUN_RECORD} not written ({type(e).__name__}: {e})",
              file=sys.stderr, flush=True)
        return None
    print(f"ctxrep: wrote {RUN_RECORD} (the run's commit, machine and stage times)",
          file=sys.stderr, flush=True)
    return path
