"""The report's evidence: every cell beside its baselines, with a bootstrap CI, and the papers'
claims judged from paired CIs (see :mod:`ctxrep.analysis`).

Statistics are computed from the per-example predictions each cell saved, so the CIs cover the
evaluation examples (resampled) and the seeds (resampled); a cell without prediction files
gets no CI and no claim rests on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctxrep.analysis.bootstrap import STATISTIC, Interval, bootstrap_mean, example_stats
from ctxrep.analysis.claims import (LAYER_CLAIMS, STAND_INS, Judgement, judge_all, layer_runs,
                                   unjudged)
from ctxrep.config.methods import CONTROL_METHODS
from ctxrep.families import PROBED
from ctxrep.report import parts as family_parts
from ctxrep.report import plots
from ctxrep.report.inputs import ReportInputs
from ctxrep.report.summary import intrinsic_headlines, pretrain_headlines, seeds_did_not_learn
from ctxrep.report.tables import INTERVAL_SCALE, MISSING, markdown_table, percent_scale

LEARNING_CURVE_SOURCE = "ELMo §5.4, Fig. 1 (seed 004)"  # the sample-efficiency claim's source

# the order of the "every method beside its baselines" table
BASELINE_ORDER = ("majority", "mean", "lookup", "tfidf-lr", "tfidf-ridge", "window")
# secondary keys not worth a column: counts and per-class breakdowns
NOT_SHOWN = ("num_tokens", "precision", "recall", "accuracy_tokens")


@dataclass
class Evidence:
    statistic: dict[str, str] = field(default_factory=dict)        # task -> statistic name
    runs: dict[str, dict[str, list[np.ndarray]]] = field(default_factory=dict)
    intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)
    judgements: list[Judgement] = field(default_factory=list)


def task_metric(inputs: ReportInputs, task: str) -> tuple[str, str] | None:
    """(metric module, primary key) of ``task``, from its cells or its baselines record."""
    cells = inputs.transfer.get(task, {})
    if cells:
        cell = next(iter(cells.values()))
        return cell.metric, cell.primary
    record = inputs.baselines.get(task)
    return (record["metric"], record["primary"]) if record else None


def gather(inputs: ReportInputs) -> Evidence:
    evidence = Evidence()
    for task, methods in inputs.predictions.items():
        metric = task_metric(inputs, task)
        statistic = STATISTIC.get(metric) if metric else None
        if statistic is None:
            continue
        evidence.statistic[task] = statistic
        evidence.runs[task] = {m: [example_stats(statistic, p.predictions, p.references)
                                   for p in seeds] for m, seeds in methods.items()}
        evidence.intervals[task] = {m: bootstrap_mean(statistic, runs)
                                    for m, runs in evidence.runs[task].items()}
    evidence.judgements = judge_all(evidence.runs, evidence.statistic)
    evidence.judgements += probe_judgements(inputs)
    return evidence


def probe_judgements(inputs: ReportInputs) -> list[Judgement]:
    """ELMo §5.3's layer claims from the biLM probes' saved predictions: the first vs the top
    biLSTM layer on the same evaluation examples, bootstrapped over examples (one probe run)."""
    runs, statistic = {}, {}
    for task, entry in inputs.probe_predictions.get(PROBED, {}).items():
        stat = STATISTIC.get((entry["metric"], entry["metric"]))
        if stat is None:
            continue
        layers = [example_stats(stat, predicted, entry["references"])
                  for predicted in entry["layers"]]
        if layer_runs(layers):
            runs[task], statistic[task] = layer_runs(layers), stat
    return judge_all(runs, statistic, LAYER_CLAIMS)


def probe_intervals(inputs: ReportInputs) -> dict[str, dict[str, list[Interval]]]:
    """model -> task -> the 95 % bootstrap CI of each layer's probe score (over evaluation
    examples: one probe run), from the probes' saved predictions; tasks without them are
    left out."""
    out: dict = {}
    for model, tasks in sorted(inputs.probe_predictions.items()):
        for task, entry in sorted(tasks.items()):
            stat = STATISTIC.get((entry["metric"], entry["metric"]))
            if stat is None:
                continue
            out.setdefault(model, {})[task] = [
                bootstrap_mean(stat, [example_stats(stat, predicted, entry["references"])])
                for predicted in entry["layers"]]
    return out


def probe_baselines(inputs: ReportInputs) -> dict[str, dict[str, float]]:
    """task -> baseline name -> score, for the probed tasks whose baselines record is in the
    probe's metric (``BASELINE_ORDER``)."""
    metrics = {task: entry.get("metric") for probe in inputs.probes.values() if probe
               for task, entry in probe["tasks"].items() if entry.get("layers")}
    out = {}
    for task, metric in sorted(metrics.items()):
        record = inputs.baselines.get(task)
        if not record or record.get("metric") != metric:
            continue
        scores = {name: record["baselines"][name][record["primary"]] for name in BASELINE_ORDER
                  if record["primary"] in record["baselines"].get(name, {})}
        if scores:
            out[task] = scores
    return out


def _pct(value: float, scale: float) -> str:
    return f"{value * scale:.1f}"


def format_ci(interval: Interval | None, scale: float) -> str:
    """"[low, high]" in percent (``scale`` 100) or as is; — without an interval."""
    return MISSING if interval is None else \
        f"[{_pct(interval.low, scale)}, {_pct(interval.high, scale)}]"


def _others(scores: dict[str, float], primary: str, scale: float) -> str:
    """The task's other metrics (its registry entry names them after the primary), e.g.
    "accuracy 61.2, macro_f1 55.0"."""
    shown = [f"{key} {_pct(value, scale)}" for key, value in sorted(scores.items())
             if key != primary and key not in NOT_SHOWN and isinstance(value, (int, float))]
    return ", ".join(shown)


def published_methods(inputs: ReportInputs) -> set[str]:
    """The methods whose cells start from published weights rather than ones pretrained here
    (each family's report part says which of its own do)."""
    return family_parts.published_methods(inputs)


def published_footnote(marked: set[str]) -> list[str]:
    if not marked:
        return []
    return ["", "† " + ", ".join(f"`{m}`" for m in sorted(marked)) + " use a published BERT, "
            "not one pretrained here (\"Data and models\" says which checkpoint, and what it "
            "is): its weights (`bert-scratch`: its architecture and vocabulary, freshly "
            "initialised). A comparison of its fine-tuned or feature rows with `elmo` sets a "
            "checkpoint trained on far more text against our small biLM."]


def baselines_section(inputs: ReportInputs, evidence: Evidence) -> str:
    """Per task: every baseline, method and control, best first within each group."""
    parts = ["## Every method beside its baselines", "",
             "Per task, the trivial baselines (fitted on the same training examples, scored on "
             "the same evaluation examples), then every method, then the random-init controls. "
             "Score: the task's primary metric (its registry entry names it first; "
             "correlations × 100), mean over seeds, in percent; 95 % CI: bootstrap over "
             "evaluation examples and seeds; other metrics: the rest of the entry's metrics, "
             "seed means. ⚠ degenerate: a seed gave one label (tagging: one tag, over all "
             "tokens) to ≥ 95 % of its predictions, and to at least half-way from that label's "
             "gold share to 100 % (a tagger that follows an 'O'-heavy gold is not flagged); on "
             "a binary task, under 5 % of the other class; regression: predictions whose "
             "spread is under 1 % of the gold's. "
             "⚠ did not learn: a seed's mean training loss never fell 1 % below its first "
             "epoch's (e.g. stuck at ln 2 = 0.693). "
             "A method at or below `majority`, or below `lookup` on a tagging task, has "
             "learned less than word frequencies."]
    marked = published_methods(inputs)
    for task in inputs.tasks:
        cells = inputs.transfer.get(task, {})
        record = inputs.baselines.get(task, {})
        if not cells and not record:
            continue
        metric = task_metric(inputs, task)
        scale = percent_scale(metric[0]) if metric else 100.0
        intervals = evidence.intervals.get(task, {})
        rows = []
        for name in BASELINE_ORDER:
            if name in record.get("baselines", {}):
                scores = record["baselines"][name]
                rows.append([f"baseline: {name}", _pct(scores[record["primary"]], scale), "—",
                             format_ci(intervals.get(name), INTERVAL_SCALE),
                             _others(scores, record["primary"], scale), ""])
        ordered = sorted((m for m in cells if m not in CONTROL_METHODS), key=lambda m: -cells[m].mean)
        ordered += [m for m in CONTROL_METHODS if m in cells]
        for method in ordered:
            cell = cells[method]
            flag = " ".join(name for name, raised in (
                ("⚠ degenerate", any(cell.degenerate)),
                ("⚠ did not learn", any(seeds_did_not_learn(cell)))) if raised)
            rows.append([method + (" †" if method in marked else ""),
                         f"{_pct(cell.mean, scale)} ± {_pct(cell.std, scale)}",
                         str(cell.n_seeds), format_ci(intervals.get(method), INTERVAL_SCALE),
                         _others(cell.others, cell.primary, scale), flag])
        parts += ["", f"### {task} ({metric[1] if metric else MISSING})", "",
                  *split_note(cells, record),
                  markdown_table(["method", "score", "seeds", "95 % CI", "other metrics", ""],
                                 rows)]
    return "\n".join(parts + published_footnote(marked))


def split_note(cells: dict, baselines: dict) -> list[str]:
    """A line naming the evaluated split where it is not ``validation`` (a task published as
    train/test, or a run with ``transfer.common.eval_split=test``)."""
    splits = {c.eval_split for c in cells.values()} | (
        {baselines["eval_split"]} if "eval_split" in baselines else set())
    if splits <= {"validation"}:
        return []
    return [f"Evaluated on the task's `{'`, `'.join(sorted(splits))}` split.", ""]


FOREST = "claims_forest.png"


def claims_section(evidence: Evidence, inputs: ReportInputs, figures: dict | None = None) -> str:
    """The claims table, its verdict counts and (into ``figures``) its forest plot."""
    parts = ["## The papers' claims, judged", "",
             "Each row: a published claim, the paired difference Δ = better − worse (seed means "
             "on the same evaluation examples, in points), its 95 % bootstrap CI, and the "
             "verdict read off the CI: *reproduced* (CI above 0), *contradicted* (below 0), "
             "*inconclusive* (spans 0)."]
    if not evidence.judgements:
        return "\n".join(parts + ["", "_No claim can be judged yet: the cells it compares, or "
                                      "their saved predictions, are missing._"])
    rows, forest, marked = [], [], published_methods(inputs)
    scale = INTERVAL_SCALE
    for j in evidence.judgements:
        dagger = " †" if {j.claim.better, j.claim.worse} & marked else ""
        comparison = f"{j.claim.better} − {j.claim.worse}{dagger}"
        rows.append([j.claim.statement, j.claim.source, j.task, comparison,
                     f"{j.difference.estimate * scale:+.1f}", format_ci(j.difference, scale),
                     f"**{j.verdict}**" + degenerate_note(inputs, j)])
        d = j.difference
        forest.append((f"{comparison} · {j.task}", d.estimate * scale, d.low * scale,
                       d.high * scale, j.verdict))
    counts = {v: sum(j.verdict == v for j in evidence.judgements)
              for v in ("reproduced", "contradicted", "inconclusive")}
    parts += ["", markdown_table(["claim", "source", "task", "comparison", "Δ", "95 % CI",
                                  "verdict"], rows),
              "", ", ".join(f"{n} {v}" for v, n in counts.items()) + "."]
    fig = plots.claims_forest(forest) if figures is not None else None
    if fig is not None:
        figures[FOREST] = fig
        parts += ["", f"![claims: Δ and 95 % CI per claim](figures/{FOREST})"]
    used = {m for j in evidence.judgements for m in (j.claim.better, j.claim.worse)} & marked
    return "\n".join(parts + stand_ins(evidence.judgements) + published_footnote(used)
                     + not_judged(evidence.judgements, inputs))


def degenerate_note(inputs: ReportInputs, j: Judgement) -> str:
    """What the verdict cell says when a compared cell has degenerate seeds (one label for
    nearly everything): a claim over such cells compares trivial predictors, whatever its CI."""
    cells = inputs.transfer.get(j.task, {})
    flagged = {m: cells[m].degenerate for m in (j.claim.better, j.claim.worse)
               if m in cells and any(cells[m].degenerate)}
    if not flagged:
        return ""
    if len(flagged) == 2 and all(all(flags) for flags in flagged.values()):
        return " ⚠ both cells degenerate (every seed): it compares trivial predictors"
    return " ⚠ degenerate seeds: " + ", ".join(
        f"`{m}` {sum(flags)}/{len(flags)}" for m, flags in flagged.items())


def stand_ins(judgements: list[Judgement]) -> list[str]:
    """A line per judged task that stands in for the one the paper used."""
    tasks = sorted({j.task for j in judgements} & set(STAND_INS))
    return ["", "Judged on stand-ins: " + "; ".join(f"**{t}**: {STAND_INS[t]}" for t in tasks)
            + "."] if tasks else []


def not_judged(judgements: list[Judgement], inputs: ReportInputs | None = None) -> list[str]:
    """Every claim this run cannot judge, each with why, so that a short profile's table is
    never mistaken for the whole list: the transfer claims (a method they compare is not in
    the grid, or the task they are claimed for), the probing claims (the biLM's probe of the
    task did not run) and the sample-efficiency claim (no learning curve ran)."""
    reasons = [f"{c.statement} (`{c.better}` − `{c.worse}`, {c.source}): a method it compares, "
               f"or the task it is claimed for, is not in this profile's grid"
               for c in unjudged(judgements)]
    probed = set(((inputs.probes.get(PROBED) or {}).get("tasks") or {}) if inputs else {})
    saved = set(inputs.probe_predictions.get(PROBED, {})) if inputs else set()
    for c in unjudged(judgements, LAYER_CLAIMS):
        task = c.tasks[0]
        why = ("a biLM with fewer than two LSTM layers has no first-vs-top comparison"
               if task in saved else
               f"the biLM's probe of {task} saved no per-example predictions "
               f"(data/predictions/probe/bilm/{task}.json), which the paired CI needs"
               if task in probed else
               f"the biLM was not probed on {task} (probe@bilm did not run, or {task} is not "
               f"in grid.tasks)")
        reasons.append(f"{c.statement} ({c.source}): {why}")
    if inputs is not None and not any(j.claim.source == LEARNING_CURVE_SOURCE for j in judgements):
        curve = inputs.curve or {}
        why = ("`learning_curve.tasks` is empty in this profile" if not curve.get("tasks") else
               "fewer than two `learning_curve.methods`" if len(curve.get("methods", [])) < 2
               else "the learning_curve stages' outputs, or the grid cells they extend, are "
                    "missing")
        reasons.append(f"the gain of contextual features is larger with little task data "
                       f"({LEARNING_CURVE_SOURCE}): {why}")
    if not reasons:
        return []
    return ["", "Not judged in this run (`make repro PROFILE=claims` judges every claim its four tasks "
                "can; `elmo-io`'s, for SQuAD and SNLI, needs the `full` profile):", ""] + [
        f"- {r}" for r in reasons]


def summary_extras(inputs: ReportInputs, evidence: Evidence) -> dict:
    """What summary.json adds to the cells: baselines, CIs, degenerate flags, claims, the
    pretraining headlines."""
    return {
        "baselines": {task: {name: scores[record["primary"]]
                             for name, scores in sorted(record["baselines"].items())}
                      for task, record in sorted(inputs.baselines.items())},
        "ci95": {task: {m: [round(i.low, 4), round(i.high, 4)] for m, i in sorted(cis.items())}
                 for task, cis in sorted(evidence.intervals.items())},
        "claims": [j.as_dict() for j in evidence.judgements],
        "pretrain": pretrain_headlines(inputs.pretrain),
        "intrinsic": intrinsic_headlines(inputs.intrinsic),
    }
