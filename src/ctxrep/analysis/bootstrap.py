"""Per-example statistics of each metric and paired bootstrap confidence intervals.

Every metric the project reports is a function of *sums* of per-example statistics, which is
what makes resampling cheap (no metric module is called inside the bootstrap loop):

    accuracy        s_i = [correct_i]                       m = Σ correct / n
    token_accuracy  s_i = [correct tokens_i, tokens_i]      m = Σ correct / Σ tokens
    entity_f1       s_i = [tp_i, fp_i, fn_i] (entities)     m = 2 tp / (2 tp + fp + fn)
    macro_f1        s_i = [tp_ic, fp_ic, fn_ic] per class   m = mean over classes seen of F1_c
    binary_f1       s_i = [tp_i, fp_i, fn_i] of class 1     m = 2 tp / (2 tp + fp + fn)
    matthews        s_i = [tp_i, fp_i, fn_i, tn_i]          m = (tp·tn − fp·fn) / √(…), 0 if undefined
    squad_f1 / _em  s_i = [f1_i] / [em_i] (best gold)       m = Σ / n
    pearson         s_i = [x_i, y_i, x_i y_i, x_i², y_i²]    m = (n Σxy − Σx Σy) /
                    (x = prediction − first prediction,          √((n Σx² − (Σx)²)(n Σy² − (Σy)²)),
                     y = reference − first reference)            0 if either variance is 0

Pearson's r is not a mean of per-example values, but it is a function of the five sums above,
so a resample's r is recomputed exactly from its summed statistics. Shifting x and y by a
constant leaves r unchanged; shifting by the first value makes a constant prediction's
statistics exactly zero (so its r is exactly 0, as the metric module defines it) and keeps the
sums small. Spearman's ρ has no such sums (ranks change under resampling): it gets no CI.

``STATISTIC`` maps a metric module's output key to its statistic (:data:`ctxrep.metrics.CATALOGUE`).

A paired comparison of methods A and B on the same evaluation examples and the same seeds is

    Δ = mean_seeds m(A, seed) − mean_seeds m(B, seed)

and its 95 % interval comes from a two-level bootstrap: each replicate resamples the
evaluation examples with replacement (the same indices for every run) and the seeds with
replacement (the same seed picks for both methods when they ran the same number of seeds:
seed s of A is paired with seed s of B), then recomputes Δ. The percentile interval of the replicates is the
CI; a claim whose CI spans 0 is inconclusive.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache

import numpy as np

from ctxrep import seeds
from ctxrep.metrics import CATALOGUE, metric_path

BOOTSTRAP_SEED = seeds.BOOTSTRAP

# (metric module, key of its output) → the per-example statistic that sums to it, from the
# metric catalogue
STATISTIC = {(name, key): statistic for name, metric in CATALOGUE.items()
             for key, statistic in metric.statistics.items()}


def _squad_module():
    spec = importlib.util.spec_from_file_location("ctxrep_squad_metric", metric_path("squad"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_squad = cache(_squad_module)


def example_stats(metric: str, predictions: list, references: list,
                  n_classes: int | None = None) -> np.ndarray:
    """(n_examples, k) statistics of ``metric`` (a value of ``STATISTIC``).

    Predictions and references are as the transfer writes them: label ids (classification),
    lists of tag names (tagging), answer texts and lists of gold texts (span QA).
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} references")
    if metric == "accuracy":
        return np.array([[float(p == r)] for p, r in zip(predictions, references)]).reshape(-1, 1)
    if metric == "token_accuracy":
        return np.array([[sum(a == b for a, b in zip(p, r)), len(r)]
                         for p, r in zip(predictions, references)], dtype=float).reshape(-1, 2)
    if metric in ("binary_f1", "matthews"):
        rows = [[p == 1 and r == 1, p == 1 and r != 1, p != 1 and r == 1, p != 1 and r != 1]
                for p, r in zip(predictions, references)]
        out = np.array(rows, dtype=float).reshape(-1, 4)
        return out[:, :3] if metric == "binary_f1" else out
    if metric == "entity_f1":
        from seqeval.metrics.sequence_labeling import get_entities

        rows = []
        for p, r in zip(predictions, references):
            pe, re_ = set(get_entities(list(p))), set(get_entities(list(r)))
            rows.append([len(pe & re_), len(pe - re_), len(re_ - pe)])
        return np.array(rows, dtype=float).reshape(-1, 3)
    if metric == "macro_f1":
        n_classes = n_classes or 1 + max([*predictions, *references], default=0)
        out = np.zeros((len(predictions), 3 * n_classes))
        for i, (p, r) in enumerate(zip(predictions, references)):
            if p == r:
                out[i, 3 * r] = 1  # tp of class r
            else:
                out[i, 3 * p + 1] = 1  # fp of class p
                out[i, 3 * r + 2] = 1  # fn of class r
        return out
    if metric == "pearson":
        x, y = np.asarray(predictions, dtype=float), np.asarray(references, dtype=float)
        if len(x):
            x, y = x - x[0], y - y[0]
        return np.stack([x, y, x * y, x * x, y * y], axis=-1).reshape(-1, 5)
    if metric in ("squad_f1", "squad_em"):  # predicted text vs gold texts
        squad = _squad()
        fn = squad.token_f1 if metric == "squad_f1" else squad.exact_match
        return np.array([[max(fn(p, g) for g in golds)] for p, golds in zip(predictions, references)],
                        dtype=float).reshape(-1, 1)
    raise ValueError(f"no per-example statistics for metric {metric!r}")


def metric_from_sums(metric: str, sums: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """The metric from summed statistics; ``sums`` (..., k), ``n`` the number of examples."""
    if metric in ("accuracy", "squad_f1", "squad_em"):
        return sums[..., 0] / n
    if metric == "token_accuracy":
        return sums[..., 0] / np.maximum(sums[..., 1], 1)
    if metric == "pearson":
        sx, sy, sxy, sxx, syy = (sums[..., i] for i in range(5))
        var_x, var_y = n * sxx - sx * sx, n * syy - sy * sy
        # rounding can leave a tiny non-zero variance where all values are equal
        defined = (var_x > 1e-12 * np.maximum(n * sxx, 1e-300)) & \
                  (var_y > 1e-12 * np.maximum(n * syy, 1e-300))
        r = (n * sxy - sx * sy) / np.sqrt(np.where(defined, var_x * var_y, 1.0))
        return np.where(defined, np.clip(r, -1.0, 1.0), 0.0)
    if metric == "matthews":
        tp, fp, fn, tn = (sums[..., i] for i in range(4))
        denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
        return np.where(denominator > 0, (tp * tn - fp * fn) / np.maximum(denominator, 1e-12), 0.0)
    if metric in ("entity_f1", "binary_f1"):
        tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
        return np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    if metric == "macro_f1":
        tp, fp, fn = sums[..., 0::3], sums[..., 1::3], sums[..., 2::3]
        denominator = 2 * tp + fp + fn
        seen = denominator > 0
        f1 = np.where(seen, 2 * tp / np.maximum(denominator, 1), 0.0)
        return f1.sum(-1) / np.maximum(seen.sum(-1), 1)
    raise ValueError(f"unknown metric {metric!r}")


def metric_value(metric: str, stats: np.ndarray) -> float:
    return float(metric_from_sums(metric, stats.sum(0), len(stats)))


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    @property
    def spans_zero(self) -> bool:
        return self.low <= 0.0 <= self.high

    def as_dict(self) -> dict:
        return {"estimate": round(self.estimate, 6), "ci95": [round(self.low, 6), round(self.high, 6)]}


def _replicate_means(metric: str, runs: np.ndarray, indices: np.ndarray,
                     seed_picks: np.ndarray) -> np.ndarray:
    """runs (S, n, k); indices (B, n); seed_picks (B, S) → (B,) mean over picked seeds."""
    # Σ over resampled examples, per run: (B, S, k) via counts to avoid a (B, S, n, k) array.
    counts = np.zeros((indices.shape[0], runs.shape[1]))
    np.add.at(counts, (np.arange(indices.shape[0])[:, None], indices), 1.0)
    sums = np.einsum("bn,snk->bsk", counts, runs)                    # (B, S, k)
    values = metric_from_sums(metric, sums, runs.shape[1])          # (B, S)
    return np.take_along_axis(values, seed_picks, axis=1).mean(1)


def bootstrap_mean(metric: str, runs: list[np.ndarray], n_resamples: int = 1000,
                   seed: int = BOOTSTRAP_SEED) -> Interval:
    """95 % CI of the seed-mean metric of one method; ``runs`` one stats array per seed."""
    stacked = np.stack(runs)
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, stacked.shape[1], size=(n_resamples, stacked.shape[1]))
    picks = rng.integers(0, len(runs), size=(n_resamples, len(runs)))
    values = _replicate_means(metric, stacked, indices, picks)
    point = float(np.mean([metric_value(metric, r) for r in runs]))
    low, high = np.percentile(values, [2.5, 97.5])
    return Interval(point, float(low), float(high))


def paired_difference(metric: str, runs_a: list[np.ndarray], runs_b: list[np.ndarray],
                      n_resamples: int = 1000, seed: int = BOOTSTRAP_SEED) -> Interval:
    """95 % CI of mean_seeds m(A) − mean_seeds m(B), resampling the same examples for both."""
    return contrast(metric, [(1.0, runs_a), (-1.0, runs_b)], n_resamples, seed)


def contrast(metric: str, terms: list[tuple[float, list[np.ndarray]]], n_resamples: int = 1000,
             seed: int = BOOTSTRAP_SEED) -> Interval:
    """95 % CI of Σ_j c_j · mean_seeds m(method_j) over ``terms`` [(c_j, runs_j)], all on the
    same evaluation examples: every replicate resamples one set of example indices for every
    term, and one set of seed picks for every term that ran as many seeds as the first.

    ``[(1, A), (-1, B)]`` is the paired difference A − B; ``[(1, A_small), (-1, B_small),
    (-1, A_full), (1, B_full)]`` asks whether A's gain over B is larger with less data.
    """
    stacks = [np.stack(runs) for _, runs in terms]
    n = stacks[0].shape[1]
    if any(s.shape[1] != n for s in stacks):
        raise ValueError(f"paired runs need the same examples ({[s.shape[1] for s in stacks]})")
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, n, size=(n_resamples, n))
    first = rng.integers(0, len(stacks[0]), size=(n_resamples, len(stacks[0])))
    values = np.zeros(n_resamples)
    point = 0.0
    for (coef, runs), stacked in zip(terms, stacks):
        picks = first if len(runs) == len(stacks[0]) else \
            rng.integers(0, len(runs), size=(n_resamples, len(runs)))
        values += coef * _replicate_means(metric, stacked, indices, picks)
        point += coef * float(np.mean([metric_value(metric, r) for r in runs]))
    low, high = np.percentile(values, [2.5, 97.5])
    return Interval(point, float(low), float(high))
