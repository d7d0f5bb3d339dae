"""MLflow runs: a stage killed with -9 cannot end its own run; the next start of it does."""

import os
import subprocess
import sys


def test_a_run_left_running_by_kill_9_is_marked_killed_by_the_next_start(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    killed = ("import os\nfrom ctxrep import tracking\n"
              "with tracking.stage_run('tokenize', {'tokenize': {'seed': 0}}):\n"
              "    os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", killed], cwd=tmp_path, env=env)
    assert proc.returncode == -9
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ctxrep")
    (orphan,) = client.search_runs([exp.experiment_id])
    assert orphan.info.status == "RUNNING"

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    from ctxrep import tracking

    with tracking.stage_run("tokenize"):
        pass
    with tracking.stage_run("pretrain_bilm"):  # another stage's runs are not its business
        pass
    runs = {r.info.run_id: r.info.status for r in client.search_runs([exp.experiment_id])}
    assert runs.pop(orphan.info.run_id) == "KILLED"
    assert sorted(runs.values()) == ["FINISHED", "FINISHED"]
