"""MLflow runs: a stage killed with -9 cannot end its own run; the next stage to start (of any
stage, so also when the killed one is skipped or restored from the run cache) does, and closes
the pipeline run the dead stage left open. Also: a stage that fills the disk says so."""

import os
import subprocess
import sys

import pytest


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
    with tracking.stage_run("pretrain_bilm"):
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


def test_runs_of_dead_processes_are_closed_at_the_next_pipeline_run_whatever_stage(
        tmp_path, monkeypatch):
    """`pretrain_bilm` killed with -9 inside a nested run; the next pipeline run skips it (the
    run cache restores it) and runs only `locate_data`: the dead runs end KILLED all the same.
    Runs whose owner is alive, or on another host, are left RUNNING; a reused pid is not
    mistaken for the owner."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "CTXREP_PIPELINE_RUN": "first"}
    killed = ("import os\nfrom ctxrep import tracking\n"
              "with tracking.stage_run('pretrain_bilm') as run, run.child('seed 0'):\n"
              "    os.kill(os.getpid(), 9)\n")
    proc = subprocess.run([sys.executable, "-c", killed], cwd=tmp_path, env=env)
    assert proc.returncode == -9
    client = mlflow.MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ctxrep")
    dead = client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'")
    assert len(dead) == 3  # the pipeline run, the stage run and its nested run
    assert all(r.data.tags["pid"] == dead[0].data.tags["pid"] for r in dead)

    from ctxrep import tracking

    def running(name, **tags):
        return client.create_run(exp.experiment_id, run_name=name,
                                 tags={"run_kind": "stage", "stage": name, **tags}).info.run_id

    me = tracking.owner_tags()
    elsewhere = running("extract", host="another-host", pid="999999999", pid_start="1.000")
    alive = running("tokenize", **me)
    reused = running("probe", **{**me, "pid_start": "12345.000"})

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "second")
    with tracking.stage_run("locate_data") as now:
        pipeline = client.get_run(now.parent_id)
        assert pipeline.data.tags["pid"] == me["pid"] and pipeline.data.tags["host"] == me["host"]
    status = lambda run_id: client.get_run(run_id).info.status  # noqa: E731
    assert [status(r.info.run_id) for r in dead] == ["KILLED"] * 3
    assert status(reused) == "KILLED"
    assert status(elsewhere) == "RUNNING" and status(alive) == "RUNNING"
    assert status(now.run_id) == "FINISHED" and status(now.parent_id) == "FINISHED"


def _stage_that_fills_the_disk(tmp_path, monkeypatch, exc):
    """Run stage `tokenize` (its MLflow run in a store in ``tmp_path``) whose write raises
    ``exc``, as torch.save and open() do on a full disk; return its SystemExit and the log."""

    import torch

    from ctxrep import stage as stage_module
    from tests.conftest import params_for_this_process

    params_for_this_process(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("CTXREP_PIPELINE_RUN", "full-disk")

    def full(*args, **kwargs):
        raise exc

    monkeypatch.setattr(torch, "save", full)
    messages = []
    monkeypatch.setattr(stage_module.log, "error", lambda fmt, *a: messages.append(fmt % a))
    try:
        with stage_module.stage("tokenize", "tokenize") as ctx:
            torch.save({"w": torch.zeros(2)}, "data/model.pt")
    except SystemExit as e:
        return e, messages, ctx
    raise AssertionError("the stage did not stop")


def test_a_full_disk_is_one_line_naming_the_file_and_exit_28(tmp_path, monkeypatch):
    import errno

    import mlflow

    exc = OSError(errno.ENOSPC, "No space left on device", "data/model.pt")
    stopped, messages, ctx = _stage_that_fills_the_disk(tmp_path, monkeypatch, exc)
    assert stopped.code == errno.ENOSPC == 28
    where = tmp_path / "data"
    assert messages == [f"tokenize: no space left on device while writing data/model.pt: free "
                        f"space (df -h {where}) and rerun; completed outputs are kept"]
    run = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"]).get_run(ctx.run.run_id)
    assert run.info.status == "FAILED"  # not left RUNNING


def test_torch_save_on_a_full_disk_says_the_disk_is_full(tmp_path, monkeypatch):
    # what torch.save raises when its zip writer meets ENOSPC: nothing says "disk"
    exc = RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 64 vs 0")
    stopped, messages, _ = _stage_that_fills_the_disk(tmp_path, monkeypatch, exc)
    assert stopped.code == 28
    assert messages == [f"tokenize: no space left on device while writing its outputs: free "
                        f"space (df -h {tmp_path}) and rerun; completed outputs are kept"]


def test_torch_save_past_the_file_size_limit_says_the_limit_not_the_disk(tmp_path, monkeypatch):
    # `ulimit -f 500` with room on the disk: the same "unexpected pos" as a full disk, exit 27
    from ctxrep import errors

    monkeypatch.setattr(errors, "file_size_limit", lambda: 500 * 512)
    monkeypatch.setattr(errors, "_full_places", lambda: None)
    exc = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    stopped, messages, _ = _stage_that_fills_the_disk(tmp_path, monkeypatch, exc)
    assert stopped.code == 27
    assert messages == ["tokenize: a file grew past this shell's file-size limit (256,000 bytes) "
                        "while writing its outputs (or the MLflow store): raise it (`ulimit -f "
                        "unlimited`) and rerun; completed outputs are kept"]


def test_a_real_torch_save_under_ulimit_f_is_read_as_the_limit(tmp_path):
    import resource
    import subprocess
    import sys

    code = ("import torch\n"
            "from ctxrep.errors import file_too_large, no_space_left\n"
            "try:\n"
            f"    torch.save(torch.zeros(100_000), {str(tmp_path / 'x.pt')!r})\n"
            "except RuntimeError as e:\n"
            "    print(file_too_large(e)[0], no_space_left(e)[0])\n")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.RLIM_INFINITY)))
    assert proc.stdout.split() == ["True", "True"], proc.stderr[-2000:]  # the stage asks the limit first


def test_other_errors_are_not_mistaken_for_a_full_disk(tmp_path, monkeypatch):
    import errno

    import pytest

    from ctxrep.errors import no_space_left

    assert no_space_left(OSError(errno.EACCES, "Permission denied", "x")) == (False, None)
    assert no_space_left(RuntimeError("CUDA out of memory")) == (False, None)
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/d/f.bin")
        except OSError as inner:
            raise RuntimeError("could not write the checkpoint") from inner
    except RuntimeError as outer:
        assert no_space_left(outer) == (True, "/d/f.bin")
    with pytest.raises(ValueError, match="boom"):
        _stage_that_fills_the_disk(tmp_path, monkeypatch, ValueError("boom"))


def test_a_stage_process_on_a_full_disk_exits_28_with_one_line_and_no_traceback(tmp_path):

    from tests.conftest import params_for_this_process

    params_for_this_process(tmp_path)  # the subprocess has the test process's environment
    code = ("from ctxrep.stage import stage\n"
            "with stage('tokenize', 'tokenize', track=False):\n"
            "    raise OSError(28, 'No space left on device', 'data/tokenized/shard-0.arrow')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 28
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "no space left" in x]
    assert line.endswith(f"tokenize: no space left on device while writing "
                         f"data/tokenized/shard-0.arrow: free space (df -h "
                         f"{tmp_path / 'data/tokenized'}) and rerun; completed outputs are kept")


@pytest.mark.slow
def test_ctxrep_mlflow_0_runs_a_stage_without_mlflow_and_with_the_same_outputs(tiny_mirror, tmp_path):
    import filecmp

    import mlflow

    from tests.conftest import run_stage, scratch_repo

    outputs = {}
    for switch in ("1", "0"):
        (tmp_path / f"mlflow-{switch}").mkdir()
        repo = scratch_repo(tmp_path / f"mlflow-{switch}", "tiny")
        env = {"CTXREP_DATA_MIRROR": str(tiny_mirror), "CTXREP_MLFLOW": switch}
        proc = run_stage(repo, "locate_data.py", env=env)
        outputs[switch] = repo / "data/sources"
        client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
        exp = client.get_experiment_by_name("ctxrep")
        runs = client.search_runs([exp.experiment_id]) if exp else []
        if switch == "1":
            assert [r.info.run_name for r in runs if r.data.tags.get("run_kind") == "stage"] == ["locate_data"]
        else:
            assert runs == [] and "no MLflow run (CTXREP_MLFLOW=0)" in proc.stderr
    same = filecmp.dircmp(outputs["1"], outputs["0"])
    assert not (same.diff_files or same.left_only or same.right_only), "outputs differ"
    if not any(outputs["1"].iterdir()):
        pytest.fail("locate_data wrote nothing to compare")


def test_a_locked_store_is_one_line_naming_the_way_out():
    from ctxrep.errors import InputError
    from ctxrep.tracking import store_errors

    class OperationalError(Exception):
        pass

    with pytest.raises(InputError, match=r"locked by another process.*CTXREP_MLFLOW=0"):
        with store_errors("sqlite:////x/mlflow.db"):
            raise OperationalError("(sqlite3.OperationalError) database is locked")
    with pytest.raises(OperationalError, match="no such table"):
        with store_errors("sqlite:////x/mlflow.db"):
            raise OperationalError("no such table: runs")
