"""``metrics/summary.json``: every transfer cell, the baselines and the claims.

    {"cells": {task: {method: {"metric": primary key, "mean": x, "std": y, "n_seeds": k,
                               "ci95": [low, high], "degenerate": bool,
                               "did_not_learn": bool}}},
     "baselines": {task: {name: score}},
     "claims": [{"better", "worse", "task", "claim", "source", "estimate", "ci95", "verdict"}]}

Numbers are in the metric's own units (accuracy and F1 in [0, 1]; SQuAD F1 in [0, 100]) and
rounded to 4 decimals; keys are written sorted, so the file changes exactly when a number does.
``degenerate``: a seed of the cell predicted (nearly) one label or one score for everything
(its kind's ``is_degenerate``, :mod:`ctxrep.kinds`); ``did_not_learn``: a seed's training loss never
fell below its first epoch's (:func:`did_not_learn`, read off the record's curves).
"""

from __future__ import annotations

import math
import re

from ctxrep.families import CORE, NAMES
from ctxrep.transfer.record import CellRecord

DECIMALS = 4
# A method's name (elmo, bert-finetune, gpt_bpe-feature, hf-roberta): a claim between two is a
# DVC metric; one between composites (learning-curve gains, layers) is not
METHOD_NAME = re.compile(r"[a-z0-9_]+(-[a-z0-9_]+)*")
# a seed learned if some later epoch's mean training loss is at least this share below the first's
LEARNED_DROP = 0.01
# ctxrep.analysis.claims's verdicts: each one's count is a metric, zero included
VERDICTS = ("reproduced", "contradicted", "inconclusive")


def did_not_learn(curve: dict | None) -> bool:
    """Whether a seed's training loss never fell below its initial value: no epoch after the
    first has a mean training loss (``curve["train_loss"]``, one value per epoch, as
    :mod:`ctxrep.transfer.feature_train` and :mod:`ctxrep.transfer.finetune` keep it) at least
    1 % below the first epoch's. The 1 % absorbs the noise of a flat curve: a binary head stuck
    at ln 2 = 0.693 wobbles around it and would otherwise "fall below" by 0.0003. A loss that
    turns NaN counts as not falling. A curve of fewer than two epochs tells nothing: False."""
    if not isinstance(curve, dict):
        return False
    losses = [x for x in curve.get("train_loss") or [] if isinstance(x, (int, float))]
    if len(losses) < 2:
        return False
    first = float(losses[0])
    return not any(math.isfinite(first) and float(x) <= first * (1 - LEARNED_DROP)
                   for x in losses[1:])


def seeds_did_not_learn(cell: CellRecord) -> list[bool]:
    """:func:`did_not_learn` of each seed of ``cell`` (empty when it kept no curves)."""
    return [did_not_learn(curve) for curve in cell.curves]


def summarise(transfer: dict[str, dict[str, CellRecord]], extras: dict | None = None) -> dict:
    """``extras`` (see ``report.evidence.summary_extras``): baselines, per-cell CIs, claims."""
    extras = extras or {}
    ci95 = extras.get("ci95", {})
    cells = {task: {method: {"metric": cell.primary, "mean": round(cell.mean, DECIMALS),
                             "std": round(cell.std, DECIMALS), "n_seeds": cell.n_seeds,
                             "ci95": ci95.get(task, {}).get(method),
                             "degenerate": any(cell.degenerate),
                             "did_not_learn": any(seeds_did_not_learn(cell))}
                    for method, cell in sorted(cells.items())}
             for task, cells in sorted(transfer.items())}
    return {"cells": cells, "baselines": extras.get("baselines", {}),
            "claims": extras.get("claims", []), "pretrain": extras.get("pretrain", {}),
            "intrinsic": extras.get("intrinsic", {})}


# The pretraining numbers that are headlines: held-out quality and the budget it took (the rest
# of metrics/pretrain_*.json are statistics: parameter counts, FLOPs, per-direction values).
PRETRAIN_HEADLINES = {name: CORE[name].headlines for name in NAMES}
# metrics/intrinsic.json's headlines (the models on a text from another domain): model → the key
# there, and its name here.
INTRINSIC_HEADLINES = {name: CORE[name].intrinsic for name in NAMES}


def intrinsic_headlines(intrinsic: dict | None) -> dict:
    """{"<model>_<name>": value} of :data:`INTRINSIC_HEADLINES` in ``metrics/intrinsic.json``."""
    out = {}
    for model, (key, name) in INTRINSIC_HEADLINES.items():
        value = ((intrinsic or {}).get(model) or {}).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{model}_{name}"] = round(float(value), DECIMALS)
    return out


def pretrain_headlines(pretrain: dict[str, dict | None]) -> dict:
    """{model: {key: value}} of :data:`PRETRAIN_HEADLINES` found in ``pretrain`` (model ->
    ``metrics/pretrain_<model>.json``, None where that model was not trained)."""
    out = {}
    for model, keys in PRETRAIN_HEADLINES.items():
        found = {k: v if isinstance(v, int) else round(float(v), DECIMALS)
                 for k, v in (pretrain.get(model) or {}).items()
                 if k in keys and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if found:
            out[model] = found
    return out


def headline(summary: dict) -> dict:
    """``metrics/headline.json``, the pipeline's first DVC metric, about 20 numbers wide so that
    ``dvc exp show`` puts the results in view:

        {task: {method or baseline: mean}, "claims": {verdict: count},
         "pretrain": {"bilm": {"val_ppl", "unigram_ppl", "train_tokens"},
                      "bert": {"val_mlm_acc", "val_mlm_acc_at_mask", "train_tokens"}},
         "intrinsic": {"bilm_ppl", "bert_pppl"}}   (on a text from another domain)

    Stds, seeds and the CIs of single cells stay in summary.json; each claim's Δ and CI is in
    :func:`claim_metrics`."""
    out = {task: {method: cell["mean"] for method, cell in cells.items()}
           for task, cells in summary["cells"].items()}
    for task, scores in summary.get("baselines", {}).items():
        out.setdefault(task, {}).update({name: round(v, DECIMALS) for name, v in scores.items()})
    out = {task: dict(sorted(cells.items())) for task, cells in sorted(out.items())}
    verdicts = [claim["verdict"] for claim in summary.get("claims", [])]
    out["claims"] = {v: verdicts.count(v) for v in (*VERDICTS, *sorted(set(verdicts) - {*VERDICTS}))}
    if summary.get("pretrain"):
        out["pretrain"] = summary["pretrain"]
    if summary.get("intrinsic"):
        out["intrinsic"] = summary["intrinsic"]
    return out


def claim_metrics(summary: dict) -> dict:
    """``metrics/claims.json``, the second DVC metric: {"<better>_vs_<worse>": {task: {delta,
    low, high}}} for the papers' method-vs-method claims, so experiments can be compared on them
    (``ctxrep.sweep``). A file of its own because it is wide (three columns per claim and task):
    ``make exp-show`` leaves it out, ``dvc metrics show metrics/claims.json`` shows it."""
    claims: dict = {}
    for claim in summary.get("claims", []):
        if not (METHOD_NAME.fullmatch(claim["better"]) and METHOD_NAME.fullmatch(claim["worse"])):
            continue   # a composite comparison (learning curves, layers): summary.json only
        low, high = claim["ci95"]
        claims.setdefault(f"{claim['better']}_vs_{claim['worse']}", {})[claim["task"]] = {
            "delta": round(claim["estimate"], DECIMALS), "low": round(low, DECIMALS),
            "high": round(high, DECIMALS)}
    return {k: dict(sorted(v.items())) for k, v in sorted(claims.items())}


def flat_numbers(summary: dict, pretrain: dict | None = None) -> dict[str, float]:
    """The headline numbers as flat MLflow metrics: ``<task>.<method>.mean`` / ``.std`` /
    ``.ci95_low`` / ``.ci95_high``, ``<task>.baseline.<name>``, the claims' verdict counts
    (``claims.<verdict>``) and each pretraining metric (``pretrain_<model>.<key>``, from
    ``pretrain``: model -> ``metrics/pretrain_<model>.json``, None where missing)."""
    out = {}
    for task, cells in summary["cells"].items():
        for method, cell in cells.items():
            out[f"{task}.{method}.mean"], out[f"{task}.{method}.std"] = cell["mean"], cell["std"]
            if cell.get("ci95"):
                out[f"{task}.{method}.ci95_low"], out[f"{task}.{method}.ci95_high"] = cell["ci95"]
    for task, scores in summary.get("baselines", {}).items():
        out.update({f"{task}.baseline.{name}": value for name, value in scores.items()})
    verdicts = [claim["verdict"] for claim in summary.get("claims", [])]
    out.update({f"claims.{v}": verdicts.count(v) for v in {*VERDICTS, *verdicts}})
    for model, metrics in (pretrain or {}).items():
        out.update({f"pretrain_{model}.{key}": value for key, value in (metrics or {}).items()
                    if isinstance(value, (int, float)) and not isinstance(value, bool)})
    return out
