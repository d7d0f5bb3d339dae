"""A transfer cell end to end on the tiny profile: kill -9 mid-seed, rerun, same bytes."""

import json

import pytest

from ctxrep.report.inputs import read_eval_curve
from tests.conftest import compose, copy_run, kill_stage_when, run_stage, tree_hash

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("without_mlflow")]
CELL = ["sst2", "elmo"]
CKPT = "data/checkpoints/transfer/sst2/elmo"
METRICS = "metrics/transfer/sst2/elmo.json"
LIVE = "dvclive/transfer/sst2/elmo"
# long enough to be killed mid-seed (no early stopping)
OVERRIDES = ["transfer.elmo.epochs=40", "transfer.common.patience=0"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tiny_run):
    # the tiny run's task data and biLM features (OVERRIDES change none of them)
    repo = copy_run(tiny_run.repo, tmp_path_factory.mktemp("transfer") / "repo")
    compose(repo, "tiny", OVERRIDES)
    return repo


def test_killed_cell_resumes_its_seed_and_writes_the_same_bytes(repo):
    run_stage(repo, "transfer.py", *CELL)
    uninterrupted = (repo / METRICS).read_bytes()
    live = tree_hash(repo / LIVE)
    (repo / METRICS).unlink()

    def second_seed_checkpointed():  # seed 0 done, seed 1 part-way
        return any((p / "COMPLETE").exists() for p in (repo / CKPT).glob("*/seed1/step-*"))

    assert kill_stage_when(repo, "transfer.py", CELL, second_seed_checkpointed), \
        "the cell ended before it could be killed"
    assert not (repo / METRICS).exists(), "a killed cell left its metrics behind"
    rerun = run_stage(repo, "transfer.py", *CELL)
    assert "seed1/step-" in rerun.stderr and "resuming from" in rerun.stderr, "did not resume"
    assert (repo / METRICS).read_bytes() == uninterrupted
    assert tree_hash(repo / LIVE) == live, "the resumed seed's DVCLive curves differ"
    assert not list((repo / CKPT).rglob("step-*")), "checkpoints left after success"
    record = json.loads(uninterrupted)
    for seed, curve in zip(record["seeds"], record["curves"]):  # one dev point per epoch
        held = read_eval_curve(repo / LIVE / f"seed{seed}")
        assert held.metrics[f"val_{record['primary']}"] == pytest.approx(curve["dev"], abs=1e-6)
    cost = json.loads((repo / "reports/compute/transfer@sst2-elmo.json").read_text())
    seeds = json.loads(uninterrupted)["seeds"]
    assert cost["unit"] == "words" and cost["amount"] > 0 and cost["flops"] > 0 and len(seeds) == 2


def test_a_killed_cell_never_resumes_under_other_params(repo):
    """Checkpoints are keyed by the cell's params and inputs: after a kill, a rerun with another
    lr starts afresh and ends exactly where a clean run with that lr ends."""
    def first_seed_checkpointed():
        return any((p / "COMPLETE").exists() for p in (repo / CKPT).glob("*/seed0/step-*"))

    assert kill_stage_when(repo, "transfer.py", CELL, first_seed_checkpointed)
    compose(repo, "tiny", [*OVERRIDES, "transfer.elmo.lr=0.05"])
    try:
        rerun = run_stage(repo, "transfer.py", *CELL)
        assert "resuming from" not in rerun.stderr, "resumed a checkpoint of other params"
        after_kill = (repo / METRICS).read_bytes()
        (repo / METRICS).unlink()
        run_stage(repo, "transfer.py", *CELL)  # clean, nothing left to resume
        assert (repo / METRICS).read_bytes() == after_kill
    finally:
        compose(repo, "tiny", OVERRIDES)
    # Only the killed run's checkpoints remain (resumed if its params come back); the new
    # run's folder went when it finished.
    assert len(list((repo / CKPT).iterdir())) == 1


def test_learning_curve_stage_trains_on_a_nested_fraction_with_the_same_dev_and_eval(repo):
    overrides = [*OVERRIDES, "transfer.elmo.epochs=2", "learning_curve.tasks=[sst2]",
                 "learning_curve.fractions=[0.25,0.5]"]
    compose(repo, "tiny", overrides)
    try:
        run_stage(repo, "learning_curve.py", *CELL)
    finally:
        compose(repo, "tiny", OVERRIDES)
    record = json.loads((repo / "metrics/learning_curves/sst2/elmo.json").read_text())
    small, large = record["points"]
    assert [small["train_fraction"], large["train_fraction"]] == [0.25, 0.5]
    assert 0 < small["train_examples"] < large["train_examples"]
    assert small["dev_examples"] == large["dev_examples"]
    assert small["eval_examples"] == large["eval_examples"]
    for point in record["points"]:
        folder = repo / "data/learning_curves/sst2/elmo" / f"fraction{point['train_fraction']}"
        assert sorted(p.name for p in folder.iterdir()) == ["seed0.json", "seed1.json"]
    cost = json.loads((repo / "reports/compute/learning_curve@sst2-elmo.json").read_text())
    assert cost["unit"] == "words" and cost["amount"] > 0
