"""Pretraining recipes compared by time to perplexity, read from `dvc exp show --json` output
and each experiment's timed held-out curve (here: a dict standing in for its MLflow run)."""

from __future__ import annotations

import json

import pytest

from ctxrep.cli import main as ctxrep_main
from ctxrep.recipes import recipes, table, with_reference_first


def run_recipes(argv: list[str]) -> int:
    """``ctxrep recipes ARGV...``'s exit status."""
    try:
        return ctxrep_main(["recipes", *argv])
    except SystemExit as end:
        return end.code


def exp(rev: str, name: str, lr: float) -> dict:
    data = {"rev": rev, "params": {"params.yaml": {"data": {"pretrain_bilm": {"lr": lr, "steps": 300}}}},
            "metrics": {}}
    return {"name": name, "executor": None, "revs": [{"rev": rev, "name": name, "data": data}]}


SHOW = [{"rev": "workspace", "name": None, "data": None, "experiments": None},
        {"rev": "a" * 40, "name": "main", "data": None,
         "experiments": [exp("b" * 40, "bilm-recipe-base", 0.002), exp("c" * 40, "bilm-recipe-fast", 0.005),
                         exp("d" * 40, "bilm-recipe-untimed", 0.01), exp("e" * 40, "other", 0.002)]}]

TIMED = {
    "bilm-recipe-base": {"tokens_per_s": 2000.0, "heldout_curve": [
        {"step": 150, "train_s": 100.0, "val_ppl": 350.0}, {"step": 300, "train_s": 200.0, "val_ppl": 250.0}]},
    "bilm-recipe-fast": {"tokens_per_s": 2100.0, "heldout_curve": [
        {"step": 150, "train_s": 95.0, "val_ppl": 240.0}, {"step": 300, "train_s": 190.0, "val_ppl": 180.0}]},
    "bilm-recipe-untimed": {"tokens_per_s": 2000.0},  # no held-out point was timed
}


def timed(experiment: str, model: str) -> dict | None:
    assert model == "bilm"
    return TIMED.get(experiment)  # None: no finished pretraining run of that experiment


def test_recipes_are_timed_curves_of_matching_experiments_only():
    found = recipes(SHOW, "bilm", "bilm-recipe-*", timed=timed)
    assert [r.experiment for r in found] == ["bilm-recipe-base", "bilm-recipe-fast"]
    assert found[1].curve == [(150, 95.0, 240.0), (300, 190.0, 180.0)]
    assert found[1].first_at(190, lower_is_better=True) == (300, 190.0)
    assert found[0].first_at(190, lower_is_better=True) is None


def test_table_names_what_changed_and_when_the_target_was_reached():
    found = with_reference_first(recipes(SHOW, "bilm", "bilm-recipe-*", timed=timed), "bilm-recipe-fast")
    text = table(found, "bilm", 190)
    fast, base = [line for line in text.splitlines() if line.startswith("| bilm-recipe")]
    assert "(reference)" in fast and "190 s (step 300)" in fast and "180.0" in fast
    assert "lr=0.002" in base and "not reached" in base and "vs bilm-recipe-fast" in text
    with pytest.raises(SystemExit, match="no timed experiment"):
        with_reference_first(found, "bilm-recipe-untimed")
    assert "No experiment" in table([], "bilm", 190)


def test_command_line_writes_table_and_figure(tmp_path, monkeypatch):
    show = tmp_path / "show.json"
    show.write_text(json.dumps(SHOW))
    monkeypatch.setattr("ctxrep.recipes.timed_curve_from_mlflow", timed)
    assert run_recipes(["--show-json", str(show), "--experiments", "bilm-recipe-*", "--out", str(tmp_path)]) == 0
    assert "bilm-recipe-fast" in (tmp_path / "recipes.md").read_text()
    assert (tmp_path / "recipes.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_model_is_refused():
    with pytest.raises(SystemExit):
        ctxrep_main(["recipes", "--model", "gpt"])


def test_timed_curve_is_read_from_the_experiments_pretraining_run(tmp_path, monkeypatch):
    import mlflow

    from ctxrep.recipes import timed_curve_from_mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    experiment = client.create_experiment("ctxrep")
    for name, stage, seconds in [("bilm-recipe-base", "pretrain_bilm", 100.0),
                                 ("bilm-recipe-base", "pretrain_bert", 5.0),   # another stage
                                 ("bilm-recipe-fast", "pretrain_bilm", 90.0)]:
        run = client.create_run(experiment, tags={"dvc_exp_name": name, "stage": stage})
        for step, ppl in [(150, 350.0), (300, 250.0)]:
            client.log_metric(run.info.run_id, "val_ppl", ppl, step=step)
            client.log_metric(run.info.run_id, "train_s", seconds * step / 150, step=step)
        client.log_metric(run.info.run_id, "train_loss", 6.0, step=10)  # not a held-out point
        client.log_metric(run.info.run_id, "tokens_per_s", 2000.0)
        client.set_terminated(run.info.run_id)
    assert timed_curve_from_mlflow("bilm-recipe-base", "bilm") == {
        "tokens_per_s": 2000.0, "heldout_curve": [{"step": 150, "train_s": 100.0, "val_ppl": 350.0},
                                                  {"step": 300, "train_s": 200.0, "val_ppl": 250.0}]}
    assert timed_curve_from_mlflow("bilm-recipe-missing", "bilm") is None
