"""SQuAD v1.1 exact match and F1, in percent, as defined by the official evaluation script.

Answers are normalised before comparison: lower-cased, punctuation removed,
the articles "a", "an", "the" removed as whole words, whitespace collapsed.

For one question with prediction p and gold answers g_1..g_k:

    EM = max_j [norm(p) == norm(g_j)]
    F1 = max_j F1(tokens(norm(p)), tokens(norm(g_j)))

where the token F1 counts the multiset overlap c of the two token lists,
precision = c / len(pred tokens), recall = c / len(gold tokens), and is 0 when
c == 0 (so an empty prediction scores 0 F1). Both are averaged over the
questions in `references` and multiplied by 100. A question without a
prediction scores 0, as in the official script; extra predictions are ignored.
"""

import collections
import re
import string

import datasets
import evaluate

_CITATION = """\
@inproceedings{rajpurkar-etal-2016-squad,
    title = "{SQ}u{AD}: 100,000+ Questions for Machine Comprehension of Text",
    author = "Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy",
    booktitle = "Proceedings of EMNLP 2016",
    year = "2016",
}
"""
_KWARGS = """
Args:
    predictions: list of {"id": str, "prediction_text": str}.
    references: list of {"id": str, "answers": {"text": [str, ...], "answer_start": [int, ...]}}.
Returns:
    {"exact_match": float in [0, 100], "f1": float in [0, 100]}
"""

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    overlap = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


class Squad(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation=_CITATION,
            inputs_description=_KWARGS,
            features=datasets.Features(
                {
                    "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                    "references": {
                        "id": datasets.Value("string"),
                        "answers": datasets.Sequence(
                            {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                        ),
                    },
                }
            ),
        )

    def _compute(self, predictions, references):
        if not references:
            raise ValueError("squad: no questions")
        predicted = {p["id"]: p["prediction_text"] for p in predictions}
        em_total = f1_total = 0.0
        for ref in references:
            golds = ref["answers"]["text"]
            if not golds:
                raise ValueError(f"squad: question {ref['id']!r} has no gold answers")
            if ref["id"] not in predicted:
                continue  # unanswered: scores 0
            pred = predicted[ref["id"]]
            em_total += max(exact_match(pred, g) for g in golds)
            f1_total += max(token_f1(pred, g) for g in golds)
        n = len(references)
        return {"exact_match": 100.0 * em_total / n, "f1": 100.0 * f1_total / n}
