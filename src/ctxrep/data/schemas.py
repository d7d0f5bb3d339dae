"""Canonical Arrow schemas. Readers produce these; transfer, metrics and report consume them.

A task's *kind* decides how it is modelled and scored, so adding a task needs no other change:

- ``classification``: ``text``, ``label`` (``ClassLabel``); ``pair_classification`` adds ``text_pair``
- ``regression``: ``text``, ``text_pair``, ``label`` (a float score: STS-B, SICK relatedness)
- ``tagging``: ``tokens`` (list of str), ``tags`` (list of ``ClassLabel``)
- ``word_in_context``: ``word``, ``sentence1``/``sentence2`` and the target's character span in
  each (``start1``, ``end1``, ``start2``, ``end2``, end exclusive), ``label``
- ``span_qa``: the SQuAD fields ``id``, ``title``, ``context``, ``question``,
  ``answers`` = {``text``: [str], ``answer_start``: [int]}
"""

from __future__ import annotations

from datasets import ClassLabel, Features, List, Value

CORPUS = Features({"doc_id": Value("string"), "title": Value("string"), "text": Value("string")})

KINDS = ("classification", "pair_classification", "regression", "tagging", "word_in_context",
         "span_qa")


def classification(labels: list[str], pair: bool = False, extra: dict | None = None) -> Features:
    cols = {"text": Value("string")}
    if pair:
        cols["text_pair"] = Value("string")
    cols["label"] = ClassLabel(names=labels)
    cols.update(extra or {})
    return Features(cols)


def regression() -> Features:
    """A sentence pair and its gold similarity score (any float range, e.g. 0-5 for STS-B)."""
    return Features({"text": Value("string"), "text_pair": Value("string"),
                     "label": Value("float32")})


def tagging(tags: list[str]) -> Features:
    return Features({"tokens": List(Value("string")), "tags": List(ClassLabel(names=tags))})


def word_in_context() -> Features:
    return Features({
        "word": Value("string"),
        "sentence1": Value("string"), "start1": Value("int32"), "end1": Value("int32"),
        "sentence2": Value("string"), "start2": Value("int32"), "end2": Value("int32"),
        "label": ClassLabel(names=["F", "T"]),
    })


def span_qa() -> Features:
    return Features({
        "id": Value("string"), "title": Value("string"),
        "context": Value("string"), "question": Value("string"),
        "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
    })
