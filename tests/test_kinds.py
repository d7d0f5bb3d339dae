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
