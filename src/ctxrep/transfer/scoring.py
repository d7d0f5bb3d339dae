"""Turn a task model's predictions into the task's official metric, by task kind.

Predictions per kind (one entry per example, in dataset order):

- ``classification`` / ``pair_classification`` / ``word_in_context``: a label id
- ``tagging``: a list of tag ids, one per token
- ``span_qa``: the predicted answer text
"""

from __future__ import annotations

from ctxrep.metrics import compute

# Secondary metrics reported beside each task's primary one.
EXTRA = {"classification": ("macro_f1",), "pair_classification": ("macro_f1",)}


def score(kind: str, metric: str, dataset, predictions: list) -> dict:
    if len(predictions) != len(dataset):
        raise ValueError(f"{len(predictions)} predictions for {len(dataset)} examples")
    if kind in ("classification", "pair_classification", "word_in_context"):
        refs = references(kind, dataset)
        out = dict(compute(metric, predictions=predictions, references=refs))
        for extra in EXTRA.get(kind, ()):
            if extra != metric:
                out[extra] = compute(extra, predictions=predictions, references=refs)[extra]
        return {k: v for k, v in out.items() if isinstance(v, (int, float))}
    if kind == "tagging":
        out = compute(metric, predictions=readable(kind, dataset, predictions),
                      references=references(kind, dataset))
        return {k: v for k, v in out.items() if isinstance(v, (int, float))}
    if kind == "span_qa":
        preds = [{"id": ex_id, "prediction_text": text}
                 for ex_id, text in zip(dataset["id"], predictions)]
        refs = [{"id": ex_id, "answers": answers}
                for ex_id, answers in zip(dataset["id"], dataset["answers"])]
        return dict(compute(metric, predictions=preds, references=refs))
    raise ValueError(f"unknown task kind {kind!r}")


def primary_key(metric: str) -> str:
    """The key of the headline number in a metric's output."""
    return {"seqeval_f1": "f1", "squad": "f1", "pearson_spearman": "pearson"}.get(metric, metric)


def references(kind: str, dataset) -> list:
    """The gold answers of ``dataset`` in the form predictions are saved in (see ``readable``)."""
    if kind in ("classification", "pair_classification", "word_in_context"):
        return list(dataset["label"])
    if kind == "tagging":
        names = dataset.features["tags"].feature.names
        return [[names[t] for t in tags] for tags in dataset["tags"]]
    if kind == "span_qa":
        return [list(answers["text"]) for answers in dataset["answers"]]
    raise ValueError(f"unknown task kind {kind!r}")


def readable(kind: str, dataset, predictions: list) -> list:
    """Predictions as saved per seed: label ids, tag names per word, answer texts."""
    if kind == "tagging":
        names = dataset.features["tags"].feature.names
        return [[names[t] for t in tags] for tags in predictions]
    return list(predictions)


def n_classes(kind: str, dataset) -> int | None:
    if kind in ("classification", "pair_classification", "word_in_context"):
        return dataset.features["label"].num_classes
    return None
