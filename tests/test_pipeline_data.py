"""The data stages through DVC: outputs, no-op rerun, MLflow runs and tags, the data source as a
dependency. Read off the session's tiny run (``tiny_run``); commands run in a copy of it."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import NO_MLFLOW, copy_run, dvc, scratch_repo

pytestmark = pytest.mark.slow


@pytest.fixture
def repo(tiny_run):
    return tiny_run.repo


@pytest.fixture(scope="module")
def copy(tiny_run, tmp_path_factory):
    """A copy of the run for the tests that run `dvc repro` (plain, not an experiment) in it."""
    return copy_run(tiny_run.repo, tmp_path_factory.mktemp("data-copy") / "repo")


def test_outputs_and_manifests(repo):
    manifest = json.loads((repo / "data/raw/corpus/MANIFEST.json").read_text())
    assert manifest["source"] == "mirror" and manifest["rows"]["train"] == 60  # tiny: corpus_max_docs
    for task in ("sst2", "conll2003", "ud_pos", "wic", "squad"):  # the tiny profile's
        m = json.loads((repo / f"data/raw/tasks/{task}/MANIFEST.json").read_text())
        assert m["available"] and m["source"] == "mirror", task
    meta = json.loads((repo / "data/tokenized/meta.json").read_text())
    assert meta["splits"]["train"]["docs"] + meta["splits"]["validation"]["docs"] == 60
    assert json.loads((repo / "metrics/tokenize.json").read_text())["train_docs"] > 0
    cost = json.loads((repo / "reports/compute/tokenize.json").read_text())
    assert cost["unit"] == "words" and "wall_s" not in cost  # it differs run to run: not DVC's
    assert json.loads((repo / "reports/timings/tokenize.json").read_text())["wall_s"] > 0
    assert cost["amount"] == sum(s["words"] for s in meta["splits"].values())
    assert not list((repo / "data").rglob(".*.tmp-*")), "a temporary output was left behind"


def test_second_repro_is_a_no_op(copy, tiny_mirror):
    out = dvc(copy, "repro", env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    ran = [line for line in out.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'locate_data':"], out  # it always looks; nothing else runs


def test_the_data_source_is_a_dependency(tmp_path, tiny_mirror):
    """Fetched once with no mirror (unavailable), then with the mirror: the fetch reruns and
    serves the mirror; a changed mirror file reruns it again."""
    repo = scratch_repo(tmp_path, "tiny")
    no_mirror = {"CTXREP_DATA_MIRROR": "", "HF_HUB_OFFLINE": "1", **NO_MLFLOW}
    dvc(repo, "repro", "fetch_tasks@wic", env=no_mirror)
    assert not json.loads((repo / "data/raw/tasks/wic/MANIFEST.json").read_text())["available"]
    mirror = tmp_path / "mirror"
    shutil.copytree(tiny_mirror, mirror)
    out = dvc(repo, "repro", "fetch_tasks@wic", env={"CTXREP_DATA_MIRROR": str(mirror), **NO_MLFLOW})
    assert "Running stage 'fetch_tasks@wic'" in out
    manifest = json.loads((repo / "data/raw/tasks/wic/MANIFEST.json").read_text())
    assert manifest["available"] and manifest["source"] == "mirror"
    gold = mirror / "tasks/wic/train/train.gold.txt"
    gold.write_text(gold.read_text().replace("F\n", "T\n", 1))
    out = dvc(repo, "repro", "fetch_tasks@wic", env={"CTXREP_DATA_MIRROR": str(mirror), **NO_MLFLOW})
    assert "Running stage 'fetch_tasks@wic'" in out
    assert json.loads((repo / "data/raw/tasks/wic/MANIFEST.json").read_text()) != manifest


def test_one_mlflow_run_per_stage_with_tags(repo):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctxrep")
    runs = client.search_runs([exp.experiment_id])
    names = sorted(r.info.run_name for r in runs)
    assert names.count("tokenize") == 1 and names.count("fetch_corpus") == 1
    tasks = yaml.safe_load((repo / "params.yaml").read_text())["tasks"]
    assert sum(n.startswith("fetch_tasks@") for n in names) == len(tasks)   # one per task
    tok = next(r for r in runs if r.info.run_name == "tokenize")
    assert len(tok.data.tags["git_commit"]) == 40 and tok.data.tags["git_dirty"] in ("true", "false")
    assert tok.data.tags["input:data/raw/corpus"].endswith(".dir")
    assert tok.data.params["tokenize.wordpiece_vocab_size"] == "2000"
    assert tok.data.params["profile"] == "tiny"


def test_stages_of_one_dvc_repro_share_a_pipeline_run_and_two_invocations_do_not(copy,
                                                                                 tiny_mirror):
    """Plain `dvc repro` (no `make`, no experiment): the key is the DVC process's."""
    import mlflow

    env = {"CTXREP_DATA_MIRROR": str(tiny_mirror)}
    dvc(copy, "repro", "-f", "fetch_tasks@wic", "fetch_tasks@sst2", env=env)  # same bytes again
    dvc(copy, "repro", "locate_data", env=env)  # a second invocation (locate_data always runs)
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{copy / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctxrep").experiment_id
    runs = client.search_runs([exp], "tags.run_kind = 'stage'", max_results=1000,
                              order_by=["attributes.start_time DESC"])
    forced = [r for r in runs if r.info.run_name in ("fetch_tasks@wic", "fetch_tasks@sst2")][:2]
    first = {r.data.tags["mlflow.parentRunId"] for r in forced}
    assert len(forced) == 2 and len(first) == 1
    parent = client.get_run(first.pop())
    members = {r.info.run_name for r in runs
               if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert members == {"fetch_tasks@wic", "fetch_tasks@sst2"}, members
    assert parent.data.tags["pipeline_key_source"] == "dvc" and "dvc_exp_name" not in parent.data.tags
    assert parent.data.params["profile"] == "tiny" and parent.info.status == "FINISHED"
    # locate_data ran first in both invocations and found the sources as recorded: its runs are
    # deleted (a no-op leaves nothing), the second one's with its own, empty, pipeline run
    from mlflow.entities import ViewType

    second, first_noop = client.search_runs(
        [exp], "tags.stage = 'locate_data'", run_view_type=ViewType.ALL, max_results=2,
        order_by=["attributes.start_time DESC"])
    assert {second.info.lifecycle_stage, first_noop.info.lifecycle_stage} == {"deleted"}
    key = parent.data.tags["pipeline_key"]
    assert first_noop.data.tags["pipeline_key"] == key != second.data.tags["pipeline_key"]
    assert client.get_run(second.data.tags["mlflow.parentRunId"]).info.lifecycle_stage == "deleted"


def test_bad_param_stops_before_work(tmp_path):
    repo = scratch_repo(tmp_path, "tiny")   # it stops before reading any input
    params = repo / "params.yaml"
    original = params.read_text()
    params.write_text(original.replace("num_proc: 2", "num_proc: -1"))
    try:
        proc = subprocess.run([sys.executable, "stages/tokenize_corpus.py"], cwd=repo,
                              capture_output=True, text=True,
                              env={**os.environ, "MLFLOW_TRACKING_URI": "sqlite:////nonexistent/x"})
    finally:
        params.write_text(original)
    assert proc.returncode == 2
    assert "tokenize.num_proc" in proc.stderr and ">= 1" in proc.stderr
