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
