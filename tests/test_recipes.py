"""Pretraining recipes compared by time to perplexity, read from `dvc exp show --json` output
and each experiment's compute ledger (here: a dict standing in for the DVC cache)."""

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

LEDGERS = {
    "b" * 40: {"tokens_per_s": 2000.0, "heldout_curve": [
        {"step": 150, "train_s": 100.0, "val_ppl": 350.0}, {"step": 300, "train_s": 200.0, "val_ppl": 250.0}]},
    "c" * 40: {"tokens_per_s": 2100.0, "heldout_curve": [
        {"step": 150, "train_s": 95.0, "val_ppl": 240.0}, {"step": 300, "train_s": 190.0, "val_ppl": 180.0}]},
    "d" * 40: {"tokens_per_s": 2000.0},  # a ledger from before curves were timed
}


def read(rev: str, path: str) -> str:
    assert path == "reports/compute/pretrain_bilm.json"
    if rev not in LEDGERS:
        raise FileNotFoundError(path)
    return json.dumps(LEDGERS[rev])


def test_recipes_are_timed_curves_of_matching_experiments_only():
    found = recipes(SHOW, "bilm", "bilm-recipe-*", read=read)
    assert [r.experiment for r in found] == ["bilm-recipe-base", "bilm-recipe-fast"]
    assert found[1].curve == [(150, 95.0, 240.0), (300, 190.0, 180.0)]
    assert found[1].first_at(190, lower_is_better=True) == (300, 190.0)
    assert found[0].first_at(190, lower_is_better=True) is None


def test_table_names_what_changed_and_when_the_target_was_reached():
    found = with_reference_first(recipes(SHOW, "bilm", "bilm-recipe-*", read=read), "bilm-recipe-fast")
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
    monkeypatch.setattr("ctxrep.recipes.read_from_dvc", read)
    assert run_recipes(["--show-json", str(show), "--experiments", "bilm-recipe-*", "--out", str(tmp_path)]) == 0
    assert "bilm-recipe-fast" in (tmp_path / "recipes.md").read_text()
    assert (tmp_path / "recipes.png").read_bytes()[:4] == b"\x89PNG"


def test_unknown_model_is_refused():
    with pytest.raises(SystemExit):
        ctxrep_main(["recipes", "--model", "gpt"])
