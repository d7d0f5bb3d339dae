"""What a transfer cell produced: one seed's result, and the cell's record over every seed.

    SeedResult      what ``run_feature_transfer`` / ``run_finetune`` return for one seed
    MetricScores    one metric over a cell's seeds: mean, standard deviation, per-seed values
    CellRecord      the cell's record: ``metrics/transfer/<task>/<method>.json``, and each point
                    of ``metrics/learning_curves/<task>/<method>.json``
    ReportInputError  a file the report reads is malformed (``require``, ``number`` check one)

The transfer stages write ``CellRecord.to_json()``; the report reads the same files back with
``CellRecord.from_json``, so the file format is defined here and nowhere else. This module
imports nothing heavier than the standard library: the report depends on it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.errors import InputError
# STARTING_POINTS: what a fine-tuned cell may start from (the stage that wrote the network)
from ctxrep.families import STARTING_POINT_KEY, STARTING_POINTS

DECIMALS = 6  # scores and rates in a record are rounded to this many decimals


@dataclass
class SeedResult:
    """One seed of a cell: the selected model's scores and predictions on the evaluation split,
    and what training it took."""

    scores: dict[str, float]      # metric key (e.g. "accuracy", "f1") → its value
    predictions: list             # one per evaluation example, as the task kind predicts
    best_epoch: int               # the dev evaluation kept (1-based): best primary score on
                                  # dev; an epoch (feature-based) or every eval_every steps (fine-tuning)
    curve: dict[str, list[float]]  # per dev evaluation: "train_loss" (mean since the last) and
                                   # "dev" (primary); fine-tuning adds "epoch" (epochs trained)
    train_examples: int           # the training examples trained on (the dev rows held out)
    steps: int                    # optimiser steps taken (early stopping may end sooner)
    train_tokens: int             # words (feature-based) or sub-word tokens (fine-tuned) seen
    trainable_params: int         # parameters trained: the task model's, or BERT's and the head's
    train_flops: float            # estimated training FLOPs, for the compute ledger
    train_loss: float             # the last step's training loss (nan: no step was taken)
    resumed_from: int             # the step an interrupted run resumed from; 0: a fresh run
    seconds: float                # wall time of training and evaluation
    # feature-based methods: position ("input", "output") → the learned scalar-mix weight of
    # each layer, or None where the method mixes no layers there (e.g. static)
    mix_weights: dict[str, list[float] | None] | None = None
    # fine-tuning: the sequences trained on (a span-QA example may give several windows)
    train_features: int | None = None
    # fine-tuning: the learning rate trained at, the kept evaluation's dev score, and (where
    # the params gave a grid) each rate's best dev score on this seed, by rate
    lr: float | None = None
    dev_score: float | None = None
    lr_search: dict[str, float] | None = None


@dataclass(frozen=True)
class MetricScores:
    """One metric's values over a cell's seeds."""

    mean: float
    std: float            # sample standard deviation; 0.0 for a single seed
    values: list[float]   # per seed, in the order of the record's ``seeds``

    @classmethod
    def over_seeds(cls, values: list[float]) -> MetricScores:
        """Mean and standard deviation of the seeds' unrounded ``values``, all rounded."""
        return cls(mean=round(statistics.fmean(values), DECIMALS),
                   std=round(statistics.stdev(values), DECIMALS) if len(values) > 1 else 0.0,
                   values=[round(v, DECIMALS) for v in values])

    def to_json(self) -> dict:
        return {"mean": self.mean, "std": self.std, "values": self.values}

    @classmethod
    def from_json(cls, entry, path: Path, key: str) -> MetricScores:
        if not isinstance(entry, dict):
            raise ReportInputError(path, f"'{key}' = {entry!r}: expected {{mean, std, values}}")
        require(entry, path, "mean", "std", "values")
        for stat in ("mean", "std"):
            number(entry[stat], path, f"{key}.{stat}")
        if not isinstance(entry["values"], list):
            raise ReportInputError(path, f"'{key}.values' = {entry['values']!r}: expected a list")
        for i, value in enumerate(entry["values"]):
            number(value, path, f"{key}.values[{i}]")
        # kept as read (an int stays an int), so that to_json gives back the same file
        return cls(entry["mean"], entry["std"], list(entry["values"]))


# Keys of every record, in the order they are written; then either ``unavailable`` or RESULTS.
HEADER = ("task", "method", "kind", "metric", "metrics", "primary", "eval_split", "seeds")
RESULTS = ("scores", "best_epoch", "curves", "degenerate", "train_examples", "dev_examples",
           "eval_examples")


@dataclass(frozen=True)
class CellRecord:
    """A transfer cell's result over every seed (see :mod:`ctxrep.transfer.cell`). A cell whose
    task no data location could serve has ``unavailable`` and none of the results."""

    task: str
    method: str
    kind: str                     # the task kind (ctxrep.data.schemas.KINDS)
    metric: str                   # the primary metric module, e.g. "squad"
    metrics: list[str]            # every metric module of the task, primary first
    primary: str                  # the key of the headline number, e.g. "f1"
    eval_split: str               # the split evaluated (asked for, where the cell did not run)
    seeds: list[int]
    train_fraction: float | None = None   # a learning-curve point; None: all training examples
    start: str | None = None              # fine-tuning: the stage whose network it started from
    #                                       (its JSON key STARTING_POINT_KEY, the params' key)
    unavailable: str | None = None        # why the task has no data; None: the cell ran
    # -- the results (empty when unavailable); lists are per seed, in the order of ``seeds``
    scores: dict[str, MetricScores] = field(default_factory=dict)   # metric key → over seeds
    best_epoch: list[int] = field(default_factory=list)  # the dev evaluation kept (1-based)
    curves: list[dict] = field(default_factory=list)     # {"train_loss", "dev"}: per evaluation
    degenerate: list[bool] = field(default_factory=list)  # one label for ≥ 95 %: its kind's is_degenerate
    # feature-based methods: position → the mix weights of each seed (SeedResult.mix_weights)
    mix_weights: dict[str, list[list[float] | None]] | None = None
    train_examples: int | None = None
    dev_examples: int | None = None     # training examples held out to select the epoch
    eval_examples: int | None = None
    # methods that read static word vectors: the share of evaluation words without one
    word_vector_oov_rate: float | None = None
    # fine-tuning: each seed's learning rate, and the grid's dev scores on the first seed
    # (rate → best dev score) where the params gave a grid
    lr: list[float] | None = None
    lr_search: dict[str, float] | None = None

    # -- what the report reads

    @property
    def mean(self) -> float:
        """The primary metric's mean over seeds."""
        return float(self.scores[self.primary].mean)

    @property
    def std(self) -> float:
        return float(self.scores[self.primary].std)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def others(self) -> dict[str, float]:
        """The other metrics' seed means, by key in sorted order."""
        return {key: float(s.mean) for key, s in sorted(self.scores.items()) if key != self.primary}

    @property
    def learned_mix(self) -> dict[str, list[list[float]]]:
        """``mix_weights`` without the positions where no seed learned a mix."""
        return {position: rows for position, rows in (self.mix_weights or {}).items()
                if not all(row is None for row in rows)}

    # -- the file

    def to_json(self) -> dict:
        """The record as the stages write it (keys in the order above; optional ones only when
        set)."""
        out = {key: getattr(self, key) for key in HEADER}
        if self.train_fraction is not None:
            out["train_fraction"] = self.train_fraction
        if self.start is not None:
            out[STARTING_POINT_KEY] = self.start
        if self.unavailable is not None:
            return {**out, "unavailable": self.unavailable}
        out["scores"] = {key: s.to_json() for key, s in self.scores.items()}
        out.update(best_epoch=self.best_epoch, curves=self.curves, degenerate=self.degenerate)
        if self.mix_weights is not None:
            out["mix_weights"] = self.mix_weights
        out.update(train_examples=self.train_examples, dev_examples=self.dev_examples,
                   eval_examples=self.eval_examples)
        if self.word_vector_oov_rate is not None:
            out["word_vector_oov_rate"] = self.word_vector_oov_rate
        if self.lr is not None:
            out["lr"] = self.lr
        if self.lr_search is not None:
            out["lr_search"] = self.lr_search
        return out

    @classmethod
    def from_json(cls, data: dict, path: Path) -> CellRecord:
        """The record ``data`` read from ``path``: a cell's file, or the learning-curve file
        that holds it as a point (both named ``<task>/<method>.json``). A missing key, a task
        or method other than the path's, or a value of the wrong shape raises
        :class:`ReportInputError` naming ``path``."""
        require(data, path, *HEADER)
        task, method = path.parent.name, path.stem
        if (data["task"], data["method"]) != (task, method):
            raise ReportInputError(path, f"holds task/method {data['task']!r}/{data['method']!r}, "
                                         f"but its path says {task!r}/{method!r}")
        for key in ("metrics", "seeds"):
            _check_list(data, path, key)
        if "train_fraction" in data:
            number(data["train_fraction"], path, "train_fraction")
        start = data.get(STARTING_POINT_KEY)
        if start not in (None, *STARTING_POINTS):
            raise ReportInputError(path, f"{STARTING_POINT_KEY!r} = {start!r}: expected one of "
                                         f"{', '.join(STARTING_POINTS)}")
        header = {key: data[key] for key in HEADER} | {"train_fraction": data.get("train_fraction"),
                                                       "start": start}
        if "unavailable" in data:
            return cls(**header, unavailable=data["unavailable"])
        require(data, path, *RESULTS)
        primary = data["primary"]
        scores = data["scores"]
        if not isinstance(scores, dict) or not isinstance(scores.get(primary), dict):
            raise ReportInputError(path, f"scores has no entry for the primary metric {primary!r}")
        for key in ("best_epoch", "curves", "degenerate"):
            _check_list(data, path, key)
        return cls(
            **header,
            scores={key: MetricScores.from_json(entry, path, f"scores.{key}")
                    for key, entry in scores.items()},
            best_epoch=data["best_epoch"], curves=data["curves"], degenerate=data["degenerate"],
            mix_weights=_checked_mix_weights(data.get("mix_weights"), path),
            **{key: data[key] for key in ("train_examples", "dev_examples", "eval_examples")},
            word_vector_oov_rate=data.get("word_vector_oov_rate"),
            lr=data.get("lr"), lr_search=data.get("lr_search"))


def _check_list(data: dict, path: Path, key: str) -> None:
    if not isinstance(data[key], list):
        raise ReportInputError(path, f"'{key}' = {data[key]!r}: expected a list")


def _checked_mix_weights(mix, path: Path) -> dict | None:
    """``mix`` if it is ``{position: [[weight per layer] or null, per seed]}``: per position,
    a list of weights for every seed, or null for every seed (no mix learned there)."""
    if mix is None:
        return None
    expected = "mix_weights: expected {position: [[weight per layer] or null, per seed]}"
    if not isinstance(mix, dict) or not all(isinstance(rows, list) for rows in mix.values()):
        raise ReportInputError(path, expected)
    for position, rows in mix.items():
        if all(row is None for row in rows):
            continue
        if not all(_is_vector(row) for row in rows):
            raise ReportInputError(path, f"{expected}; got {rows!r} for {position!r}")
    return mix


def _is_vector(row) -> bool:
    return (isinstance(row, list) and bool(row)
            and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in row))


# The report's reading errors live here, not in ctxrep.errors, which every stage imports: a
# change there would rerun the whole pipeline.
class ReportInputError(InputError):
    """An input file of the report (a cell's record, or any other) exists but is malformed."""

    def __init__(self, path: Path, problem: str):
        self.path = path
        super().__init__(f"{path}: {problem}")


def require(data: dict, path: Path, *keys: str) -> None:
    """``data``, read from ``path``, has every one of ``keys``."""
    missing = [k for k in keys if k not in data]
    if missing:
        raise ReportInputError(path, f"missing key(s) {missing}")


def number(value, path: Path, key: str) -> float:
    """``value`` (of ``key`` in ``path``) as a float; a bool or a non-number is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReportInputError(path, f"'{key}' = {value!r}: expected a number")
    return float(value)
