"""Macro-averaged F1: the unweighted mean over classes of each class's F1.

For class c, with TP, FP and FN counted one-vs-rest over the examples,

    F1_c = 2 * TP / (2 * TP + FP + FN)

which equals 2PR / (P + R) and is 0 when TP == 0 (so a class that is never
predicted, or never correctly predicted, contributes 0 to the mean).

    macro_f1 = mean(F1_c for c in classes)

`classes` is the union of labels seen in predictions and references (as in
scikit-learn's default), or the `labels` argument when given; a listed class
absent from both sides scores 0.
"""

import datasets
import evaluate

_CITATION = ""
_KWARGS = """
Args:
    predictions: list of predicted labels (int or str), one per example.
    references: list of gold labels, same type and length.
    labels (optional): the classes to average over.
Returns:
    {"macro_f1": float in [0, 1], "per_class_f1": {str(label): float}}
"""


def _features(dtype: str) -> datasets.Features:
    return datasets.Features({"predictions": datasets.Value(dtype), "references": datasets.Value(dtype)})


class MacroF1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=[_features("string"), _features("int64")],
        )

    def _compute(self, predictions, references, labels=None):
        if not references:
            raise ValueError("macro_f1: no examples")
        classes = sorted(set(predictions) | set(references)) if labels is None else list(labels)
        per_class = {}
        for c in classes:
            tp = sum(p == c and r == c for p, r in zip(predictions, references))
            fp = sum(p == c and r != c for p, r in zip(predictions, references))
            fn = sum(p != c and r == c for p, r in zip(predictions, references))
            denom = 2 * tp + fp + fn
            per_class[str(c)] = 2 * tp / denom if denom else 0.0
        return {"macro_f1": sum(per_class.values()) / len(per_class), "per_class_f1": per_class}
