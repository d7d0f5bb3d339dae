"""One transfer grid cell: a task, a method, every seed; the record the report reads.

How a seed trains is the method's approach (BERT §5.3's two), passed in by the stage:
:class:`~ctxrep.transfer.feature_train.FeatureBased` (stage ``transfer``) or
:class:`~ctxrep.transfer.finetune.FineTuning` (stage ``finetune``). This module imports neither,
so a feature-based cell does not depend on the fine-tuning code, nor the other way round.

The record (:class:`~ctxrep.transfer.record.CellRecord`, written to
``metrics/transfer/<task>/<method>.json``) holds the per-seed scores and their mean
and standard deviation, each seed's best epoch and its train-loss / dev-score curve per epoch,
whether a seed predicted (nearly) one class for everything (``degenerate``, see
its kind's ``is_degenerate``, :mod:`ctxrep.kinds`), the learned scalar-mix
weights of the feature-based methods, the share of evaluation words that have no static word
vector (``word_vector_oov_rate``, methods that read them), and nothing that differs from run to run (timings go to
MLflow and the compute ledger). A task that no data location could serve gives a record with
``unavailable`` and no scores.

Each seed's predictions on the evaluation split travel with the cell, beside the references,
for the stage to save (``data/predictions/<task>/<method>/seed<N>.json``): any metric, and the
bootstrap CIs of the report, are computed from them without retraining.

Checkpoints of an interrupted seed live under ``data/checkpoints/transfer/<task>/<method>/
<key>/seed<N>``, where ``key`` hashes the cell's params and the bytes of its inputs: a rerun
with other params or inputs never resumes them.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ctxrep import config, kinds
from ctxrep.families import STARTING_POINT_KEY
from ctxrep.io import sha256_tree
from ctxrep.training.checkpoints import run_key
from ctxrep.transfer.data import CellData, TaskUnavailable, load_task, spec, task_dir
from ctxrep.transfer.record import CellRecord, MetricScores, SeedResult
from ctxrep.transfer.scoring import primary_key
from ctxrep.transfer.selection import nested_subset, train_dev_indices

CHECKPOINTS = Path("data/checkpoints/transfer")


@dataclass
class CellCost:
    """What a cell computed, for the compute ledger."""

    amount: int = 0
    unit: str = "words"
    params: int | None = None
    flops: float = 0.0


@dataclass
class Cell:
    record: CellRecord
    cost: CellCost = field(default_factory=CellCost)
    predictions: dict[str, dict] = field(default_factory=dict)  # file name → saved predictions


class Approach(Protocol):
    """How a method trains one seed of a cell, and what it reads besides the task's examples."""

    method: str
    params: object   # the method's validated section, transfer.<method>
    unit: str        # what the compute ledger counts: "words" or "sub-word tokens"

    def inputs(self, task: str) -> list[Path]:
        """The files it trains on besides the task's examples (their bytes key checkpoints)."""

    def prepare(self, data: CellData) -> None:
        """Load and check those inputs once, before the first seed."""

    def train_seed(self, data: CellData, seed: int, ckpt: Path, run,
                   live_dir: Path | None) -> SeedResult:
        """Train, select on dev and score the evaluated split for one seed."""

    def eval_oov_rate(self, data: CellData) -> float | None:
        """The share of evaluation words without a static word vector, where it reads them."""


def run_cell(task: str, approach: Approach, common: config.TransferCommon, run=None,
             train_fraction: float = 1.0, live_root: Path | None = None) -> Cell:
    """Train and evaluate ``approach``'s method on ``task`` for every seed of ``common``, on
    ``train_fraction`` of the training examples (a nested subset; the dev split stays whole);
    the cell carries each seed's predictions for :mod:`ctxrep.transfer.predictions`. With
    ``run`` (the cell's :class:`ctxrep.tracking.StageRun`), each seed logs its curves and
    ``eval_<score>`` to a nested run of its own, and the cell's run gets ``eval_<score>_mean``
    / ``_std``. With ``live_root``, each seed's curves go to its DVCLive folder
    ``<live_root>/seed<N>``."""
    method, p = approach.method, approach.params
    task_spec = spec(task)
    seeds = getattr(p, "seeds", None) or common.seeds  # a fine-tuning method may run fewer
    header = {"task": task, "method": method, "kind": task_spec.kind, "metric": task_spec.metric,
              "metrics": list(task_spec.metrics), "primary": primary_key(task_spec.metrics),
              "eval_split": common.eval_split, "seeds": seeds,
              "train_fraction": None if train_fraction == 1.0 else train_fraction,
              "start": getattr(p, STARTING_POINT_KEY, None)}
    if getattr(p, "tasks", None) is not None and task not in p.tasks:
        reason = (f"not run: {method} runs on {', '.join(p.tasks)} only in this profile "
                  f"(transfer.{method}.tasks)")
        return Cell(CellRecord(**header, unavailable=reason),
                    predictions={"unavailable.json": {"reason": reason}})
    try:
        splits, eval_split = load_task(task, common)
    except TaskUnavailable as e:
        return Cell(CellRecord(**header, unavailable=str(e)),
                    predictions={"unavailable.json": {"reason": str(e)}})
    header["eval_split"] = eval_split
    inputs = [task_dir(task) / "MANIFEST.json", *approach.inputs(task)]
    ckpt_root = CHECKPOINTS / task / method / run_key(
        config.as_dict(common), config.as_dict(p), train_fraction, sha256_tree(*inputs))
    train_idx, dev_idx = train_dev_indices(len(splits["train"]), common.dev_fraction)
    if train_fraction != 1.0:
        train_idx = nested_subset(train_idx, train_fraction)
    data = CellData(task, method, task_spec.kind, task_spec.metrics, splits, eval_split,
                    train_idx, dev_idx, common.patience)
    approach.prepare(data)
    task_kind = kinds.get(task_spec.kind)
    runs = []
    point = "" if train_fraction == 1.0 else f" fraction {train_fraction}"  # learning curves
    for seed in seeds:
        # One MLflow run per seed, nested in the cell's: each seed's curves apart, not zig-zagging
        # through one run.
        with (run.child(f"{task}-{method}{point} seed {seed}",
                        {"task": task, "method": method, "seed": seed,
                         "train_fraction": train_fraction})
              if run is not None else contextlib.nullcontext()) as seed_run:
            result = approach.train_seed(data, seed, ckpt_root / f"seed{seed}", seed_run,
                                         live_root and live_root / f"seed{seed}")
            if seed_run is not None:
                seed_run.log_metrics({**{f"eval_{k}": v for k, v in result.scores.items()},
                                      "best_epoch": result.best_epoch})
        runs.append(result)
    shutil.rmtree(ckpt_root, ignore_errors=True)  # every seed finished: nothing to resume

    gold = task_kind.references(splits[eval_split])
    predictions = {
        f"seed{seed}.json": {"task": task, "method": method, "seed": seed,
                             "eval_split": eval_split, "references": gold,
                             "predictions": task_kind.readable(splits[eval_split], r.predictions)}
        for seed, r in zip(seeds, runs)}
    record = CellRecord(
        **header,
        scores={k: MetricScores.over_seeds([r.scores[k] for r in runs])
                for k in sorted(runs[0].scores)},
        best_epoch=[r.best_epoch for r in runs],
        curves=[r.curve for r in runs],
        degenerate=[task_kind.is_degenerate(predictions[f"seed{seed}.json"]["predictions"],
                                            gold) for seed in seeds],   # both readable
        mix_weights=None if runs[0].mix_weights is None else {
            part: [r.mix_weights[part] for r in runs] for part in runs[0].mix_weights},
        train_examples=len(train_idx), dev_examples=len(dev_idx),
        eval_examples=len(splits[eval_split]), word_vector_oov_rate=approach.eval_oov_rate(data),
        lr=None if runs[0].lr is None else [r.lr for r in runs], lr_search=runs[0].lr_search)
    if run is not None:
        prefix = "" if train_fraction == 1.0 else f"fraction{train_fraction}."
        run.log_metrics({f"{prefix}eval_{k}_{stat}": getattr(v, stat)
                         for k, v in record.scores.items() for stat in ("mean", "std")})
    cost = CellCost(amount=sum(r.train_tokens for r in runs), unit=approach.unit,
                    params=runs[0].trainable_params, flops=sum(r.train_flops for r in runs))
    return Cell(record, cost, predictions)
