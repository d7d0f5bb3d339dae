"""DDP under the shared loop: two CPU processes (gloo) take the same steps as one process, on a
toy objective and through the real pretraining stages, started by DVC under torchrun."""

import json
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import yaml
from safetensors.torch import load_file

from ctxrep.training import loop
from ctxrep.training.distributed import init_distributed
from tests.conftest import copy_run, dvc, set_profile
from tests.test_loop import ToyObjective, cfg, weights

# Largest weight difference allowed between 2 processes and 1 after the tiny profile's 30
# steps: the global batch, its masks and its loss normalisation are the same; only float sums
# are ordered otherwise (two ranks' gradients all-reduced; one thread per rank).
WEIGHT_TOLERANCE = 1e-4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, ckpt, out):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "WORLD_SIZE": str(world), "RANK": str(rank), "LOCAL_RANK": str(rank)})
    torch.set_num_threads(1)
    d = init_distributed()
    obj = ToyObjective(batch_size=8)
    obj.model[1].p = 0.0  # dropout masks depend on the micro-batch shape, not on the math
    loop.train(obj, cfg(steps=6, checkpoint_every=0), ckpt, dist_info=d)
    if rank == 0:
        torch.save(weights(obj.model), out)
    dist.destroy_process_group()


@pytest.mark.slow
def test_two_processes_match_one_on_the_same_global_batch(tmp_path):
    single = ToyObjective(batch_size=8)
    single.model[1].p = 0.0
    loop.train(single, cfg(steps=6, checkpoint_every=0), tmp_path / "single")
    out = tmp_path / "ddp.pt"
    mp.spawn(_worker, args=(2, _free_port(), tmp_path / "ddp", out), nprocs=2, join=True)
    assert torch.allclose(torch.load(out, weights_only=True), weights(single.model), atol=1e-6)


@pytest.mark.slow
@pytest.mark.usefixtures("without_mlflow")
def test_pretraining_stages_under_torchrun_in_dvc_match_one_process(tiny_run, tmp_path):
    """`launch.nproc_per_node=2`: DVC runs both pretraining stages under torchrun (2 CPU
    processes, gloo), each rank a slice of the same global batch; the weights are the
    one-process run's up to float summation order, and dvc.lock records how many processes
    ran in an entry of the same shape."""
    repo = tiny_run.repo
    copy = copy_run(repo, tmp_path / "repo")
    set_profile(copy, "tiny", ["launch.nproc_per_node=2"])
    dvc(copy, "repro", "--single-item", "pretrain_bilm", "pretrain_bert")
    one = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    two = yaml.safe_load((copy / "dvc.lock").read_text())["stages"]
    for stage, model, heldout in (("pretrain_bilm", "bilm", "val_ppl"),
                                  ("pretrain_bert", "bert", "val_mlm_loss")):
        assert two[stage]["params"]["params.yaml"]["launch"] == {"nproc_per_node": 2, "nnodes": 1}
        assert one[stage]["params"]["params.yaml"]["launch"] == {"nproc_per_node": 1, "nnodes": 1}
        assert two[stage]["cmd"] == one[stage]["cmd"]
        assert [o["path"] for o in two[stage]["outs"]] == [o["path"] for o in one[stage]["outs"]]
        assert [d["path"] for d in two[stage]["deps"]] == [d["path"] for d in one[stage]["deps"]]
        weights_one = load_file(repo / f"data/models/{model}/model.safetensors")
        weights_two = load_file(copy / f"data/models/{model}/model.safetensors")
        assert weights_two.keys() == weights_one.keys()
        worst = max(float((weights_two[k] - weights_one[k]).abs().max()) for k in weights_one)
        assert 0 < worst <= WEIGHT_TOLERANCE, f"{stage}: weights differ by up to {worst:.2e}"
        m1 = json.loads((repo / f"metrics/{stage}.json").read_text())
        m2 = json.loads((copy / f"metrics/{stage}.json").read_text())
        assert m2["train_tokens"] == m1["train_tokens"]
        assert m2[heldout] == pytest.approx(m1[heldout], rel=1e-3)


def test_launch_runs_the_stage_itself_or_torchrun_as_the_params_say():
    from ctxrep.launch import command

    assert command("stages/pretrain_bert.py", 1, 1) == [sys.executable, "stages/pretrain_bert.py"]
    two = command("stages/pretrain_bert.py", 2, 1)
    assert os.path.basename(two[0]) == "torchrun" and two[-1] == "stages/pretrain_bert.py"
    assert {"--nnodes=1", "--nproc-per-node=2", "--standalone"} <= set(two)
    with pytest.raises(SystemExit, match="CTXREP_RDZV_ENDPOINT=host:port"):
        command("stages/pretrain_bert.py", 8, 2, env={})
    with pytest.raises(SystemExit, match="CTXREP_NODE_RANK"):  # a rank the job does not have
        command("stages/pretrain_bert.py", 8, 2, env={"CTXREP_RDZV_ENDPOINT": "h:29500",
                                                     "CTXREP_NODE_RANK": "2"})
    nodes = command("stages/pretrain_bert.py", 8, 2, env={"CTXREP_RDZV_ENDPOINT": "node0:29500",
                                                          "CTXREP_NODE_RANK": "1"})
    assert {"--nnodes=2", "--nproc-per-node=8", "--node-rank=1", "--master-addr=node0",
            "--master-port=29500"} <= set(nodes)


def test_a_stage_refuses_another_number_of_processes_than_launch_says(monkeypatch):
    from ctxrep.config import ParamError

    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(ParamError, match="launch.nproc_per_node.*python -m ctxrep.launch"):
        init_distributed(expected_world=2)
    assert init_distributed(expected_world=1).world == 1
