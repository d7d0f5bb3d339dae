"""Pair classification: two texts → one label (SICK entailment). Labels, scoring, degeneracy
and the fine-tuning head are :mod:`~ctxrep.kinds.classification`'s.

- fields: ``text``, ``text_pair``; target: ``label``; prediction: a label id
- feature-based head :class:`PairClassifier`: u, v = the pooled texts → MLP([u; v; |u−v|; u*v])
- fine-tuning :class:`PairClassificationFormat`: ``[CLS] text [SEP] text_pair [SEP]``
- baselines: ``majority`` and ``tfidf-lr`` on [tfidf(text); tfidf(text_pair)]; no probe
"""

from __future__ import annotations

import torch
from torch import nn

from ctxrep.kinds import classification
from ctxrep.kinds.interface import WordTask
from ctxrep.kinds.shared import pair_features
from ctxrep.models.feature_models import FeatureEncoder, mlp, pool

NAME = "pair_classification"
FIELDS = ("text", "text_pair")

# labels, scoring and degeneracy: classification's
n_labels, references, readable = (classification.n_labels, classification.references,
                                  classification.readable)
metric_inputs, is_degenerate = classification.metric_inputs, classification.is_degenerate


def baselines(train_set, eval_set) -> dict[str, list]:
    return classification.label_baselines(train_set, eval_set, FIELDS)


class PairClassifier(nn.Module):
    """Both texts through one encoder, pooled to u, v → MLP([u; v; |u−v|; u*v])."""

    def __init__(self, encoder: FeatureEncoder, n_labels: int, hidden: int, dropout: float):
        super().__init__()
        self.encoder, self.head = encoder, mlp(8 * encoder.out_dim, hidden, n_labels, dropout)

    def forward(self, batch: dict) -> torch.Tensor:
        u = pool(self.encoder(batch["layers"], batch["mask"]), batch["mask"])
        v = pool(self.encoder(batch["layers2"], batch["mask2"]), batch["mask2"])
        return self.head(pair_features(u, v))


class PairClassificationTask(WordTask):
    """u, v of the pair → label; cross-entropy."""

    def make_head(self, encoder, n_labels, p):
        return PairClassifier(encoder, n_labels, p.encoder_hidden, p.dropout)


word_task = PairClassificationTask


class PairClassificationFormat(classification.ClassificationFormat):
    """``[CLS] text [SEP] text_pair [SEP]`` (segments 0 / 1) -> label."""

    pair = True
    columns = ("text", "text_pair", "label")


task_format = PairClassificationFormat

PROBE_CAP = None
probe_items = None
