"""One pipeline run owns the checkout (ctxrep.workspace): a stage of another live DVC process
stops, a stage whose params were rewritten under it stops, a dead owner is replaced, and
`make repro` refuses to start beside a DVC process that outlived its wrapper.

DVC is a small script named ``dvc`` (what ``workspace.dvc_process`` looks for above a stage)."""

import json
import os
import shutil
import stat
import subprocess
import sys
import time

import psutil

from ctxrep import workspace
from tests.conftest import scratch_repo

CLAIM = """
import sys, time
from ctxrep import workspace
try:
    owner = workspace.claim()
    time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
    workspace.check_params(owner)
except workspace.WorkspaceTaken as e:
    print(e, file=sys.stderr)
    sys.exit(workspace.TAKEN_EXIT)
print("ran with", owner.pid if owner else None)
"""


def fake_dvc(tmp_path, body: str, name: str = "a"):
    """A process named ``dvc`` running ``body`` (bash), as DVC runs stage commands."""
    folder = tmp_path / f"bin-{name}"
    folder.mkdir()
    script = folder / "dvc"
    script.write_text(f"#!/usr/bin/env bash\n{body}\nexit $?\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def workdir(tmp_path):
    root = tmp_path / "work"
    (root / ".dvc" / "tmp").mkdir(parents=True)
    (root / "params.yaml").write_text("profile: tiny\n")
    (root / "stage.py").write_text(CLAIM)
    return root


def run(script, cwd, **kw):
    return subprocess.Popen([str(script)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_a_stage_of_a_second_dvc_process_stops_naming_the_owner(tmp_path):
    root = workdir(tmp_path)
    first = run(fake_dvc(tmp_path, f"{sys.executable} stage.py 20"), root)
    deadline = time.time() + 30
    while workspace.live_owner(root / workspace.OWNER) is None and time.time() < deadline:
        time.sleep(0.1)
    try:
        second = run(fake_dvc(tmp_path, f"{sys.executable} stage.py", "b"), root)
        _, err = second.communicate(timeout=60)
        assert second.returncode == workspace.TAKEN_EXIT, err
        assert f"PID {first.pid}" in err and "another pipeline run owns this checkout" in err
        assert "Traceback" not in err
    finally:
        first.kill()
        first.wait()


def test_params_rewritten_under_a_running_pipeline_stop_its_next_stage(tmp_path):
    """What a `dvc exp run -S …` typed during `make repro` does: it rewrites params.yaml (then
    fails on DVC's lock). The running pipeline's next stage stops instead of reading them."""
    root = workdir(tmp_path)
    dvc = fake_dvc(tmp_path, f"{sys.executable} stage.py && echo 'profile: default' > "
                             f"params.yaml && {sys.executable} stage.py")
    proc = run(dvc, root)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == workspace.TAKEN_EXIT, err
    assert out.count("ran with") == 1
    assert "params.yaml changed while this pipeline run" in err and "Traceback" not in err


def test_params_rewritten_while_a_stage_runs_fail_that_stage(tmp_path):
    """DVC records the params it reads after a stage ends: a stage whose params changed while
    it ran fails, so nothing computed with other params is recorded or cached."""
    root = workdir(tmp_path)
    proc = run(fake_dvc(tmp_path, f"{sys.executable} stage.py 3"), root)
    deadline = time.time() + 30
    while workspace.read_owner(root / workspace.OWNER) is None and time.time() < deadline:
        time.sleep(0.05)
    (root / "params.yaml").write_text("profile: default\n")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == workspace.TAKEN_EXIT and "params.yaml changed" in err


def test_stages_of_one_dvc_process_share_it_and_a_dead_owner_is_replaced(tmp_path):
    root = workdir(tmp_path)
    (root / workspace.OWNER).write_text(json.dumps(  # a run killed long ago
        {"pid": 999_999_999, "started": 0.0, "command": "dvc exp run", "params_sha256": "x"}))
    proc = run(fake_dvc(tmp_path, f"{sys.executable} stage.py; {sys.executable} stage.py"), root)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.count(f"ran with {proc.pid}") == 2  # the fake dvc's bash process owns it
    assert workspace.read_owner(root / workspace.OWNER).pid == proc.pid


def test_a_reused_pid_is_not_the_owner(tmp_path):
    me = psutil.Process()
    stale = workspace.Owner(me.pid, me.create_time() - 100.0, "dvc exp run", "")
    assert not stale.alive()
    assert workspace.Owner(me.pid, me.create_time(), "python", "").alive()


def test_a_stage_run_by_hand_owns_nothing(tmp_path):
    root = workdir(tmp_path)
    proc = subprocess.run([sys.executable, "stage.py"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0 and "ran with None" in proc.stdout
    assert not (root / workspace.OWNER).exists()


def test_make_repro_refuses_to_start_beside_a_dvc_process_that_owns_the_checkout(tmp_path):
    """After only `make repro`'s wrapper was killed, its DVC process runs on: the next
    `make repro` stops at once (exit 3) naming it, before DVC touches anything."""
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = psutil.Process(orphan.pid).create_time()
        (repo / workspace.OWNER).parent.mkdir(parents=True, exist_ok=True)
        (repo / workspace.OWNER).write_text(json.dumps(
            {"pid": orphan.pid, "started": started, "command": "dvc exp run -S profile=tiny",
             "params_sha256": ""}))
        marker = tmp_path / "dvc-ran"
        dvc = fake_dvc(tmp_path, f"touch {marker}")
        proc = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo,
                              env={**os.environ, "DVC": str(dvc)}, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == workspace.TAKEN_EXIT, proc.stderr
        assert f"PID {orphan.pid}" in proc.stderr and not marker.exists()
    finally:
        orphan.kill()
        orphan.wait()


def test_make_repros_dvc_command_is_recognised_as_dvc():
    """`make repro` starts DVC as `python -m ctxrep.dvc_cli`: unrecognised, no stage under it
    claimed the checkout or checked its params (issue 61 A)."""
    from ctxrep import repro

    assert workspace.is_dvc([*repro.dvc_command(), "exp", "run", "-S", "profile=tiny"])
    assert workspace.is_dvc(["/usr/bin/python3", "-m", "dvc", "repro"])
    assert workspace.is_dvc(["/x/.venv/bin/python", "/x/.venv/bin/dvc", "exp", "run"])
    assert not workspace.is_dvc([sys.executable, "-m", "ctxrep.launch", "stages/report.py"])
    assert not workspace.is_dvc([sys.executable, "-m", "pytest", "-q"])


SLOW_STAGE = """
import time
from pathlib import Path
from ctxrep.stage import stage

with stage("slow", None, track=False) as ctx:
    steps = ctx.params["pretrain_bilm"]["steps"]
    Path("started").write_text("")
    deadline = time.time() + 60
    while not Path("go").exists() and time.time() < deadline:
        time.sleep(0.05)
    Path("out.txt").write_text(f"trained for {steps} steps\\n")
"""


def test_params_rewritten_under_make_repros_dvc_record_nothing(tmp_path):
    """Issue 61 A, as `make repro` runs DVC (`python -m ctxrep.dvc_cli`): params.yaml rewritten
    while a stage runs (a `dvc exp run -S …` typed beside it) must leave neither a dvc.lock
    entry nor a run-cache entry recording the result under the new params. Before the fix the
    stage ran unclaimed and DVC recorded its output under params it did not compute with."""
    import yaml

    from tests.conftest import REPO, compose

    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(REPO / "conf", root / "conf")
    compose(root, "tiny")
    (root / "stage.py").write_text(SLOW_STAGE)
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"slow": {
        "cmd": f"{sys.executable} -m ctxrep.launch stage.py",
        "params": ["pretrain_bilm.steps"], "outs": ["out.txt"]}}}))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "CTXREP_MLFLOW": "0"}
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=root, check=True, env=env, capture_output=True)
    proc = subprocess.Popen([sys.executable, "-m", "ctxrep.dvc_cli", "repro"], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 120
        while not (root / "started").exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert (root / "started").exists(), proc.communicate(timeout=30)[0]
        # The stage recognised `python -m ctxrep.dvc_cli` as DVC and recorded it as the owner
        # (before the fix no record was written under make repro's DVC).
        owner = json.loads((root / ".dvc/tmp/ctxrep-owner.json").read_text())
        assert owner["pid"] == proc.pid and "ctxrep.dvc_cli" in owner["command"], owner
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["pretrain_bilm"]["steps"] += 1  # what `dvc exp run -S pretrain_bilm.steps=…` writes
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        (root / "go").write_text("")
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out
    assert "params.yaml changed while this" in out and "Traceback" not in out
    assert f"exited with {workspace.TAKEN_EXIT}" in out, out  # the stage's own status, through DVC
    lock = root / "dvc.lock"
    assert not lock.exists() or "slow" not in (yaml.safe_load(lock.read_text()) or {}).get(
        "stages", {}), lock.read_text()
    runs = root / ".dvc" / "cache" / "runs"
    assert not runs.exists() or not any(p.is_file() for p in runs.rglob("*")), \
        "the run cache recorded a result computed with other params"
