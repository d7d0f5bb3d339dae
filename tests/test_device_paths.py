"""The branches a GPU run takes, run on this CPU through the real stages: ``torch.compile``
(inductor, with g++) and bf16 autocast (``precision: bf16``) in both pretraining stages and in
BERT fine-tuning, each against the session's eager fp32 tiny run: the same steps on the same
data, and the same losses to a stated tolerance.

Tolerances: compiled kernels reorder float sums (1e-4 relative on the losses); bf16 keeps
8 bits of mantissa in the matmuls (weights, gradients and the optimizer stay fp32): 1 % on the
held-out perplexity or loss and on each training loss after the tiny profile's steps."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from ctxrep.report.inputs import read_curve
from tests.conftest import copy_run, run_stage, session_folder, set_profile


SETTINGS = {"compile=true": 1e-4, "precision=bf16": 1e-2}
# Inductor generates C++ for this CPU's own vector unit: a compiled CPU run is native, never
# portable (ctxrep.compute.check_compile); its eager reference is the tiny run's portable one.
NATIVE = {"compile=true": ["compute.isa=native"], "precision=bf16": []}


@pytest.fixture
def repo(tiny_run):
    return tiny_run.repo


def metrics(root, path):
    return json.loads((root / path).read_text())


class InductorCache:
    """Inductor's code cache, one per session: the compiled runs share the kernels their
    networks have in common (BERT's pretraining and fine-tuning share most: 15 of the
    fine-tuning's 37 s of CPU), as one machine's runs do."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(exist_ok=True)
        self.before = self.code()

    def code(self) -> set[Path]:
        return {p for p in self.folder.rglob("*") if p.suffix in (".py", ".cpp", ".so")}

    def wrote_code(self) -> bool:
        """Inductor wrote generated code since this test began: the compiled branch ran, not a
        silent eager fallback: a graph of the test's own is never in the cache before it. (A
        compiled run in another worker at the same time would write there too; in the suite's
        order, tests/conftest.py, these tests follow one another.)"""
        return bool(self.code() - self.before)


@pytest.fixture
def inductor(tmp_path_factory) -> InductorCache:
    return InductorCache(session_folder(tmp_path_factory) / "inductor")


def run(copy, inductor: InductorCache, *args):
    """A stage in ``copy``, with the session's inductor code cache."""
    return run_stage(copy, *args, env={"TORCHINDUCTOR_CACHE_DIR": str(inductor.folder)})


@pytest.mark.slow
@pytest.mark.usefixtures("without_mlflow")
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("stage,heldout", [("pretrain_bilm", "val_ppl"),
                                           ("pretrain_bert", "val_mlm_loss")])
def test_pretraining_compiled_or_in_bf16_matches_eager_fp32(repo, tmp_path, inductor, stage,
                                                            heldout, setting):
    copy = copy_run(repo, tmp_path / "repo")
    set_profile(copy, "tiny", [f"{stage}.{setting}", *NATIVE[setting]])
    run(copy, inductor, f"{stage}.py")
    eager = metrics(repo, f"metrics/{stage}.json")
    other = metrics(copy, f"metrics/{stage}.json")
    assert other["train_tokens"] == eager["train_tokens"] > 0  # the same steps on the same data
    assert other[heldout] == pytest.approx(eager[heldout], rel=SETTINGS[setting])
    eager_curve = read_curve(repo / f"dvclive/{stage}")
    curve = read_curve(copy / f"dvclive/{stage}")
    assert curve.steps == eager_curve.steps
    assert curve.train_loss == pytest.approx(eager_curve.train_loss, rel=SETTINGS[setting])
    if setting == "compile=true":
        assert inductor.wrote_code()
    else:  # bf16 ran: fp32 would have given the same bytes
        assert other[heldout] != eager[heldout]


@pytest.mark.slow
@pytest.mark.usefixtures("without_mlflow")
@pytest.mark.parametrize("setting", SETTINGS)
def test_fine_tuning_compiled_or_in_bf16_matches_eager_fp32(repo, tmp_path, inductor, setting):
    cell = ("finetune.py", "sst2", "bert-finetune")
    record = "metrics/transfer/sst2/bert-finetune.json"
    if setting == "compile=true":
        # Compiled dropout draws its masks from inductor's own generator, not eager's: the two
        # are compared without dropout (the pretraining runs above have none), an eager run too.
        eager_repo = copy_run(repo, tmp_path / "eager")
        set_profile(eager_repo, "tiny", ["transfer.bert-finetune.dropout=0.0"])
        run_stage(eager_repo, *cell)
        overrides = ["transfer.bert-finetune.dropout=0.0", f"transfer.bert-finetune.{setting}",
                     *NATIVE[setting]]
    else:
        eager_repo, overrides = repo, [f"transfer.bert-finetune.{setting}"]
    copy = copy_run(repo, tmp_path / "repo")
    set_profile(copy, "tiny", overrides)
    run(copy, inductor, *cell)
    eager, other = metrics(eager_repo, record), metrics(copy, record)
    assert other["seeds"] == eager["seeds"] and other["train_examples"] == eager["train_examples"]
    for a, b in zip(eager["curves"], other["curves"], strict=True):
        assert len(b["train_loss"]) == len(a["train_loss"])  # the same epochs
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=SETTINGS[setting])
    if setting == "compile=true":
        assert inductor.wrote_code()
        for key, scores in eager["scores"].items():  # the same predictions, near enough
            assert other["scores"][key]["values"] == pytest.approx(scores["values"], abs=1e-6)
    else:
        assert other["curves"] != eager["curves"]


def test_gpu_check_says_so_when_there_is_no_gpu(tmp_path):
    """bench/gpu_check.sh on a machine without nvidia-smi: exit 3, one clear line, nothing run."""
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")  # a driver that finds no GPU
    (tmp_path / "nvidia-smi").chmod(0o755)
    script = Path(__file__).resolve().parents[1] / "bench/gpu_check.sh"
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
                               "OUT": str(tmp_path / "out")})
    assert proc.returncode == 3
    assert "no NVIDIA GPU on this machine" in proc.stderr and "nothing was checked" in proc.stderr
    assert not (tmp_path / "out").exists()
