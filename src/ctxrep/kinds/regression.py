"""Regression: a text pair → a similarity score (SICK relatedness, STS-B).

- fields: ``text``, ``text_pair``; target: ``label`` (a float); prediction: a float score
- feature-based head :class:`PairRegressor`: MLP([u; v; |u−v|; u*v]) → score; squared error
- fine-tuning :class:`RegressionFormat`: ``[CLS] text [SEP] text_pair [SEP]`` →
  :class:`RegressionHead`; squared error
- baselines: ``mean`` and ``tfidf-ridge``; no probe
"""

from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F
from torch import nn

from ctxrep.analysis.baselines import mean_score, tfidf_ridge
from ctxrep.kinds.interface import Feature, TaskFormat, WordTask, sequence_feature, truncating
from ctxrep.kinds.shared import pair_features
from ctxrep.models.bert import BertOutput
from ctxrep.models.feature_models import FeatureEncoder, mlp, pool

NAME = "regression"
FIELDS = ("text", "text_pair")
# predictions whose spread is below this share of the gold spread are a constant
NEAR_CONSTANT = 0.01


def n_labels(dataset) -> int:
    """0: a score, not a label."""
    return 0


def references(dataset) -> list:
    """The gold scores, as floats."""
    return [float(x) for x in dataset["label"]]


def readable(dataset, predictions: list) -> list:
    return [float(x) for x in predictions]


def metric_inputs(dataset, predictions: list) -> tuple[list, list]:
    return readable(dataset, predictions), references(dataset)


def is_degenerate(predictions: list, references: list | None = None) -> bool:
    """One value for every pair, or (with ``references``) predictions whose population standard
    deviation is below 1 % of the gold's: a near-constant score."""
    values = [float(x) for x in predictions]
    if len(set(values)) <= 1:
        return True
    if not references:
        return False
    spread = statistics.pstdev(float(x) for x in references)
    return spread > 0 and statistics.pstdev(values) < NEAR_CONSTANT * spread


def baselines(train_set, eval_set) -> dict[str, list]:
    scores = [float(x) for x in train_set["label"]]
    pairs = lambda d: list(zip(d["text"], d["text_pair"]))  # noqa: E731
    return {"mean": mean_score(scores, len(eval_set)),
            "tfidf-ridge": tfidf_ridge(pairs(train_set), scores, pairs(eval_set))}


# ----------------------------------------------------------------------------------------------
# the feature-based path


class PairRegressor(nn.Module):
    """Both texts through one encoder, pooled to u, v → MLP([u; v; |u−v|; u*v]) → one score
    (trained with squared error against the gold similarity)."""

    def __init__(self, encoder: FeatureEncoder, hidden: int, dropout: float):
        super().__init__()
        self.encoder, self.head = encoder, mlp(8 * encoder.out_dim, hidden, 1, dropout)

    def forward(self, batch: dict) -> torch.Tensor:
        u = pool(self.encoder(batch["layers"], batch["mask"]), batch["mask"])
        v = pool(self.encoder(batch["layers2"], batch["mask2"]), batch["mask2"])
        return self.head(pair_features(u, v)).squeeze(-1)  # (B,)


class RegressionTask(WordTask):
    """u, v of a pair → a float score; loss = mean (score − gold)²."""

    def make_head(self, encoder, n_labels, p):
        return PairRegressor(encoder, p.encoder_hidden, p.dropout)

    def targets(self, dataset) -> list:
        return [float(x) for x in dataset["label"]]

    def target_fields(self, targets, mask):
        return {"labels": torch.tensor(targets, dtype=torch.float32)}

    def loss(self, output, batch):
        return F.mse_loss(output, batch["labels"])

    def predict(self, output, batch, targets):
        return output.tolist()


word_task = RegressionTask


# ----------------------------------------------------------------------------------------------
# fine-tuning


class RegressionHead(nn.Module):
    """score = w · Dropout(pooled) + b, with pooled BERT's pooler output (as for STS-B in BERT)."""

    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.regressor = nn.Linear(hidden, 1)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.regressor(self.dropout(encoded.pooled_output)).squeeze(-1)  # (B,)


class RegressionFormat(TaskFormat):
    """``[CLS] text [SEP] text_pair [SEP]`` (segments 0 / 1) -> a float score, trained with
    squared error against the gold score (``label``)."""

    columns = ("text", "text_pair", "label")
    sequence_fields = ("label",)

    def __init__(self, tokenizer, p, train_set):
        self.tokenizer = truncating(tokenizer, p.max_seq_len)

    def encode(self, dataset) -> list[Feature]:
        encodings = self.tokenizer.encode_batch(list(zip(dataset["text"], dataset["text_pair"])))
        return [sequence_feature(i, enc, label=float(label))
                for i, (enc, label) in enumerate(zip(encodings, dataset["label"]))]

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return RegressionHead(hidden, dropout)

    def loss(self, output: torch.Tensor, batch: dict) -> torch.Tensor:
        return F.mse_loss(output.float(), batch["label"].float())

    def predict(self, outputs: list[torch.Tensor], features: list[Feature], dataset) -> list[float]:
        return [float(output) for output in outputs]


task_format = RegressionFormat

PROBE_CAP = None
probe_items = None
