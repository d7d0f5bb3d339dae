"""Entity-level precision, recall and F1 for sequence labelling (NER, chunking), CoNLL style.

Tags are IOB strings ("B-PER", "I-PER", "O"). Spans are decoded with the
conlleval convention (seqeval's default mode): an entity starts at a B- tag, or
at an I- tag whose type differs from the previous token's (so "O I-PER" opens a
PER entity), and ends where the next token does not continue it. A predicted
entity is correct only if its type *and* both boundaries match a gold entity.

    precision = correct / #predicted entities
    recall    = correct / #gold entities
    f1        = 2 * precision * recall / (precision + recall)     (0 when undefined)

Counts are pooled over all sentences (micro average); per-type scores use the
counts of one entity type. `accuracy` is plain token accuracy over all tags.
"""

import datasets
import evaluate
from seqeval.metrics.sequence_labeling import accuracy_score, get_entities, precision_recall_fscore_support

_CITATION = """\
@inproceedings{tjong-kim-sang-de-meulder-2003-introduction,
    title = "Introduction to the {C}o{NLL}-2003 Shared Task: Language-Independent Named Entity Recognition",
    author = "Tjong Kim Sang, Erik F. and De Meulder, Fien",
    booktitle = "Proceedings of CoNLL-2003",
    year = "2003",
}
"""
_KWARGS = """
Args:
    predictions: list of predicted tag sequences (lists of IOB tag strings).
    references: list of gold tag sequences, one per prediction, equal lengths.
Returns:
    {"precision", "recall", "f1", "accuracy": float in [0, 1],
     "per_type": {type: {"precision", "recall", "f1": float, "number": int gold entities}}}
"""


class SeqevalF1(evaluate.Metric):
    def _info(self):
        tags = datasets.Sequence(datasets.Value("string"))
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features({"predictions": tags, "references": tags}),
        )

    def _compute(self, predictions, references):
        for i, (pred, gold) in enumerate(zip(predictions, references)):
            if len(pred) != len(gold):
                raise ValueError(f"seqeval_f1: sequence {i} has {len(pred)} predicted tags but {len(gold)} gold tags")
        if not any(references):
            raise ValueError("seqeval_f1: no tokens")
        p, r, f, _ = precision_recall_fscore_support(references, predictions, average="micro", zero_division=0)
        # average=None reports types in sorted order of the union of gold and predicted types.
        types = sorted({t for t, _, _ in get_entities(references)} | {t for t, _, _ in get_entities(predictions)})
        tp, tr, tf, support = precision_recall_fscore_support(references, predictions, average=None, zero_division=0)
        per_type = {
            name: {"precision": float(tp[k]), "recall": float(tr[k]), "f1": float(tf[k]), "number": int(support[k])}
            for k, name in enumerate(types)
        }
        return {
            "precision": float(p),
            "recall": float(r),
            "f1": float(f),
            "accuracy": float(accuracy_score(references, predictions)),
            "per_type": per_type,
        }
