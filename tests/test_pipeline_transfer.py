"""A transfer cell end to end on the tiny profile: kill -9 mid-seed, rerun, same bytes."""

import json

import pytest
import yaml

from tests.conftest import kill_stage_when, run_stage
from tests.test_pipeline_models import tokenized_repo

pytestmark = pytest.mark.slow
CELL = ["sst2", "elmo"]
CKPT = "data/checkpoints/transfer/sst2/elmo"
METRICS = "metrics/transfer/sst2/elmo.json"


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tiny_mirror):
    repo = tokenized_repo(tmp_path_factory.mktemp("transfer"), tiny_mirror)
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["transfer"]["elmo"]["epochs"] = 40  # long enough to be killed mid-seed
    profile = yaml.safe_load((repo / "profiles/tiny.yaml").read_text())
    for grid in (params["grid"], profile["grid"]):  # the two must agree (config.check_grid)
        grid["tasks"] = ["sst2"]  # extract only what this cell needs
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (repo / "profiles/tiny.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    run_stage(repo, "fetch_task.py", "sst2", env={"CTXREP_DATA_MIRROR": str(tiny_mirror)})
    run_stage(repo, "pretrain_bilm.py")
    run_stage(repo, "extract.py", "bilm")
    return repo


def test_killed_cell_resumes_its_seed_and_writes_the_same_bytes(repo):
    run_stage(repo, "transfer.py", *CELL)
    uninterrupted = (repo / METRICS).read_bytes()
    (repo / METRICS).unlink()

    def second_seed_checkpointed():  # seed 0 done, seed 1 part-way
        return any((p / "COMPLETE").exists() for p in (repo / CKPT / "seed1").glob("step-*"))

    assert kill_stage_when(repo, "transfer.py", CELL, second_seed_checkpointed), \
        "the cell ended before it could be killed"
    assert not (repo / METRICS).exists(), "a killed cell left its metrics behind"
    rerun = run_stage(repo, "transfer.py", *CELL)
    assert "seed1/step-" in rerun.stderr and "resuming from" in rerun.stderr, "did not resume"
    assert (repo / METRICS).read_bytes() == uninterrupted
    assert not list((repo / CKPT).rglob("step-*")), "checkpoints left after success"
    cost = json.loads((repo / "metrics/compute/transfer@sst2-elmo.json").read_text())
    seeds = json.loads(uninterrupted)["seeds"]
    assert cost["unit"] == "words" and cost["amount"] > 0 and cost["flops"] > 0 and len(seeds) == 2
