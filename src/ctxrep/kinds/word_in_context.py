"""Word in context: is a word used in the same sense in two sentences? (WiC). Labels, scoring,
degeneracy and baselines are :mod:`~ctxrep.kinds.classification`'s.

- fields: ``sentence1``, ``sentence2`` (the target word's character span in each: ``start1``,
  ``end1``, ``start2``, ``end2``); target: ``label``; prediction: a label id
- feature-based head :class:`WordInContextClassifier`: the target's state in each sentence
  u, v → MLP([u; v; |u−v|; u*v])
- fine-tuning :class:`WordInContextFormat`: ``[CLS] sentence1 [SEP] sentence2 [SEP]``, the
  target's sub-words pooled (:class:`WordInContextHead`)
- baselines: ``majority`` and ``tfidf-lr``; probe: one item per pair (``max_train_pairs``)
"""

from __future__ import annotations

import numpy as np
import torch
from tokenizers import Encoding
from torch import nn

from ctxrep.kinds import classification
from ctxrep.kinds.interface import Feature, TaskFormat, WordTask, sequence_feature, truncating
from ctxrep.kinds.shared import (ProbeData, check_aligned, example_order, pair_features,
                                 pair_vector, target_word)
from ctxrep.models.bert import BertOutput
from ctxrep.models.feature_models import FeatureEncoder, mlp

NAME = "word_in_context"
FIELDS = ("sentence1", "sentence2")

# labels, scoring and degeneracy: classification's
n_labels, references, readable = (classification.n_labels, classification.references,
                                  classification.readable)
metric_inputs, is_degenerate = classification.metric_inputs, classification.is_degenerate


def baselines(train_set, eval_set) -> dict[str, list]:
    return classification.label_baselines(train_set, eval_set, FIELDS)


# ----------------------------------------------------------------------------------------------
# the feature-based path


class WordInContextClassifier(nn.Module):
    """The target word's encoder state in each sentence → MLP([u; v; |u−v|; u*v])."""

    def __init__(self, encoder: FeatureEncoder, hidden: int, dropout: float):
        super().__init__()
        self.encoder, self.head = encoder, mlp(4 * encoder.out_dim, hidden, 2, dropout)

    def forward(self, batch: dict) -> torch.Tensor:
        rows = torch.arange(batch["mask"].shape[0])
        u = self.encoder(batch["layers"], batch["mask"])[rows, batch["target"]]
        v = self.encoder(batch["layers2"], batch["mask2"])[rows, batch["target2"]]
        return self.head(pair_features(u, v))


class WordInContextTask(WordTask):
    """The target word's state in each sentence → same sense?; cross-entropy."""

    def make_head(self, encoder, n_labels, p):
        return WordInContextClassifier(encoder, p.encoder_hidden, p.dropout)

    def targets(self, dataset) -> list:
        """(target word in sentence 1, in sentence 2, label)."""
        return [(target_word(ex["sentence1"], ex["start1"]),
                 target_word(ex["sentence2"], ex["start2"]), ex["label"]) for ex in dataset]

    def target_fields(self, targets, mask):
        return {"target": torch.tensor([t[0] for t in targets]),
                "target2": torch.tensor([t[1] for t in targets]),
                "labels": torch.tensor([t[2] for t in targets])}


word_task = WordInContextTask


# ----------------------------------------------------------------------------------------------
# fine-tuning


class WordInContextHead(nn.Module):
    """u = mean of h_t over the target's sub-words in sentence 1, v = the same in sentence 2;
    logits = W Dropout([u; v; |u - v|; u * v]) + b."""

    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(4 * hidden, 2)

    @staticmethod
    def span_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, T, H), (B, T) 0/1 -> (B, H): the mean of the masked rows."""
        mask = mask.to(hidden.dtype)[..., None]
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        u = self.span_mean(encoded.last_hidden_state, batch["span1"])
        v = self.span_mean(encoded.last_hidden_state, batch["span2"])
        return self.classifier(self.dropout(pair_features(u, v)))  # (B, 2)


def char_span_positions(encoding: Encoding, sequence: int, start: int, end: int) -> list[int]:
    """Positions of the sub-words of text ``sequence`` (0 or 1) overlapping characters [start, end)."""
    return [position for position, (seq, (s, e)) in enumerate(zip(encoding.sequence_ids, encoding.offsets))
            if seq == sequence and s < end and e > start]


class WordInContextFormat(TaskFormat):
    """``[CLS] sentence1 [SEP] sentence2 [SEP]``; the target word's sub-words in each sentence
    (found from the character spans start1/end1, start2/end2 via offsets) are pooled by the
    head. A target cut off by max_seq_len pools the [CLS] vector instead."""

    columns = ("sentence1", "start1", "end1", "sentence2", "start2", "end2", "label")
    token_fields = {"span1": 0, "span2": 0}
    sequence_fields = ("label",)

    def __init__(self, tokenizer, p, train_set):
        self.tokenizer = truncating(tokenizer, p.max_seq_len)

    def span_mask(self, encoding: Encoding, sequence: int, start: int, end: int) -> list[int]:
        positions = char_span_positions(encoding, sequence, start, end) or [0]
        mask = [0] * len(encoding.ids)
        for position in positions:
            mask[position] = 1
        return mask

    def encode(self, dataset) -> list[Feature]:
        encodings = self.tokenizer.encode_batch(list(zip(dataset["sentence1"], dataset["sentence2"])))
        columns = [dataset[c] for c in ("start1", "end1", "start2", "end2", "label")]
        return [sequence_feature(i, enc, label=label,
                                 span1=self.span_mask(enc, 0, start1, end1),
                                 span2=self.span_mask(enc, 1, start2, end2))
                for i, (enc, start1, end1, start2, end2, label) in enumerate(zip(encodings, *columns))]

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return WordInContextHead(hidden, dropout)


task_format = WordInContextFormat


# ----------------------------------------------------------------------------------------------
# the probe: one item per sentence pair

PROBE_CAP = "max_train_pairs"


def probe_items(fields: list, split, max_items: int, seed: int | None, where: str) -> ProbeData:
    """One item per sentence pair: the target word's layers in both sentences (``fields``:
    the ``sentence1`` and ``sentence2`` features), as [u; v; |u - v|; u * v] → same sense."""
    first, second = fields
    check_aligned(first, split, where)
    check_aligned(second, split, where)
    order = example_order(min(len(first), len(second)), seed)
    if max_items:
        order = order[:max_items]
    columns = {name: split[name] for name in ("sentence1", "start1", "sentence2", "start2",
                                              "label")}
    xs, ys = [], []
    for i in (int(i) for i in order):
        u = first[i][:, target_word(columns["sentence1"][i], columns["start1"][i]), :]
        v = second[i][:, target_word(columns["sentence2"][i], columns["start2"][i]), :]
        xs.append(pair_vector(u, v))
        ys.append(columns["label"][i])
    return ProbeData(np.stack(xs, axis=1), np.asarray(ys, dtype=np.int64), [1] * len(xs))
