"""The training-curve files DVC plots: per-seed transfer curves and the held-out pretraining
curve (the pipeline tests run them for real; these pin the format and the error cases)."""

import csv

import pytest

from ctxrep.pretraining.loop import TrainResult, write_eval_curve
from ctxrep.transfer.curves import write_seed_curves
from ctxrep.transfer.record import CellRecord


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def cell(seeds: list[int], curves: list[dict] = (), **kw) -> CellRecord:
    """An sst2/elmo cell record with only what the curve files read."""
    return CellRecord(task="sst2", method="elmo", kind="classification", metric="accuracy",
                      metrics=["accuracy"], primary="accuracy", eval_split="validation",
                      seeds=seeds, curves=list(curves), **kw)


def test_one_tsv_per_seed_with_the_records_curves(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    curves = [{"train_loss": [0.9, 0.7, 0.65], "dev": [0.5, 0.625, 0.6]},
              {"train_loss": [0.8], "dev": [0.55]}]  # seed 7 stopped after one epoch
    folder = write_seed_curves("sst2", "elmo", cell([3, 7], curves))
    assert sorted(p.name for p in folder.iterdir()) == ["seed3.tsv", "seed7.tsv"]
    rows = read_tsv(folder / "seed3.tsv")
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert [float(r["dev"]) for r in rows] == [0.5, 0.625, 0.6]
    assert [float(r["train_loss"]) for r in rows] == [0.9, 0.7, 0.65]
    assert len(read_tsv(folder / "seed7.tsv")) == 1
    # rewritten whole: a seed that is gone leaves no file behind
    write_seed_curves("sst2", "elmo", cell([3], curves[:1]))
    assert [p.name for p in folder.iterdir()] == ["seed3.tsv"]


def test_an_unavailable_task_leaves_an_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = write_seed_curves("wic", "elmo", cell([0], unavailable="no data"))
    assert folder.is_dir() and not list(folder.iterdir())


@pytest.mark.parametrize("curves", [
    [{"train_loss": [0.9, 0.8], "dev": [0.5]}],                   # epochs disagree
    [{"train_loss": [0.9], "dev": [0.5]}, {"train_loss": [0.9], "dev": [0.5]}],  # 2 for 1 seed
])
def test_inconsistent_curves_are_an_error(tmp_path, monkeypatch, curves):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="sst2/elmo"):
        write_seed_curves("sst2", "elmo", cell([0], curves))
    assert not (tmp_path / "metrics/curves/sst2/elmo").exists()


def test_held_out_curve_has_a_row_per_evaluation(tmp_path):
    result = TrainResult(30, 0, 0.0, evals=[[10, {"val_ppl": 900.5, "val_ppl_forward": 1000.0}],
                                            [20, {"val_ppl": 700.25, "val_ppl_forward": 800.0}],
                                            [30, {"val_ppl": 650.0, "val_ppl_forward": 700.0}]])
    write_eval_curve(tmp_path / "val.tsv", result)
    rows = read_tsv(tmp_path / "val.tsv")
    assert [int(r["step"]) for r in rows] == [10, 20, 30]
    assert [float(r["val_ppl"]) for r in rows] == [900.5, 700.25, 650.0]
    assert list(rows[0]) == ["step", "val_ppl", "val_ppl_forward"]
