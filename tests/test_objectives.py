"""The objectives-per-FLOP sweep (ctxrep.objectives): budgets in FLOPs become each objective's
steps from the ledger, one experiment per comparison basis; collected from `dvc exp show --json`
output and each experiment's summary, Table 5 is judged per basis and each objective's cells
drawn against their FLOPs."""

from __future__ import annotations

import json

import pytest

from ctxrep import objectives
from ctxrep.cli import main as ctxrep_main
from ctxrep.report.summary import claim_metrics

PER_STEP = {"bilm": 1e9, "bert": 4e9, "gpt": 1.6e10}      # FLOPs per step, as a ledger gives
MLM = {"bilm": 1.0, "bert": 0.4, "gpt": 1.0}


def test_each_budget_sets_every_objectives_steps_from_its_flops_per_step():
    experiments = {e.name: e for e in objectives.plan([1e12, 1e13], PER_STEP, MLM)}
    assert set(experiments) == {f"{basis}-{b}" for basis in ("flops", "tokens", "steps")
                                for b in ("1e12", "1e13")}
    at = experiments["flops-1e13"].steps
    assert at == {"bilm": 10_000, "bert": 2_500, "gpt": 625}
    assert {n: at[n] * PER_STEP[n] for n in at} == {n: 1e13 for n in at}   # equal FLOPs
    # equal predicted tokens: the masked LM predicts 40 % of its positions, the LM all of them
    assert experiments["tokens-1e13"].steps["gpt"] == 1_000 == 0.4 * at["bert"]
    assert experiments["steps-1e13"].steps["gpt"] == at["bert"]                # equal steps
    # the biLM and the masked LM have the same params in the three: DVC runs them once a budget
    for basis in ("tokens", "steps"):
        other = experiments[f"{basis}-1e13"]
        shared = [o for o in other.overrides() if not o.startswith("pretrain_gpt.")]
        assert shared == [o for o in experiments["flops-1e13"].overrides()
                          if not o.startswith("pretrain_gpt.")]


def test_steps_are_rounded_to_three_figures_so_a_ledger_noisy_in_its_fourth_plans_the_same():
    """The ledger counts the tokens a run trained on, so FLOPs per step differ a little between
    runs of different lengths; the plan must not: a changed step count is a changed experiment."""
    assert [objectives.round_steps(s) for s in (0.3, 7.4, 318.2, 1059.3, 1064.9, 6912.0)] == [
        1, 7, 318, 1060, 1060, 6910]
    for fps in (9.437e9, 9.44e9, 9.443e9):
        assert objectives.plan([1e13], {"bilm": fps}, {"bilm": 1.0})[0].steps == {"bilm": 1060}


def test_a_budget_within_the_ledgers_spread_of_the_workspace_run_is_that_run():
    """The profile's own run is at its 1e13 budget: its ledger, read back, gives steps within a
    per cent of its own (the FLOPs per step move with the run's length), and the plan keeps its
    steps, so that flops-1e13 is found in the run cache; another budget is planned as ever."""
    workspace = {"bilm": 1060, "bert": 2300, "gpt": 680}
    per_step = {"bilm": 9.382e9, "bert": 4.362e9, "gpt": 1.4686e10}   # 1070, 2290, 681
    by = {e.name: e for e in objectives.plan([1e13, 3e12], per_step, MLM, workspace)}
    assert by["flops-1e13"].steps == workspace
    assert by["tokens-1e13"].steps == {**workspace, "gpt": 920}     # 0.4 x the masked LM's
    assert by["flops-3e12"].steps == {"bilm": 320, "bert": 688, "gpt": 204}
    far = {**workspace, "bilm": 1000}
    assert objectives.plan([1e13], per_step, MLM, far)[0].steps["bilm"] == 1070


def test_every_budgets_equal_flops_experiment_comes_first():
    names = [e.name for e in objectives.plan([1e12, 1e13], PER_STEP, MLM)]
    assert names[:2] == ["flops-1e12", "flops-1e13"]
    assert sorted(names[2:]) == ["steps-1e12", "steps-1e13", "tokens-1e12", "tokens-1e13"]


def test_run_queues_what_has_not_finished_runs_the_queue_and_collects(tmp_path, monkeypatch):
    """`ctxrep objectives run` with one more budget: the finished experiments are not queued
    again (DVC would refuse the name), the new ones are, then the queue runs and is collected."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics").mkdir()
    for name, fps in PER_STEP.items():
        (tmp_path / f"metrics/pretrain_{name}.json").write_text(
            json.dumps({"steps": 10, "train_flops": 10 * fps}))
    (tmp_path / "params.yaml").write_text("left_to_right: [gpt]\npretrain_bert: {mlm_prob: 0.4}\n"
                                          "compute: {isa: native, threads: 2}\n")
    calls = []
    monkeypatch.setattr(objectives, "exp_show_json", lambda: SHOW)
    monkeypatch.setattr(objectives, "_dvc", lambda *args: calls.append(args))
    monkeypatch.setattr(objectives, "summary_at", lambda rev: SUMMARIES.get(rev, {}))
    assert ctxrep_main(["objectives", "run", "--budgets", "1e12", "1e13", "3e13"]) == 0
    queued = [c[c.index("-n") + 1] for c in calls if "--queue" in c]
    assert queued == ["flops-3e13", "tokens-1e13", "steps-1e13", "tokens-3e13", "steps-3e13"]
    assert calls[-1] == ("exp", "run", "--run-all")
    # in the profile run's compute mode (its effective value, as `make repro` wrote it)
    assert all(c[c.index("-S") + 1:c.index("-S") + 4] == ("profile=objectives", "-S",
                                                           "compute.isa=native")
               for c in calls if "--queue" in c)
    assert (tmp_path / "reports/objectives.md").is_file()


def test_adding_a_budget_leaves_the_other_budgets_experiments_as_they_were():
    """A budget added later is its own experiments: every earlier one keeps its name and params
    (so DVC's run cache has every stage of it), and only the new ones run."""
    before = {e.name: e.overrides() for e in objectives.plan([1e12], PER_STEP, MLM)}
    after = {e.name: e.overrides() for e in objectives.plan([1e12, 3e12], PER_STEP, MLM)}
    assert {k: after[k] for k in before} == before
    assert set(after) - set(before) == {"flops-3e12", "tokens-3e12", "steps-3e12"}


def test_flops_per_step_come_from_the_ledger_and_a_missing_one_is_named(tmp_path):
    (tmp_path / "pretrain_bert.json").write_text(json.dumps({"steps": 100, "train_flops": 4e11}))
    assert objectives.flops_per_step(tmp_path, ["bert"]) == {"bert": 4e9}
    from ctxrep.errors import InputError

    with pytest.raises(InputError, match="pretrain_gpt.json: missing: run `make repro "
                                         "PROFILE=objectives` first"):
        objectives.flops_per_step(tmp_path, ["bert", "gpt"])


def _summary(scale: float) -> dict:
    cell = lambda mean: {"mean": mean, "ci95": [mean - 0.01, mean + 0.01], "n_seeds": 3}  # noqa: E731
    return {"cells": {"ud_pos": {"elmo": cell(0.80 + scale), "bert-feature": cell(0.78 + scale),
                                 "gpt-feature": cell(0.79 + scale), "static": cell(0.75),
                                 "bert-random": cell(0.74)}},
            "baselines": {"ud_pos": {"lookup": 0.70, "majority": 0.2}}}


def _claims(delta: float) -> dict:
    return claim_metrics({"claims": [
        {"better": "bert-feature", "worse": "gpt-feature", "task": "ud_pos", "estimate": delta,
         "ci95": [delta - 0.005, delta + 0.005]},
        {"better": "elmo", "worse": "static", "task": "ud_pos", "estimate": 0.05,
         "ci95": [0.04, 0.06]}]})


def _experiment(name: str, steps: dict, delta: float) -> dict:
    params = {"left_to_right": ["gpt"],
              **{f"pretrain_{n}": {"steps": s} for n, s in steps.items()},
              "transfer": {"bert-finetune": {"bert": "pretrain_bert"}}}
    return {"name": name, "executor": None, "revs": [{"rev": name, "name": name, "data": {
        "params": {"params.yaml": {"data": params}},
        "metrics": {"metrics/claims.json": {"data": _claims(delta)}}}}]}


SHOW = [{"rev": "workspace", "name": None, "data": None, "experiments": None},
        {"rev": "a" * 40, "name": "main", "data": None, "experiments": [
            _experiment("flops-1e12", {"bilm": 1000, "bert": 250, "gpt": 62}, -0.02),
            _experiment("tokens-1e12", {"bilm": 1000, "bert": 250, "gpt": 100}, -0.01),
            _experiment("steps-1e12", {"bilm": 1000, "bert": 250, "gpt": 250}, -0.03),
            _experiment("flops-1e13", {"bilm": 10000, "bert": 2500, "gpt": 625}, 0.02),
            _experiment("bilm-steps-400", {"bilm": 400}, 0.5)]}]   # another sweep's: not read
SUMMARIES = {"flops-1e12": _summary(0.0), "tokens-1e12": _summary(0.0),
             "steps-1e12": _summary(0.0), "flops-1e13": _summary(0.05)}


def test_table_5_is_judged_per_basis_naming_what_each_verdict_rests_on():
    rows = objectives.claim_rows(SHOW, PER_STEP)
    table5 = [r for r in rows if r.worse == "gpt-feature"]
    assert [(r.basis, r.experiment, r.verdict) for r in table5] == [
        ("flops", "flops-1e12", "contradicted"), ("flops", "flops-1e13", "reproduced"),
        ("tokens", "tokens-1e12", "contradicted"), ("steps", "steps-1e12", "contradicted")]
    # each side at its own pretraining FLOPs: equal at equal FLOPs, not at equal steps
    assert table5[0].flops == (250 * 4e9, 62 * 1.6e10)
    assert table5[-1].flops == (1e12, 250 * 1.6e10)
    assert not [r for r in rows if r.better == "elmo"]   # ELMo's claims are not Table 5's
    text = objectives.table(rows, [])
    assert "| equal predicted tokens | tokens-1e12 | ud_pos | `bert-feature` − `gpt-feature`" in text


def test_each_objective_is_drawn_against_its_flops_beside_the_references():
    pts, references = objectives.points(SHOW, PER_STEP, summaries=lambda rev: SUMMARIES.get(rev, {}))
    by = {(p.method, p.experiment): p for p in pts}
    assert by[("elmo", "flops-1e13")].flops == 10_000 * 1e9
    assert by[("gpt-feature", "tokens-1e12")].flops == 100 * 1.6e10
    assert by[("bert-feature", "flops-1e13")].score.estimate == pytest.approx(0.83)
    assert {p.family for p in pts} == {"bilm", "bert", "gpt"}
    # the static vectors, the untrained network and the lookup table, not objectives
    assert references == {"ud_pos": {"static": 0.75, "bert-random": 0.74, "lookup": 0.70}}
    assert not {p.method for p in pts} & set(references["ud_pos"])
    assert objectives.figure(pts, references) is not None


def test_held_out_lm_quality_is_drawn_once_per_objective_and_budget():
    """Each objective's held-out quality (a DVC output of its pretraining stage, read at each
    experiment's revision) at its pretraining FLOPs; the biLM and masked LM, trained once per
    budget whatever the basis, are one point each."""
    outputs = {"metrics/pretrain_bilm.json": {"val_ppl": 300.0, "unigram_ppl": 550.0},
               "metrics/pretrain_bert.json": {"val_mlm_acc": 0.1, "val_mlm_acc_at_mask": 0.1},
               "metrics/pretrain_gpt.json": {"val_lm_ppl": 200.0, "val_lm_acc": 0.2}}
    lm = objectives.lm_points(SHOW, PER_STEP, read=lambda path, rev: outputs[path])
    by = {(p.family, p.steps): p for p in lm}
    assert by[("bilm", 1000)].experiments == ("flops-1e12", "tokens-1e12", "steps-1e12")
    assert by[("bilm", 1000)].quality == {"val_ppl": 300.0, "unigram_ppl": 550.0}
    assert by[("gpt", 100)].flops == 100 * 1.6e10 and by[("gpt", 100)].experiments == ("tokens-1e12",)
    assert len(lm) == 2 + 2 + 4      # bilm and bert at two budgets; gpt at 62, 100, 250, 625
    assert "| biLM | 1,000 | 1.00e+12 | val_ppl 300, unigram_ppl 550 |" in objectives.lm_table(lm)
    assert objectives.lm_figure(lm) is not None


def test_collect_writes_the_table_and_figure(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics").mkdir()
    for name, fps in PER_STEP.items():
        (tmp_path / f"metrics/pretrain_{name}.json").write_text(
            json.dumps({"steps": 10, "train_flops": 10 * fps}))
    (tmp_path / "params.yaml").write_text("left_to_right: [gpt]\n")
    (tmp_path / "show.json").write_text(json.dumps(SHOW))
    monkeypatch.setattr(objectives, "summary_at", lambda rev: SUMMARIES.get(rev, {}))
    assert ctxrep_main(["objectives", "collect", "--show-json", "show.json"]) == 0
    assert "contradicted" in (tmp_path / "reports/objectives.md").read_text()
    assert (tmp_path / "reports/objectives.png").stat().st_size > 0
