"""The per-kind facts every transfer path shares (ctxrep.transfer.kinds)."""

import pytest
from datasets import ClassLabel, Dataset, Features, Sequence, Value

from ctxrep.data.schemas import KINDS
from ctxrep.transfer.kinds import FIELDS, answer_words, is_degenerate, n_labels, target_word


def test_every_canonical_kind_has_its_text_fields():
    assert set(FIELDS) == set(KINDS)


def test_label_set_sizes_per_kind():
    labels = Dataset.from_dict({"text": ["a", "b"], "label": [0, 2]},
                               Features({"text": Value("string"),
                                         "label": ClassLabel(names=["x", "y", "z"])}))
    tags = Dataset.from_dict({"tokens": [["a", "b"]], "tags": [[0, 1]]},
                             Features({"tokens": Sequence(Value("string")),
                                       "tags": Sequence(ClassLabel(names=list("ABCD")))}))
    scores = Dataset.from_dict({"text": ["a"], "text_pair": ["b"], "label": [3.5]})
    assert n_labels("classification", labels) == 3
    assert n_labels("pair_classification", labels) == 3
    assert n_labels("tagging", tags) == 4
    assert n_labels("regression", scores) == 0
    plain = Dataset.from_dict({"text": ["a"], "label": [1]})       # not the canonical schema
    with pytest.raises(ValueError, match="expected a ClassLabel column"):
        n_labels("classification", plain)


def test_target_word_is_the_word_covering_the_character():
    assert target_word("he sat on the bank.", 14) == 4       # "bank." starts at 14
    assert target_word("he sat on the bank.", 17) == 4       # inside it
    with pytest.raises(ValueError, match="covers character 2"):
        target_word("he sat", 2)                             # the space


def test_answer_words_of_a_span_with_punctuation():
    context = "The river Thames flows through London, England."
    start = context.index("London")
    first, last, spans = answer_words(context, {"text": ["London"], "answer_start": [start]})
    assert (first, last) == (5, 5) and len(spans) == 7       # the word is "London,"
    start = context.index("Thames")
    first, last, _ = answer_words(context, {"text": ["Thames flows"], "answer_start": [start]})
    assert (first, last) == (2, 3)


@pytest.mark.parametrize("kind, predictions, degenerate", [
    ("classification", [1, 1, 1], True), ("classification", [1, 0, 1], False),
    ("regression", [2.5, 2.5], True), ("regression", [2.5, 3.0], False),
    ("tagging", [[3, 3], [3]], True), ("tagging", [[3, 3], [1]], False),
    ("span_qa", ["a", "a"], False),                          # answers are texts, not labels
])
def test_degenerate_means_one_prediction_for_everything(kind, predictions, degenerate):
    assert is_degenerate(kind, predictions) is degenerate


def _labels(counts: dict) -> list:
    """A flat list with each label repeated counts[label] times."""
    return [label for label, n in counts.items() for _ in range(n)]


BALANCED = _labels({0: 500, 1: 500})
# CoNLL-2003-like gold: 83 % of the tokens 'O', 10 sentences of 100 tokens
CONLL_GOLD = [_labels({"O": 83, "B-PER": 5, "I-PER": 4, "B-LOC": 4, "B-ORG": 4})] * 10


def _tagger(o_share: int) -> list[list[str]]:
    """10 sentences of 100 tags, o_share of them 'O', the rest spread over entity tags."""
    rest = 100 - o_share
    return [_labels({"O": o_share, "B-PER": rest - rest // 2, "B-LOC": rest // 2})] * 10


@pytest.mark.parametrize("kind, predictions, references, degenerate", [
    # 98.1 % of the predictions one class (3 classes, balanced-ish gold): flagged
    ("classification", _labels({0: 981, 1: 10, 2: 9}), _labels({0: 340, 1: 330, 2: 330}), True),
    ("classification", _labels({0: 981, 1: 10, 2: 9}), None, True),         # no gold: 95 % floor
    # binary, 1.3 % positive predictions (F1 about 5): flagged
    ("pair_classification", _labels({0: 987, 1: 13}), BALANCED, True),
    ("word_in_context", _labels({0: 951, 1: 49}), BALANCED, True),          # 4.9 % positive
    # a balanced binary seed, and a skewed but learning one (90 / 10): not flagged
    ("classification", _labels({0: 480, 1: 520}), BALANCED, False),
    ("classification", _labels({0: 900, 1: 100}), BALANCED, False),
    # gold itself 97 % one class: 98 % of it is following the gold, 99.5 % is not
    ("classification", _labels({0: 980, 1: 20}), _labels({0: 970, 1: 30}), False),
    ("classification", _labels({0: 995, 1: 5}), _labels({0: 970, 1: 30}), True),
    # CoNLL-like tagging: a reasonable tagger (85 % 'O') is not flagged, one at 96 % 'O' is
    ("tagging", _tagger(85), CONLL_GOLD, False),
    ("tagging", _tagger(92), CONLL_GOLD, False),
    ("tagging", _tagger(96), CONLL_GOLD, True),
    ("tagging", [["O"] * 100] * 10, CONLL_GOLD, True),                      # one tag
    # regression: one value, a near-constant one, and a spread one
    ("regression", [3.0] * 100, [1.0 + i % 5 for i in range(100)], True),
    ("regression", [3.0 + 0.001 * (i % 5) for i in range(100)],
     [1.0 + i % 5 for i in range(100)], True),                              # std 0.1 % of gold
    ("regression", [3.0 + 0.5 * (i % 5) for i in range(100)],
     [1.0 + i % 5 for i in range(100)], False),
    ("span_qa", ["a"] * 10, [["a"]] * 10, False),
])
def test_degenerate_by_share_against_the_gold(kind, predictions, references, degenerate):
    assert is_degenerate(kind, predictions, references) is degenerate
