"""Accuracy: the fraction of examples whose predicted label equals the reference.

    accuracy = #{i : prediction_i == reference_i} / N

Labels are class ids (ints) or class names (strings); the result is in [0, 1].
"""

import datasets
import evaluate

_CITATION = ""
_KWARGS = """
Args:
    predictions: list of predicted labels (int or str), one per example.
    references: list of gold labels, same type and length.
Returns:
    {"accuracy": float in [0, 1]}
"""


def _features(dtype: str) -> datasets.Features:
    return datasets.Features({"predictions": datasets.Value(dtype), "references": datasets.Value(dtype)})


class Accuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            # String labels first: an int fails the string check and falls through to int64.
            features=[_features("string"), _features("int64")],
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("accuracy: no examples")
        correct = sum(p == r for p, r in zip(predictions, references))
        return {"accuracy": correct / len(references)}
