"""Binary F1: the F1 of the positive class 1, as GLUE reports it for MRPC and QQP.

With TP, FP and FN counted for class 1 over the examples,

    precision = TP / (TP + FP)      recall = TP / (TP + FN)
    binary_f1 = 2 * precision * recall / (precision + recall) = 2 * TP / (2 * TP + FP + FN)

Class 0 plays no part except through FP and FN (unlike macro_f1, which also
averages in the F1 of class 0). When TP == 0 — no positive predicted, or none
predicted correctly — the score is 0.0, and no warning is raised
(scikit-learn's `zero_division=0`). Labels must be 0 or 1.
"""

import datasets
import evaluate
from sklearn.metrics import f1_score

_CITATION = ""
_KWARGS = """
Args:
    predictions: list of predicted labels (0 or 1), one per example.
    references: list of gold labels (0 or 1), same length.
Returns:
    {"binary_f1": float in [0, 1]}
"""


class BinaryF1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("binary_f1: no examples")
        odd = sorted((set(predictions) | set(references)) - {0, 1})
        if odd:
            raise ValueError(f"binary_f1: labels must be 0 or 1, got {odd}")
        f1 = f1_score(references, predictions, labels=[0, 1], pos_label=1, average="binary", zero_division=0)
        return {"binary_f1": float(f1)}
