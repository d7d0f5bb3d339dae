"""Token accuracy (POS tagging): the fraction of tokens whose predicted tag equals the gold tag.

Sequences are flattened and every token counts (nothing is ignored):

    token_accuracy = sum_i #{j : pred_i[j] == gold_i[j]} / sum_i len(gold_i)

Each predicted sequence must have the same length as its reference; a mismatch
is an error naming the sequence index.
"""

import datasets
import evaluate

_CITATION = ""
_KWARGS = """
Args:
    predictions: list of tag sequences (lists of str).
    references: list of gold tag sequences, one per prediction, equal lengths.
Returns:
    {"token_accuracy": float in [0, 1], "num_tokens": int}
"""


class TokenAccuracy(evaluate.Metric):
    def _info(self):
        tags = datasets.Sequence(datasets.Value("string"))
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": tags, "references": tags}),
        )

    def _compute(self, predictions, references):
        correct = total = 0
        for i, (pred, gold) in enumerate(zip(predictions, references)):
            if len(pred) != len(gold):
                raise ValueError(
                    f"token_accuracy: sequence {i} has {len(pred)} predicted tags but {len(gold)} gold tags"
                )
            correct += sum(p == g for p, g in zip(pred, gold))
            total += len(gold)
        if total == 0:
            raise ValueError("token_accuracy: no tokens")
        return {"token_accuracy": correct / total, "num_tokens": total}
