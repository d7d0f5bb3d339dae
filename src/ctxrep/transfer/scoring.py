"""Turn a task model's predictions into the task's metrics, by task kind.

A task names its metrics in its registry entry, primary first (``DatasetSpec.metrics``); every
function here takes either that sequence or one metric name. Predictions per kind (one entry
per example, in dataset order):

- ``classification`` / ``pair_classification`` / ``word_in_context``: a label id
- ``regression``: a float score
- ``tagging``: a list of tag ids, one per token
- ``span_qa``: the predicted answer text
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxrep.metrics import compute
from ctxrep.transfer.kinds import LABEL_KINDS


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
    if kind == "span_qa":
        preds = [{"id": ex_id, "prediction_text": text}
                 for ex_id, text in zip(dataset["id"], predictions)]
        refs = [{"id": ex_id, "answers": answers}
                for ex_id, answers in zip(dataset["id"], dataset["answers"])]
    elif kind in (*LABEL_KINDS, "regression", "tagging"):
        preds, refs = readable(kind, dataset, predictions), references(kind, dataset)
    else:
        raise ValueError(f"unknown task kind {kind!r}")
    out = {}
    for name in metric_names(metric):
        out.update({k: v for k, v in compute(name, predictions=preds, references=refs).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def primary_key(metric: str | Sequence[str]) -> str:
    """The key of the headline number in the primary metric's output."""
    primary = metric_names(metric)[0]
    return {"seqeval_f1": "f1", "squad": "f1", "pearson_spearman": "pearson"}.get(primary, primary)


def references(kind: str, dataset) -> list:
    """The gold answers of ``dataset`` in the form predictions are saved in (see ``readable``)."""
    if kind in LABEL_KINDS:
        return list(dataset["label"])
    if kind == "regression":
        return [float(x) for x in dataset["label"]]
    if kind == "tagging":
        names = dataset.features["tags"].feature.names
        return [[names[t] for t in tags] for tags in dataset["tags"]]
    if kind == "span_qa":
        return [list(answers["text"]) for answers in dataset["answers"]]
    raise ValueError(f"unknown task kind {kind!r}")


def readable(kind: str, dataset, predictions: list) -> list:
    """Predictions as saved per seed: label ids, float scores, tag names per word, answer texts."""
    if kind == "tagging":
        names = dataset.features["tags"].feature.names
        return [[names[t] for t in tags] for tags in predictions]
    if kind == "regression":
        return [float(x) for x in predictions]
    return list(predictions)


def n_classes(kind: str, dataset) -> int | None:
    if kind in LABEL_KINDS:
        return dataset.features["label"].num_classes
    return None
