"""Pearson and Spearman correlation of predicted and gold scores (STS-B, SICK relatedness).

For predictions x and references y (floats, one per example),

    pearson  = sum_i (x_i - mean x)(y_i - mean y) / sqrt(sum_i (x_i - mean x)^2 * sum_i (y_i - mean y)^2)
    spearman = pearson of the ranks of x and the ranks of y (tied values share their mean rank)

Both are in [-1, 1]; GLUE reports both for STS-B. Computed with
`scipy.stats.pearsonr` and `scipy.stats.spearmanr`.

Constant input: when all predictions (or all references) are equal, both
correlations are undefined (0 / 0; scipy returns nan with a warning). This
module defines them as 0.0 — no linear or monotone relation is captured — so
a degenerate model scores like a chance one instead of poisoning means with
nan. A single example counts as constant. Non-finite values are an error.
"""

import math

import datasets
import evaluate
from scipy.stats import pearsonr, spearmanr

_CITATION = """\
@inproceedings{cer-etal-2017-semeval,
    title = "{S}em{E}val-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation",
    author = "Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, I{\\~n}igo and Specia, Lucia",
    booktitle = "Proceedings of SemEval-2017",
    year = "2017",
}
"""
_KWARGS = """
Args:
    predictions: list of predicted scores (float), one per example.
    references: list of gold scores (float), same length.
Returns:
    {"pearson": float in [-1, 1], "spearman": float in [-1, 1]}   (0.0 for constant input)
"""


class PearsonSpearman(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features(
                {"predictions": datasets.Value("float64"), "references": datasets.Value("float64")}
            ),
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("pearson_spearman: no examples")
        for side, values in (("predictions", predictions), ("references", references)):
            bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
            if bad is not None:
                raise ValueError(f"pearson_spearman: {side}[{bad}] is {values[bad]}, not a finite number")
        if len(set(predictions)) < 2 or len(set(references)) < 2:
            return {"pearson": 0.0, "spearman": 0.0}
        return {
            "pearson": float(pearsonr(predictions, references).statistic),
            "spearman": float(spearmanr(predictions, references).statistic),
        }
