"""What a task kind module defines (:data:`ATTRIBUTES`), and the bases of its two transfer
paths.

A kind module (``ctxrep.kinds.<kind>``) holds:

    NAME                     the kind's name, the key of the registry (``ctxrep.kinds.KINDS``)
    FIELDS                   the text fields whose words get features, in order
    n_labels(dataset)        the size of the label set a head predicts (0: a score or a span)
    references(dataset)      the gold answers, as predictions are saved (JSON-ready)
    readable(dataset, preds) predictions as saved per seed (label ids, scores, tag names, texts)
    metric_inputs(dataset, preds)  (predictions, references) in the form its metrics read
    is_degenerate(preds, refs=None)  a model that predicts (nearly) one label / score for all
    baselines(train, eval)   {trivial baseline: predictions on ``eval``} (predictions' form)
    word_task()              the feature-based path: a :class:`WordTask` (targets, head, loss)
    task_format(tokenizer, p, train_set)   fine-tuning: a :class:`TaskFormat` (inputs, head,
                             loss)
    PROBE_CAP                the ``ProbeParams`` field capping the probe's training items
                             (words or pairs), or None where the kind has no probe
    probe_items(fields, split, max_items, seed, where)   a split's
                             :class:`~ctxrep.kinds.shared.ProbeData` from the per-field features
                             (one ``FieldFeatures`` per ``FIELDS``), or None (no probe)

Predictions (one entry per example, in dataset order): a label id (classification, pair
classification, word in context), a float score (regression), a list of tag ids per token
(tagging), the answer text (span QA).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from tokenizers import Encoding, Tokenizer
from torch import nn

ATTRIBUTES = ("NAME", "FIELDS", "n_labels", "references", "readable", "metric_inputs",
              "is_degenerate", "baselines", "word_task", "task_format", "PROBE_CAP", "probe_items")


# ----------------------------------------------------------------------------------------------
# The feature-based path (over words; see ctxrep.transfer.feature_train)


class WordTask:
    """How a task kind's examples become targets, and a head's outputs a loss and predictions,
    on frozen word features. The default is one label per example, cross-entropy, argmax."""

    def make_head(self, encoder, n_labels: int, p) -> nn.Module:
        """The task model: ``encoder`` (a ``FeatureEncoder``) and the kind's head."""
        raise NotImplementedError

    def targets(self, dataset) -> list:
        """One target per example, in dataset order."""
        return list(dataset["label"])

    def target_fields(self, targets: list, mask: torch.Tensor) -> dict:
        """The batch fields of ``targets`` (``mask``: the first text field's real words)."""
        return {"labels": torch.tensor(targets)}

    def loss(self, output, batch: dict) -> torch.Tensor:
        return F.cross_entropy(output, batch["labels"])

    def predict(self, output, batch: dict, targets: list) -> list:
        """One prediction per example of the batch."""
        return output.argmax(-1).tolist()


# ----------------------------------------------------------------------------------------------
# Fine-tuning (over BERT sub-words; see ctxrep.transfer.finetune)

Feature = dict[str, Any]  # one input sequence: example, input_ids, token_type_ids + task fields


def truncating(tokenizer: Tokenizer, max_len: int) -> Tokenizer:
    """A copy of ``tokenizer`` that cuts encodings (specials included) to ``max_len`` sub-words,
    taking from the longer text of a pair first."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.enable_truncation(max_len, strategy="longest_first")
    return copy


def sequence_ends(tokenizer: Tokenizer) -> tuple[int, int]:
    """The ids of the special tokens ``tokenizer`` puts first and last in a sequence: [CLS] and
    [SEP] for BERT, <s> and </s> for RoBERTa (what a format that assembles its own sequences,
    span QA's windows, marks them with)."""
    marked = tokenizer.encode("a").ids
    plain = tokenizer.encode("a", add_special_tokens=False).ids
    start = next((i for i in range(len(marked)) if marked[i:i + len(plain)] == plain), None)
    if not plain or start in (None, 0) or start + len(plain) == len(marked):
        raise ValueError("the tokenizer does not put a special token at both ends of a sequence "
                         f"(\"a\" encodes as {marked})")
    return marked[0], marked[-1]


def sequence_feature(example: int, encoding: Encoding, **fields) -> Feature:
    return {"example": example, "input_ids": encoding.ids, "token_type_ids": encoding.type_ids,
            **fields}


class TaskFormat:
    """How a task kind becomes BERT inputs, a head, a loss and per-example predictions;
    built as ``TaskFormat(tokenizer, p, train_set)``.

    A *feature* is one input sequence; it records the index of its ``example``. Span QA makes
    several per example (context windows); the other kinds make one.
    """

    columns: ClassVar[tuple[str, ...]] = ()  # dataset columns the format reads
    token_fields: ClassVar[dict[str, int]] = {}  # per-sub-word feature fields -> padding value
    sequence_fields: ClassVar[tuple[str, ...]] = ()  # per-feature integer targets
    token_level_output: ClassVar[bool] = False  # head output is (B, T, ...) rather than (B, ...)

    def check_columns(self, dataset, split: str) -> None:
        missing = [c for c in self.columns if c not in dataset.column_names]
        if missing:
            raise ValueError(f"{split} split: missing columns {missing} for {type(self).__name__} "
                             f"(has {dataset.column_names})")

    def encode(self, dataset) -> list[Feature]:
        raise NotImplementedError

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        raise NotImplementedError

    def loss(self, output: torch.Tensor, batch: dict) -> torch.Tensor:
        """Mean training loss of a batch (float32)."""
        return F.cross_entropy(output.float(), batch["label"])

    def predict(self, outputs: list[torch.Tensor], features: list[Feature], dataset) -> list:
        """Head outputs of every feature of ``dataset`` (trimmed to the feature's length when
        token-level) -> one prediction per example, in dataset order."""
        return [int(output.argmax()) for output in outputs]
