"""MLflow as the place to compare pipeline runs: parent runs, nested stage and seed runs, params,
the artifact root and a real `mlflow server` (the model registry: tests/test_model_registry.py).

One store serves the in-process tests of this module (creating a SQLite store costs seconds);
it is first created the way a queued `dvc exp run` creates it: from a stage running in a copy
of the repo under `.dvc/tmp/exps/`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_stage, scratch_repo


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """(repo root, tracking URI): a store first created by a stage in a temp experiment copy."""
    from ctxrep import tracking

    root = tmp_path_factory.mktemp("repo")
    (root / "dvc.yaml").write_text("stages: {}\n")
    copy = root / ".dvc/tmp/exps/tmpk2j4/"
    copy.mkdir(parents=True)
    (copy / "dvc.yaml").write_text("stages: {}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(copy)
        for var in ("MLFLOW_TRACKING_URI", "DVC_ROOT", "CTXREP_PIPELINE_RUN"):
            mp.delenv(var, raising=False)
        with tracking.stage_run("fetch_corpus", {"data": {"seed": 1}}) as run:
            run.log_artifact(copy / "dvc.yaml")
    return root, f"sqlite:///{root / 'mlflow.db'}"


@pytest.fixture
def client(store, monkeypatch):
    import mlflow

    root, uri = store
    monkeypatch.chdir(root)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for var in ("DVC_ROOT", "DVC_EXP_NAME", "CTXREP_PIPELINE_RUN"):
        monkeypatch.delenv(var, raising=False)
    return mlflow.MlflowClient(uri)


def _runs(client, where: str):
    exp = client.get_experiment_by_name("ctxrep")
    return client.search_runs([exp.experiment_id], where)


def test_a_store_created_in_a_temp_experiment_copy_keeps_its_artifacts_in_the_repo(store, client):
    root, _ = store
    exp = client.get_experiment_by_name("ctxrep")
    assert exp.artifact_location == (root / "mlartifacts").as_uri()
    assert (root / "mlflow.db").exists() and not list(root.glob(".dvc/tmp/exps/*/mlflow.db"))
    (run,) = _runs(client, "tags.stage = 'fetch_corpus'")
    logged = Path(run.info.artifact_uri.removeprefix("file://")) / "dvc.yaml"
    assert logged.is_file() and ".dvc/tmp" not in str(logged)
    assert logged.is_relative_to(root / "mlartifacts")


def test_dvc_root_names_the_repo_from_inside_any_copy(tmp_path, monkeypatch):
    from ctxrep import tracking

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "main"))
    assert tracking.repo_root() == tmp_path / "main"
    assert tracking.tracking_uri() in (os.environ.get("MLFLOW_TRACKING_URI"),
                                       f"sqlite:///{tmp_path / 'main/mlflow.db'}")


def test_stages_of_one_pipeline_run_share_a_parent_tagged_with_exp_commit_and_params(client,
                                                                                     monkeypatch):
    from ctxrep import tracking

    every_param = {"profile": "tiny", "tokenize": {"seed": 7}, "grid": {"tasks": ["sst2"]}}
    monkeypatch.setenv("DVC_EXP_NAME", "brisk-lamb")
    for pipeline in ("run-a", "run-b"):
        monkeypatch.setenv("CTXREP_PIPELINE_RUN", pipeline)
        for stage in ("tokenize", "pretrain_bilm"):
            with tracking.stage_run(stage, {stage: {"seed": 7}}, pipeline_params=every_param):
                pass
    stages = _runs(client, "tags.pipeline_key = 'run-a' and tags.run_kind = 'stage'")
    assert sorted(r.info.run_name for r in stages) == ["pretrain_bilm", "tokenize"]
    (parent_id,) = {r.data.tags["mlflow.parentRunId"] for r in stages}
    (other,) = _runs(client, "tags.pipeline_key = 'run-b' and tags.run_kind = 'pipeline'")
    assert other.info.run_id != parent_id
    parent = client.get_run(parent_id)
    assert parent.info.run_name == "brisk-lamb" and parent.info.status == "FINISHED"
    assert parent.data.tags["dvc_exp_name"] == "brisk-lamb"
    assert parent.data.tags["git_commit"] and parent.data.tags["profile"] == "tiny"
    assert parent.data.params == {"profile": "tiny", "tokenize.seed": "7", "grid.tasks": "['sst2']"}
    assert stages[0].data.params == {f"{stages[0].info.run_name}.seed": "7"}


def test_without_dvc_or_make_each_process_is_its_own_pipeline_run(client, monkeypatch):
    from ctxrep import tracking

    key, source = tracking.pipeline_key()
    assert source == "process" and key == tracking.pipeline_key()[0]
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "mine")
    assert tracking.pipeline_key() == ("mine", "env")


def test_a_cell_has_one_nested_run_per_seed_with_its_own_curve(client, monkeypatch):
    from ctxrep import tracking

    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "cells")
    with tracking.stage_run("transfer@sst2-elmo") as cell:
        for seed in (0, 1):
            with cell.child(f"sst2-elmo seed {seed}", {"seed": seed}) as seed_run:
                for step in (1, 2):
                    seed_run.log_metrics({"train_loss": 1.0 / step + seed}, step=step)
        with pytest.raises(RuntimeError), cell.child("sst2-elmo seed 2", {"seed": 2}):
            raise RuntimeError("diverged")
    seeds = _runs(client, f"tags.`mlflow.parentRunId` = '{cell.run_id}'")
    assert {r.data.params["seed"]: r.info.status for r in seeds} == \
        {"0": "FINISHED", "1": "FINISHED", "2": "FAILED"}
    for r in seeds:
        history = client.get_metric_history(r.info.run_id, "train_loss")
        assert len(history) == (0 if r.data.params["seed"] == "2" else 2)
    assert "train_loss" not in client.get_run(cell.run_id).data.metrics


def _artifact_files(folder: Path) -> list[Path]:
    return sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())


def test_a_copied_checkout_logs_its_artifacts_into_itself_never_into_the_original(
        tmp_path, monkeypatch, caplog):
    """Issue 62 (2): `cp -a` of a checkout copies mlflow.db, whose artifact root is an absolute
    path into the original; a run in the copy must still log into the copy."""
    import shutil

    import mlflow

    from ctxrep import tracking

    original, copy = tmp_path / "original", tmp_path / "copy"
    original.mkdir()
    (original / "dvc.yaml").write_text("stages: {}\n")
    (original / "report.md").write_text("the original's report\n")
    monkeypatch.chdir(original)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset below")  # restored after the test: MLflow
    monkeypatch.delenv("MLFLOW_TRACKING_URI")                 # sets it in this process
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "in the original")
    with tracking.stage_run("report") as first:
        first.log_artifact(original / "report.md")
    shutil.copytree(original, copy, symlinks=True)              # as `cp -a` copies it
    in_original = _artifact_files(original / "mlartifacts")

    monkeypatch.chdir(copy)
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "in the copy")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # this checkout's own store, as a stage finds it
    (copy / "report.md").write_text("the copy's report\n")
    with caplog.at_level("WARNING", logger="ctxrep.tracking"):
        with tracking.stage_run("report") as second:
            second.log_artifact(copy / "report.md")

    copied = mlflow.MlflowClient(f"sqlite:///{copy / 'mlflow.db'}")
    assert copied.get_experiment_by_name("ctxrep").artifact_location == \
        (copy / "mlartifacts").as_uri()
    for run in (second, first):  # the new run, and the copied one's link to its copied files
        logged = Path(copied.get_run(run.run_id).info.artifact_uri.removeprefix("file://"))
        assert logged.is_relative_to(copy / "mlartifacts"), logged
    new = Path(copied.get_run(second.run_id).info.artifact_uri.removeprefix("file://"))
    assert (new / "report.md").read_text() == "the copy's report\n"
    assert _artifact_files(original / "mlartifacts") == in_original  # nothing new there
    kept = mlflow.MlflowClient(f"sqlite:///{original / 'mlflow.db'}")
    assert kept.get_experiment_by_name("ctxrep").artifact_location == \
        (original / "mlartifacts").as_uri()
    (said,) = [r.getMessage() for r in caplog.records if "another checkout" in r.getMessage()]
    assert str(copy / "mlartifacts") in said and str(original / "mlartifacts") in said


def test_an_artifact_root_chosen_on_purpose_or_a_store_elsewhere_is_left_alone(tmp_path):
    """Only a store's own ``<checkout>/mlartifacts`` follows the checkout."""
    from ctxrep import tracking

    root = tmp_path / "checkout"
    own = f"sqlite:///{root / 'mlflow.db'}"
    assert tracking.own_store(own, root)
    assert not tracking.own_store(f"sqlite:///{tmp_path / 'shared/mlflow.db'}", root)
    assert not tracking.own_store("http://mlflow-host:5000", root)
    wanted = tracking.artifact_root(root)
    for current in (wanted, "s3://bucket/artifacts", (tmp_path / "shared/artifacts").as_uri()):
        assert tracking.follow_checkout(own, current, wanted) is False


def test_the_headline_metrics_of_the_pipeline_run():
    from ctxrep.report.summary import flat_numbers

    summary = {"cells": {"sst2": {"elmo": {"mean": 0.6, "std": 0.02, "ci95": [0.55, 0.66]},
                                  "static": {"mean": 0.5, "std": 0.0, "ci95": None}}},
               "baselines": {"sst2": {"majority": 0.51}},
               "claims": [{"verdict": "reproduced"}, {"verdict": "reproduced"}]}
    got = flat_numbers(summary, {"bilm": {"val_ppl": 228.5, "steps": 30, "note": "x"},
                                 "bert": None})
    assert got == {"sst2.elmo.mean": 0.6, "sst2.elmo.std": 0.02, "sst2.elmo.ci95_low": 0.55,
                   "sst2.elmo.ci95_high": 0.66, "sst2.static.mean": 0.5, "sst2.static.std": 0.0,
                   "sst2.baseline.majority": 0.51, "claims.reproduced": 2,
                   "claims.contradicted": 0, "claims.inconclusive": 0,
                   "pretrain_bilm.val_ppl": 228.5, "pretrain_bilm.steps": 30}


# --------------------------------------------------------------------------------------------
# a shared `mlflow server`


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = _free_port()
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "server-artifacts")],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "w"),
        start_new_session=True)  # its own process group: the server and the workers it starts
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    try:
        import urllib.request

        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise AssertionError((tmp_path / "server.log").read_text()[-3000:])
                time.sleep(0.5)
        yield uri, tmp_path / "server-artifacts"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.slow
def test_a_stage_logs_to_a_shared_mlflow_server(server, tmp_path, tiny_mirror):
    import mlflow

    uri, artifacts = server
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    run_stage(repo, "locate_data.py", env={"MLFLOW_TRACKING_URI": uri,
                                           "CTXREP_DATA_MIRROR": str(tiny_mirror)})
    assert not (repo / "mlflow.db").exists() and not (repo / "mlartifacts").exists()
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("ctxrep")
    assert exp.artifact_location.startswith("mlflow-artifacts:")  # the server's, not a path here
    (stage,) = client.search_runs([exp.experiment_id], "tags.stage = 'locate_data'")
    assert stage.info.status == "FINISHED" and stage.data.params["profile"] == "default"
    parent = client.get_run(stage.data.tags["mlflow.parentRunId"])
    assert parent.data.tags["run_kind"] == "pipeline" and parent.data.params["profile"] == "default"
    # artifacts go through the server to its artifact store
    client.log_artifact(stage.info.run_id, str(repo / "params.yaml"))
    assert list(artifacts.rglob("params.yaml"))
