"""Classification: one text → one label (SST-2, SST-5). Pair classification and word in context
reuse its labels, scoring, degeneracy rule, baselines and fine-tuning head.

- fields: ``text``; target: ``label`` (a ``ClassLabel``); prediction: a label id
- feature-based head :class:`SentenceClassifier`: pooled encoder states → MLP → logits
- fine-tuning :class:`ClassificationFormat`: ``[CLS] text [SEP]`` → :class:`ClassificationHead`
- baselines: ``majority`` and ``tfidf-lr``; no probe
"""

from __future__ import annotations

import torch
from torch import nn

from ctxrep.analysis.baselines import majority, tfidf_lr
from ctxrep.kinds.interface import Feature, TaskFormat, WordTask, sequence_feature, truncating
from ctxrep.kinds.shared import label_count, labels_degenerate
from ctxrep.models.bert import BertOutput
from ctxrep.models.feature_models import FeatureEncoder, mlp, pool

NAME = "classification"
FIELDS = ("text",)


# ----------------------------------------------------------------------------------------------
# labels, scoring, degeneracy, baselines (shared by every kind that predicts one label)


def n_labels(dataset) -> int:
    """Classes of the ``label`` column."""
    return label_count(dataset, "label")


def references(dataset) -> list:
    """The gold label ids."""
    return list(dataset["label"])


def readable(dataset, predictions: list) -> list:
    """Label ids, as predicted."""
    return list(predictions)


def metric_inputs(dataset, predictions: list) -> tuple[list, list]:
    return readable(dataset, predictions), references(dataset)


def is_degenerate(predictions: list, references: list | None = None) -> bool:
    """One label for (nearly) every example: :func:`~ctxrep.kinds.shared.labels_degenerate`."""
    return labels_degenerate(list(predictions), list(references or []))


def label_baselines(train_set, eval_set, columns: tuple[str, ...]) -> dict[str, list]:
    """``majority`` and ``tfidf-lr`` over the text ``columns`` (two: a pair side by side)."""
    def texts(dataset):
        if len(columns) == 1:
            return list(dataset[columns[0]])
        return list(zip(*(dataset[c] for c in columns)))

    labels = list(train_set["label"])
    return {"majority": majority(labels, len(eval_set)),
            "tfidf-lr": tfidf_lr(texts(train_set), labels, texts(eval_set))}


def baselines(train_set, eval_set) -> dict[str, list]:
    return label_baselines(train_set, eval_set, FIELDS)


# ----------------------------------------------------------------------------------------------
# the feature-based path


class SentenceClassifier(nn.Module):
    """Pooled encoder states → MLP → label logits: logits = MLP([max_t h_t; mean_t h_t])."""

    def __init__(self, encoder: FeatureEncoder, n_labels: int, hidden: int, dropout: float):
        super().__init__()
        self.encoder, self.head = encoder, mlp(2 * encoder.out_dim, hidden, n_labels, dropout)

    def forward(self, batch: dict) -> torch.Tensor:
        return self.head(pool(self.encoder(batch["layers"], batch["mask"]), batch["mask"]))


class ClassificationTask(WordTask):
    """Pooled text → label; cross-entropy."""

    def make_head(self, encoder, n_labels, p):
        return SentenceClassifier(encoder, n_labels, p.encoder_hidden, p.dropout)


word_task = ClassificationTask


# ----------------------------------------------------------------------------------------------
# fine-tuning


class ClassificationHead(nn.Module):
    """logits = W Dropout(pooled) + b, with pooled = tanh(W_p h_[CLS] + b_p) BERT's pooler output."""

    def __init__(self, hidden: int, num_labels: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.classifier(self.dropout(encoded.pooled_output))  # (B, labels)


class ClassificationFormat(TaskFormat):
    """``[CLS] text [SEP]`` (or, with ``pair``, ``[CLS] text [SEP] text_pair [SEP]``, segments
    0 / 1) -> label."""

    pair = False
    columns = ("text", "label")
    sequence_fields = ("label",)

    def __init__(self, tokenizer, p, train_set):
        self.tokenizer = truncating(tokenizer, p.max_seq_len)
        self.num_labels = n_labels(train_set)

    def encode(self, dataset) -> list[Feature]:
        texts = list(zip(dataset["text"], dataset["text_pair"])) if self.pair else list(dataset["text"])
        encodings = self.tokenizer.encode_batch(texts)
        return [sequence_feature(i, enc, label=label)
                for i, (enc, label) in enumerate(zip(encodings, dataset["label"]))]

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return ClassificationHead(hidden, self.num_labels, dropout)


task_format = ClassificationFormat

PROBE_CAP = None
probe_items = None
