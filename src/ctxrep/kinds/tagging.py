"""Tagging: one tag per word (UD part of speech, CoNLL-2003 NER).

- fields: ``tokens`` (pre-split words); target: ``tags`` (a list of ``ClassLabel``);
  prediction: a list of tag ids (saved as tag names)
- feature-based head :class:`Tagger`: a softmax over tags at every word
- fine-tuning :class:`TaggingFormat`: a word's tag is read at its first sub-word
  (:class:`TaggingHead`)
- baselines: ``majority`` and ``lookup``; probe: one item per word (``max_train_words``)
"""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ctxrep.analysis.baselines import lookup_tags, majority_tags
from ctxrep.kinds.interface import Feature, TaskFormat, WordTask, sequence_feature, truncating
from ctxrep.kinds.shared import (ProbeData, check_aligned, example_order, label_count,
                                 labels_degenerate)
from ctxrep.models.bert import IGNORE_INDEX, BertOutput  # IGNORE_INDEX: the target at padding
from ctxrep.models.feature_models import FeatureEncoder

log = logging.getLogger(__name__)

NAME = "tagging"
FIELDS = ("tokens",)


def n_labels(dataset) -> int:
    """Tags of the ``tags`` column."""
    return label_count(dataset, "tags")


def _names(dataset, tag_ids: list) -> list:
    names = dataset.features["tags"].feature.names
    return [[names[t] for t in tags] for tags in tag_ids]


def references(dataset) -> list:
    """The gold tag names, a list per sentence."""
    return _names(dataset, dataset["tags"])


def readable(dataset, predictions: list) -> list:
    """Predicted tag names, a list per sentence."""
    return _names(dataset, predictions)


def metric_inputs(dataset, predictions: list) -> tuple[list, list]:
    return readable(dataset, predictions), references(dataset)


def is_degenerate(predictions: list, references: list | None = None) -> bool:
    """:func:`~ctxrep.kinds.shared.labels_degenerate` over every token of every sentence."""
    labels = [t for tags in predictions for t in tags]
    gold = [t for tags in references or [] for t in tags]
    return labels_degenerate(labels, gold)


def baselines(train_set, eval_set) -> dict[str, list]:
    return {"majority": majority_tags(train_set["tags"], eval_set["tokens"]),
            "lookup": lookup_tags(train_set["tokens"], train_set["tags"], eval_set["tokens"])}


# ----------------------------------------------------------------------------------------------
# the feature-based path


class Tagger(nn.Module):
    """A softmax over tags at every word: logits_t = W h_t + b."""

    def __init__(self, encoder: FeatureEncoder, n_tags: int):
        super().__init__()
        self.encoder, self.head = encoder, nn.Linear(encoder.out_dim, n_tags)

    def forward(self, batch: dict) -> torch.Tensor:
        return self.head(self.encoder(batch["layers"], batch["mask"]))  # (B, T, n_tags)


class TaggingTask(WordTask):
    """Every word → a tag; cross-entropy over real words."""

    def make_head(self, encoder, n_labels, p):
        return Tagger(encoder, n_labels)

    def targets(self, dataset) -> list:
        return list(dataset["tags"])

    def target_fields(self, targets, mask):
        labels = torch.full(mask.shape, IGNORE_INDEX, dtype=torch.long)
        for b, tags in enumerate(targets):
            labels[b, :len(tags)] = torch.tensor(tags)
        return {"labels": labels}

    def loss(self, output, batch):
        return F.cross_entropy(output.flatten(0, 1), batch["labels"].flatten(),
                               ignore_index=IGNORE_INDEX)

    def predict(self, output, batch, targets):
        lengths = batch["mask"].sum(1).tolist()
        return [row[:n].tolist() for row, n in zip(output.argmax(-1), lengths)]


word_task = TaggingTask


# ----------------------------------------------------------------------------------------------
# fine-tuning


class TaggingHead(nn.Module):
    """logits_t = W Dropout(h_t) + b at every sub-word t; a word's tag is read at its first sub-word."""

    def __init__(self, hidden: int, num_tags: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_tags)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.classifier(self.dropout(encoded.last_hidden_state))  # (B, T, tags)


def first_subwords(word_ids: list[int | None]) -> dict[int, int]:
    """word index -> position of its first sub-word (words cut off or lost to tokenization are absent)."""
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    return first


class TaggingFormat(TaskFormat):
    """Pre-split words -> one tag per word. The tag is the target of the word's first sub-word;
    its other sub-words and the specials carry IGNORE_INDEX. A word with no sub-word in the
    window (cut by max_seq_len, or emptied by normalisation) is predicted as the most frequent
    training tag."""

    columns = ("tokens", "tags")
    token_fields = {"labels": IGNORE_INDEX}
    token_level_output = True

    def __init__(self, tokenizer, p, train_set):
        self.tokenizer = truncating(tokenizer, p.max_seq_len)
        self.num_tags = n_labels(train_set)
        counts = Counter(tag for tags in train_set["tags"] for tag in tags)
        self.fallback_tag = counts.most_common(1)[0][0] if counts else 0

    def encode(self, dataset) -> list[Feature]:
        encodings = self.tokenizer.encode_batch(list(dataset["tokens"]), is_pretokenized=True)
        features, unseen = [], 0
        for i, (enc, tags) in enumerate(zip(encodings, dataset["tags"])):
            first = first_subwords(enc.word_ids)
            labels = [IGNORE_INDEX] * len(enc.ids)
            for word, position in first.items():
                labels[position] = tags[word]
            unseen += len(tags) - len(first)
            features.append(sequence_feature(i, enc, labels=labels, first_subword=first,
                                             n_words=len(tags)))
        if unseen:
            log.warning("tagging: %d words have no sub-word within max_seq_len; they are "
                        "predicted as tag %d", unseen, self.fallback_tag)
        return features

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return TaggingHead(hidden, self.num_tags, dropout)

    def loss(self, output: torch.Tensor, batch: dict) -> torch.Tensor:
        labels = batch["labels"]
        total = F.cross_entropy(output.flatten(0, 1).float(), labels.flatten(),
                                ignore_index=IGNORE_INDEX, reduction="sum")
        return total / (labels != IGNORE_INDEX).sum().clamp(min=1)

    def predict(self, outputs, features, dataset) -> list[list[int]]:
        predictions = []
        for output, feature in zip(outputs, features):
            best = output.argmax(-1).tolist()
            tags = [self.fallback_tag] * feature["n_words"]
            for word, position in feature["first_subword"].items():
                tags[word] = best[position]
            predictions.append(tags)
        return predictions


task_format = TaggingFormat


# ----------------------------------------------------------------------------------------------
# the probe: one item per word

PROBE_CAP = "max_train_words"


def probe_items(fields: list, split, max_items: int, seed: int | None, where: str) -> ProbeData:
    """Words of whole sentences (shuffled when ``seed`` is set) until ``max_items`` words
    (0 = all); each word's layers (``fields[0]``: the ``tokens`` features) → its tag."""
    features = fields[0]
    check_aligned(features, split, where)
    all_tags = split["tags"]
    xs, ys, total = [], [], 0
    for i in (int(i) for i in example_order(len(features), seed)):
        if max_items and total >= max_items:
            break
        layers, tags = features[i], all_tags[i]
        if layers.shape[1] != len(tags):
            raise ValueError(f"{where}: example {i} has {layers.shape[1]} feature rows for "
                             f"{len(tags)} tagged words")
        xs.append(layers)
        ys.append(np.asarray(tags, dtype=np.int64))
        total += len(tags)
    return ProbeData(np.concatenate(xs, axis=1), np.concatenate(ys), [len(y) for y in ys])
