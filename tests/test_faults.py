"""Fault injection: kill -9 in data stages, corrupted inputs, concurrent runs, bad params.

The training-side faults (kill -9 mid-training, NaN, half-written checkpoints) are covered in
test_loop.py and test_pipeline_models.py."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import copy_run, kill_stage_when, run_stage, scratch_repo, tree_hash

# outputs and errors, not MLflow: stages run without MLflow runs (tests/conftest.py), but where
# a test says otherwise (the queued experiments' MLflow runs, a full MLflow store)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")]


def stage_env(repo, mirror):
    return {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
            "CTXREP_DATA_MIRROR": str(mirror)}


@pytest.fixture
def clean(tiny_run):
    """The session's tiny run: reference bytes of every stage's outputs (read only)."""
    return tiny_run.repo


def test_kill_9_during_tokenize_leaves_nothing_and_rerun_is_identical(clean, tmp_path,
                                                                       tiny_mirror):
    repo = copy_run(clean, tmp_path / "repo")
    shutil.rmtree(repo / "data/tokenized")
    in_progress = lambda: any((repo / "data").glob(".tokenized.tmp-*/train/*.arrow"))  # noqa: E731
    assert kill_stage_when(repo, "tokenize_corpus.py", [], in_progress,
                           env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    assert not (repo / "data/tokenized").exists(), "a killed tokenize left an output in place"
    run_stage(repo, "tokenize_corpus.py", env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    assert tree_hash(repo / "data/tokenized") == tree_hash(clean / "data/tokenized")
    assert not list((repo / "data").glob(".tokenized.tmp-*")), "stale temporaries remain"


def test_kill_9_during_fetch_leaves_nothing(clean, tmp_path, tiny_mirror):
    repo = copy_run(clean, tmp_path / "repo")  # the tiny profile fetches squad
    out = repo / "data/raw/tasks/squad"
    shutil.rmtree(out)
    writing = lambda: any((repo / "data/raw/tasks").glob(".*.tmp-*"))  # noqa: E731
    kill_stage_when(repo, "fetch_task.py", ["squad"], writing,
                    env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    assert not out.exists() or (out / "MANIFEST.json").exists()
    run_stage(repo, "fetch_task.py", "squad", env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    assert json.loads((out / "MANIFEST.json").read_text())["available"]
    assert tree_hash(out) == tree_hash(clean / "data/raw/tasks/squad")


def test_corrupted_tokenized_shard_is_named(clean, tmp_path):
    from ctxrep.data.tokenized import TokenizedCorpus

    copy = tmp_path / "tokenized"
    shutil.copytree(clean / "data/tokenized", copy)
    shard = sorted((copy / "train").glob("*.arrow"))[0]
    shard.write_bytes(shard.read_bytes()[:200])
    with pytest.raises(ValueError, match=r"shard-00000.arrow: not a readable Arrow stream"):
        list(TokenizedCorpus(copy).documents("train"))


def test_truncated_safetensors_is_named(tmp_path):
    import torch
    from safetensors.torch import save_file

    from ctxrep.io import load_safetensors

    path = tmp_path / "model.safetensors"
    save_file({"w": torch.zeros(100, 100)}, str(path))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"model.safetensors: not a readable safetensors file"):
        load_safetensors(path)


def test_two_concurrent_repros_fail_cleanly_on_the_lock(clean, tmp_path, tiny_mirror):
    repo = copy_run(clean, tmp_path / "repo")
    dvc = os.path.join(os.path.dirname(sys.executable), "dvc")
    env = {**stage_env(repo, tiny_mirror),
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    first = subprocess.Popen([dvc, "repro", "-f", "fetch_corpus"], cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    second = subprocess.run([dvc, "repro", "fetch_corpus"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=120)
    first.communicate(timeout=300)
    assert second.returncode != 0
    assert "lock" in (second.stdout + second.stderr).lower()


def test_queued_experiments_with_two_workers_both_reach_mlflow(tmp_path, tiny_mirror):
    """`dvc exp run --queue` runs stages in copies under .dvc/tmp/exps/: both must log to the
    repo's own store (tracking.repo_root sees through the copy)."""
    import mlflow

    repo = scratch_repo(tmp_path, "tiny")  # the tiny profile fetches squad
    dvc = os.path.join(os.path.dirname(sys.executable), "dvc")
    env = {**os.environ, "CTXREP_DATA_MIRROR": str(tiny_mirror), "CTXREP_MLFLOW": "1",
           "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    for seed in (1, 2):
        # -S recomposes params.yaml from conf/: name the profile, or it is the default's
        subprocess.run([dvc, "exp", "run", "--queue", "-S", "profile=tiny", "-S",
                        f"data.seed={seed}", "-n", f"s{seed}", "fetch_tasks@squad"],
                       cwd=repo, env=env, check=True, capture_output=True)
    subprocess.run([dvc, "queue", "start", "-j", "2"], cwd=repo, env=env, check=True,
                   capture_output=True)

    def queue_status() -> str:
        return subprocess.run([dvc, "queue", "status"], cwd=repo, env=env,
                              capture_output=True, text=True).stdout

    # A finished experiment is a git ref refs/exps/<2 hex>/<rest of the baseline>/<name> (the
    # queue's own refs live under refs/exps/celery, exec, temp...): git answers in milliseconds,
    # where each `dvc queue status` costs a DVC start-up. DVC is asked every 10 s (a failure),
    # and once both refs exist (its status may trail the ref by a moment).
    def finished() -> int:
        refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"],
                              cwd=repo, capture_output=True, text=True).stdout.split()
        return sum(len(ref.split("/")) == 5 and ref.endswith(("/s1", "/s2")) for ref in refs)

    deadline = time.time() + 300
    next_ask, status = time.time() + 10, ""
    while time.time() < deadline:
        if finished() >= 2 or time.time() > next_ask:
            next_ask = time.time() + 10
            status = queue_status()
            if status.count("Success") >= 2 or "Failed" in status:
                break
        time.sleep(1)
    subprocess.run([dvc, "queue", "stop"], cwd=repo, env=env, capture_output=True)
    assert status.count("Success") >= 2, status
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ctxrep").experiment_id])
    names = sorted(r.data.tags.get("dvc_exp_name", "") for r in runs
                   if r.info.run_name == "fetch_tasks@squad")
    assert names == ["s1", "s2"]
    # each experiment its own pipeline run; the store, first created inside a copy under
    # .dvc/tmp/exps/, keeps its artifacts in the repo
    parents = {r.data.tags["dvc_exp_name"]: r.data.tags["mlflow.parentRunId"] for r in runs
               if r.info.run_name == "fetch_tasks@squad"}
    assert parents["s1"] != parents["s2"]
    assert {client.get_run(p).info.run_name for p in parents.values()} == {"s1", "s2"}
    exp = client.get_experiment_by_name("ctxrep")
    assert exp.artifact_location == (repo / "mlartifacts").as_uri()


@pytest.mark.parametrize("section,values,key", [
    ("pretrain_bert", {"max_seq_len": 1024, "max_position_embeddings": 512},
     "pretrain_bert.max_seq_len"),
    ("pretrain_bert", {"mlm_prob": 1.5}, "pretrain_bert.mlm_prob"),
])
def test_contradictory_params_are_named(section, values, key):
    from ctxrep import config
    from ctxrep.config import composition

    with pytest.raises(config.ParamError) as e:
        composition.defaults(section, **values)
    assert e.value.key == key


def test_a_missing_mirror_stops_the_fetch_loudly(tmp_path):
    repo = scratch_repo(tmp_path, "tiny")
    for script in ("locate_data.py", "fetch_corpus.py"):
        proc = run_stage(repo, script, env={"CTXREP_DATA_MIRROR": str(tmp_path / "gone")},
                         check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, script
        assert "does not exist" in proc.stderr, script
    assert not (repo / "data/raw/corpus").exists() and not (repo / "data/sources").exists()


def test_the_full_disk_hint_names_the_full_place_when_the_error_names_no_file(monkeypatch, tmp_path):
    """ENOSPC from a write whose error names no file (a torch.save, a temporary file): the hint
    names the place that is full (here the temporary folder), not just the current folder."""
    import shutil
    import tempfile
    from collections import namedtuple

    from ctxrep.errors import no_space_message

    usage = namedtuple("usage", "total used free")
    full = str(tmp_path / "tmp")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: full)
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda place: usage(10 << 30, 10 << 30, 0 if place == full else 5 << 30))
    assert f"df -h {full}" in no_space_message(None)


@pytest.mark.parametrize("mlflow_on", [True, False], ids=["mlflow-store", "outputs"])
def test_a_write_past_the_file_size_limit_says_so(tmp_path, tiny_mirror, mlflow_on):
    """`ulimit -f` too small: SQLite's "disk I/O error" (the MLflow store growing as a stage
    opens its run) or EFBIG (a stage's own output) becomes one error line naming the limit, exit
    27, no traceback (MLflow's own log of the store error included)."""
    import resource

    from tests.conftest import LAUNCH

    repo = scratch_repo(tmp_path, "tiny")
    env = {**os.environ, "CTXREP_DATA_MIRROR": str(tiny_mirror),
           "CTXREP_MLFLOW": "1" if mlflow_on else "0", "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}"}
    # The store exists (the first stage made it) and grows past the limit as the next stage
    # opens its run: MLflow logged SQLAlchemy's 40-line traceback before raising. Without
    # MLflow, the corpus's shards are larger than 8 KB.
    assert run_stage(repo, "locate_data.py", env={"CTXREP_DATA_MIRROR": str(tiny_mirror),
                                                  "CTXREP_MLFLOW": env["CTXREP_MLFLOW"]}).returncode == 0
    limit = (repo / "mlflow.db").stat().st_size + (4 << 10) if mlflow_on else 8 << 10

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    proc = subprocess.run([*LAUNCH, "stages/fetch_corpus.py"], cwd=repo, env=env, text=True,
                          capture_output=True, timeout=300, preexec_fn=small_files)
    assert proc.returncode == 27, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and f"file-size limit ({limit:,} bytes)" in proc.stderr
    assert "ulimit -f unlimited" in proc.stderr
    assert [line for line in proc.stderr.splitlines() if " ERROR " in line] == [
        line for line in proc.stderr.splitlines() if "file-size limit" in line]  # one error line
