"""Turn a task model's predictions into the task's metrics.

A task names its metrics in its registry entry, primary first (``DatasetSpec.metrics``); every
function here takes either that sequence or one metric name. What the predictions of a kind
are, and the form its metrics read them in, is the kind's (``metric_inputs``,
:mod:`ctxrep.kinds`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxrep import kinds
from ctxrep.metrics import compute, metric_info


def metric_names(metric: str | Sequence[str]) -> tuple[str, ...]:
    """A task's metric modules, primary first, from one name or the registry's sequence."""
    names = (metric,) if isinstance(metric, str) else tuple(metric)
    if not names:
        raise ValueError("a task needs at least one metric")
    return names


def score(kind: str, metric: str | Sequence[str], dataset, predictions: list) -> dict:
    """Every numeric key every metric of the task returns (e.g. ``accuracy``, ``macro_f1``;
    ``pearson`` and ``spearman``), computed on ``predictions`` against ``dataset``'s gold."""
    if len(predictions) != len(dataset):
        raise ValueError(f"{len(predictions)} predictions for {len(dataset)} examples")
    preds, refs = kinds.get(kind).metric_inputs(dataset, predictions)
    out = {}
    for name in metric_names(metric):
        out.update({k: v for k, v in compute(name, predictions=preds, references=refs).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def primary_key(metric: str | Sequence[str]) -> str:
    """The key of the headline number in the primary metric's output."""
    return metric_info(metric_names(metric)[0]).headline
