"""The pretraining-budget sweep read from `dvc exp show --json` output (DVC's ExpState /
ExpRange layout): points per task, the table, the figure, and the command line."""

from __future__ import annotations

import json

from ctxrep.report.summary import claim_metrics, headline, pretrain_headlines
from ctxrep.cli import main as ctxrep_main
from ctxrep.sweep import sweep_points


def run_sweep(argv: list[str]) -> int:
    """``ctxrep sweep ARGV...``'s exit status."""
    try:
        return ctxrep_main(["sweep", *argv])
    except SystemExit as end:
        return end.code


def exp_data(tokens: int, claims: list[dict]) -> dict:
    """An experiment's `data` as dvc exp show gives it, with headline.json and claims.json as
    the report writes them from a summary holding ``claims``."""
    summary = {"cells": {"ud_pos": {"elmo": {"mean": 0.8}}}, "claims": claims,
               "pretrain": pretrain_headlines({"bilm": {"train_tokens": tokens, "params": 1}})}
    return {"rev": "x", "params": {}, "metrics": {
        "metrics/headline.json": {"data": headline(summary)},
        "metrics/claims.json": {"data": claim_metrics(summary)}}}


def claim(task: str, estimate: float, low: float, high: float, better="elmo", worse="static"):
    return {"better": better, "worse": worse, "task": task, "claim": "…", "source": "…",
            "estimate": estimate, "ci95": [low, high], "verdict": "…"}


SHOW = [
    {"rev": "workspace", "name": None, "data": exp_data(999, []), "experiments": None},
    {"rev": "a" * 40, "name": "main", "data": exp_data(800_000, [claim("ud_pos", -0.01, -0.03, 0.01)]),
     "experiments": [
         {"name": "bilm-steps-1600", "executor": None, "revs": [
             {"rev": "b" * 40, "name": "bilm-steps-1600",
              "data": exp_data(1_600_000, [claim("ud_pos", 0.02, 0.005, 0.035),
                                           claim("ud_pos", 0.5, 0.4, 0.6, "bert-finetune",
                                                 "bert-scratch"),
                                           {**claim("ud_pos", 0.1, 0.0, 0.2),
                                            "better": "(elmo − static) @ 10 ex."}])}]},
         {"name": "bilm-steps-400", "executor": None, "revs": [
             {"rev": "c" * 40, "name": "bilm-steps-400",
              "data": exp_data(400_000, [claim("ud_pos", -0.04, -0.06, -0.02),
                                         claim("conll2003", 0.0, -0.01, 0.01)])}]},
         {"name": "failed", "executor": None, "revs": [{"rev": "d" * 40, "name": "failed",
                                                         "data": None}]},
         # still running: DVC shows its temporary workspace's (here: stale) metrics
         {"name": "bilm-steps-3200", "executor": {"state": "running", "name": "dvc-task"},
          "revs": [{"rev": "e" * 40, "name": "bilm-steps-3200",
                    "data": exp_data(800_000, [claim("ud_pos", 0.3, 0.2, 0.4)])}]}]},
]


def test_points_follow_pretraining_tokens_with_their_claim_only():
    points = sweep_points(SHOW, "bilm", "elmo", "static")
    assert [(p.experiment, p.tokens, p.verdict) for p in points["ud_pos"]] == [
        ("bilm-steps-400", 400_000, "contradicted"), ("main", 800_000, "inconclusive"),
        ("bilm-steps-1600", 1_600_000, "reproduced")]
    assert [p.experiment for p in points["conll2003"]] == ["bilm-steps-400"]
    other = sweep_points(SHOW, "bilm", "bert-finetune", "bert-scratch")
    assert [p.delta for p in other["ud_pos"]] == [0.5]
    assert sweep_points(SHOW, "bert", "elmo", "static") == {}   # no BERT token counts
    only = sweep_points(SHOW, "bilm", "elmo", "static", names="bilm-steps-*")
    assert [p.experiment for p in only["ud_pos"]] == ["bilm-steps-400", "bilm-steps-1600"]


def test_command_line_writes_the_table_and_the_figure(tmp_path):
    show = tmp_path / "show.json"
    show.write_text(json.dumps(SHOW))
    assert run_sweep(["--show-json", str(show), "--out", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "sweep.md").read_text()
    assert "| ud_pos | bilm-steps-1600 | 1,600,000 | +2.0 | [+0.5, +3.5] | reproduced |" in table
    assert (tmp_path / "out" / "sweep.png").read_bytes()[:4] == b"\x89PNG"
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(SHOW[:1]))
    assert run_sweep(["--show-json", str(empty), "--out", str(tmp_path / "none")]) == 0
    assert "No experiment" in (tmp_path / "none" / "sweep.md").read_text()
    assert not (tmp_path / "none" / "sweep.png").exists()
