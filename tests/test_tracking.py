"""MLflow runs: a stage killed with -9 cannot end its own run; the next start of it does, and
closes the pipeline run the dead stage left open."""

import os
import subprocess
import sys


def test_a_run_left_running_by_kill_9_is_marked_killed_by_the_next_start(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    env.pop("CTXREP_PIPELINE_RUN", None)
    killed = ("import os\nfrom ctxrep import tracking\n"
              "with tracking.stage_run('tokenize', {'tokenize': {'seed': 0}}):\n"
              "    os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", killed], cwd=tmp_path, env=env)
    assert proc.returncode == -9
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ctxrep")
    (orphan,) = client.search_runs([exp.experiment_id], "tags.stage = 'tokenize'")
    assert orphan.info.status == "RUNNING"
    pipeline = client.get_run(orphan.data.tags["mlflow.parentRunId"])
    assert pipeline.info.status == "RUNNING" and pipeline.data.tags["run_kind"] == "pipeline"

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("CTXREP_PIPELINE_RUN", raising=False)
    from ctxrep import tracking

    with tracking.stage_run("tokenize"):
        pass
    with tracking.stage_run("pretrain_bilm"):  # another stage's runs are not its business
        pass
    stages = {r.info.run_id: r.info.status
              for r in client.search_runs([exp.experiment_id], "tags.run_kind = 'stage'")}
    assert stages.pop(orphan.info.run_id) == "KILLED"
    assert sorted(stages.values()) == ["FINISHED", "FINISHED"]
    assert client.get_run(pipeline.info.run_id).info.status == "KILLED"


def test_final_values_go_at_the_last_step_and_params_are_logged_once(tmp_path, monkeypatch):
    """A history never jumps back to step 0 when a stage logs its final numbers, and a param is
    an MLflow param, not also a tag."""
    import mlflow

    from ctxrep import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "steps")
    with tracking.stage_run("pretrain_bilm", {"pretrain_bilm": {"lr": 0.5}}) as run:
        for step in (10, 20, 30):
            run.log_metrics({"val_ppl": 100.0 - step}, step=step)
        run.log_metrics({"val_ppl": 70.0, "wall_s": 1.0})  # the final numbers, no step
        with run.child("seed 0") as child:
            child.log_metrics({"eval": 0.5})               # a run that never logged a step
    client = mlflow.MlflowClient(uri)
    steps = [m.step for m in client.get_metric_history(run.run_id, "val_ppl")]
    assert steps == sorted(steps) and steps[-1] == 30
    assert [m.step for m in client.get_metric_history(child.run_id, "eval")] == [0]
    logged = client.get_run(run.run_id).data
    assert logged.params["pretrain_bilm.lr"] == "0.5"
    assert not [t for t in logged.tags if t.startswith("param.")]


def test_git_dirty_ignores_the_lock_dvc_rewrites_during_the_run(tmp_path):
    from ctxrep.tracking import git_state

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a",
                            "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"})

    git("init", "-q")
    for name in ("dvc.lock", "params.yaml"):
        (tmp_path / name).write_text("a\n")
    git("add", ".")
    git("commit", "-qm", "x")
    (tmp_path / "dvc.lock").write_text("b\n")
    assert git_state(tmp_path)["git_dirty"] == "false"
    (tmp_path / "params.yaml").write_text("b\n")
    assert git_state(tmp_path)["git_dirty"] == "true"


def test_a_no_op_check_leaves_no_run_and_no_empty_pipeline_run(tmp_path, monkeypatch):
    """`ctx.unchanged()` (locate_data when the sources are as recorded): the stage's run and its
    pipeline run, if nothing else ran in it, are deleted; the stages that do run next get a
    pipeline run of their own."""
    import mlflow

    from ctxrep import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "no-op")
    with tracking.stage_run("locate_data") as noop:
        pass
    tracking.discard(noop)
    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("ctxrep")
    assert client.search_runs([exp.experiment_id]) == []  # active runs only

    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "work")  # locate_data first, then real work
    with tracking.stage_run("locate_data") as noop:
        pass
    tracking.discard(noop)
    with tracking.stage_run("tokenize"):
        pass
    (pipeline,) = client.search_runs([exp.experiment_id], "tags.run_kind = 'pipeline'")
    (stage,) = client.search_runs([exp.experiment_id], "tags.run_kind = 'stage'")
    assert stage.data.tags["stage"] == "tokenize"
    assert stage.data.tags["mlflow.parentRunId"] == pipeline.info.run_id
