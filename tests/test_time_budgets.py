"""bench/time_budgets.py's arguments, plan and parsing, without timing anything (a real run
takes 15–35 minutes and must run alone)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench/time_budgets.py"


def load():
    spec = importlib.util.spec_from_file_location("time_budgets", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture
def shared(tmp_path):
    (tmp_path / "shared/data").mkdir(parents=True)
    return tmp_path / "shared"


@pytest.mark.parametrize("budget, command", [("repro", "make repro"), ("test", "make test"),
                                             ("ci", ".ci/run")])
def test_the_dry_run_prints_the_plan_and_clones_nothing(tmp_path, shared, budget, command):
    scratch = tmp_path / "scratch"
    proc = run(budget, "--dry-run", "--shared", str(shared), "--scratch", str(scratch))
    assert proc.returncode == 0, proc.stderr
    assert "git clone --no-local" in proc.stdout and f"/usr/bin/time -v {command}" in proc.stdout
    assert f"CTXREP_DATA_MIRROR={scratch}/shared/data" in proc.stdout
    assert not scratch.exists()


@pytest.mark.parametrize("argv, message", [
    (["nope", "--dry-run"], "invalid choice"),
    (["test", "--dry-run", "--rev", "no-such-commit"], "--rev no-such-commit: no such commit"),
    (["test", "--dry-run", "--shared", "/nonexistent"], "no data/ folder"),
])
def test_bad_arguments_exit_2_with_one_message(shared, argv, message):
    if "--shared" not in argv:
        argv = [*argv, "--shared", str(shared)]
    proc = run(*argv)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_a_scratch_folder_in_use_is_refused(tmp_path, shared):
    (tmp_path / "used").mkdir()
    (tmp_path / "used/file").write_text("x")
    proc = run("repro", "--dry-run", "--shared", str(shared), "--scratch", str(tmp_path / "used"))
    assert proc.returncode == 2 and "not an empty folder" in proc.stderr


def test_the_time_and_the_test_counts_are_read_back():
    tb = load()
    assert tb.elapsed_seconds("\tElapsed (wall clock) time (h:mm:ss or m:ss): 19:44.31\n") == 1184.3
    assert tb.elapsed_seconds("Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03\n") == 3723.0
    assert tb.elapsed_seconds("nothing") is None
    log = "....\n= 858 passed, 3 failed, 2 skipped in 1180.52s (0:19:40) =\n"
    assert tb.pytest_counts(log) == (858, 3)
    assert tb.pytest_counts("900 passed in 700.1s\n") == (900, 0)
    assert tb.pytest_counts("no summary") == (None, None)
