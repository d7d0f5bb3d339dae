"""A byte flipped in an output after its stage wrote it (mtime kept, so `dvc status` is fooled)
is caught: by `ctxrep verify`, and by the downstream stage before it reads the file."""

import os
import subprocess
import sys

import pytest

from tests.conftest import copy_run

pytestmark = pytest.mark.slow


def run(repo, *cmd, env):
    full = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
            "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}", **env}
    return subprocess.run(list(cmd), cwd=repo, env=full, capture_output=True, text=True,
                          timeout=900)


def flip_a_byte_keeping_mtime(path):
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_tampered_output_is_refused(tiny_run, tmp_path):
    repo = copy_run(tiny_run.repo, tmp_path / "repo")
    env = tiny_run.env
    # DVC records each file's size and mtime when it hashes it (its state): let it see them
    # here, as it would have when the stage wrote them
    assert run(repo, "dvc", "status", env=env).returncode == 0
    ok = run(repo, "ctxrep", "verify", env=env)
    assert ok.returncode == 0 and "every output matches" in ok.stdout

    victim = sorted((repo / "data/tokenized").rglob("*.arrow"))[0]
    flip_a_byte_keeping_mtime(victim)
    status = run(repo, "dvc", "status", "tokenize", env=env)
    assert "changed outs" not in status.stdout  # DVC trusts the size and mtime it saw
    bad = run(repo, "ctxrep", "verify", env=env)
    rel = victim.relative_to(repo).as_posix()
    assert bad.returncode == 1 and f"{rel}: md5" in bad.stdout

    # the next stage that reads it (forced: DVC's status is fooled, so it would run nothing)
    proc = run(repo, "dvc", "repro", "--force", "--single-item", "pretrain_bilm", env=env)
    assert proc.returncode != 0
    log = proc.stdout + proc.stderr
    assert f"{rel}: md5" in log and "differ from what dvc.lock records" in log
    assert "Traceback" not in log
    assert not (repo / "data/models/bilm").exists()
