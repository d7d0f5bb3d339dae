"""Matthews correlation coefficient (MCC), the metric GLUE reports for CoLA.

For two classes, with TP, TN, FP and FN counted for the positive class,

    MCC = (TP * TN - FP * FN) / sqrt((TP + FP) * (TP + FN) * (TN + FP) * (TN + FN))

in [-1, 1]: 1 is perfect, 0 no better than chance, -1 always wrong. When a
factor of the denominator is 0 — a constant prediction, or a single gold
class — MCC is defined as 0.0 (scikit-learn's convention, no warning). With
more than two classes the multiclass generalisation (Gorodkin's R_K, as in
`sklearn.metrics.matthews_corrcoef`) is used.
"""

import datasets
import evaluate
from sklearn.metrics import matthews_corrcoef

_CITATION = """\
@article{matthews1975comparison,
    title = "Comparison of the predicted and observed secondary structure of T4 phage lysozyme",
    author = "Matthews, Brian W.",
    journal = "Biochimica et Biophysica Acta (BBA) - Protein Structure",
    year = "1975",
}
"""
_KWARGS = """
Args:
    predictions: list of predicted labels (int or str), one per example.
    references: list of gold labels, same type and length.
Returns:
    {"matthews_correlation": float in [-1, 1]}
"""


def _features(dtype: str) -> datasets.Features:
    return datasets.Features({"predictions": datasets.Value(dtype), "references": datasets.Value(dtype)})


class MatthewsCorrelation(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=[_features("string"), _features("int64")],
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("matthews_correlation: no examples")
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions))}
