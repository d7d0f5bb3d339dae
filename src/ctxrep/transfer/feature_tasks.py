"""The feature-based path, per task kind: targets, head, loss and predictions over words.

    WordTask          one per task kind: dataset -> per-example targets, targets -> batch fields,
                      the head on a FeatureEncoder, the loss, head outputs -> one prediction per
                      example (as ``scoring.score`` wants)
      Classification  pooled text (or u, v of a pair) -> label; cross-entropy
      Regression      u, v of a pair -> a float score; squared error
      Tagging         every word -> a tag; cross-entropy over real words
      WordInContext   the target word's state in each sentence -> same sense?; cross-entropy
      SpanQA          start / end pointers over the context's words; the sum of both
                      cross-entropies, and the best span of at most MAX_ANSWER_WORDS words

The text fields each kind reads, and what the kinds must agree on with fine-tuning and the
probes, are in :mod:`~ctxrep.transfer.kinds`; fine-tuning's counterpart of this module (over
sub-words) is :mod:`~ctxrep.transfer.finetune_tasks`. :class:`~ctxrep.transfer.feature_train.
FeatureTaskObjective` batches the frozen inputs and asks a ``WordTask`` for the rest.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ctxrep.data.schemas import KINDS
from ctxrep.models.bert import IGNORE_INDEX  # the tag target at padding, as in fine-tuning
from ctxrep.transfer import feature_models as M
from ctxrep.transfer.kinds import answer_words, best_span, target_word

MAX_ANSWER_WORDS = 30


class WordTask:
    """How a task kind's examples become targets, and a head's outputs a loss and predictions."""

    def make_head(self, encoder: M.FeatureEncoder, n_labels: int, p) -> nn.Module:
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


class Classification(WordTask):
    def __init__(self, pair: bool):
        self.pair = pair

    def make_head(self, encoder, n_labels, p):
        head = M.PairClassifier if self.pair else M.SentenceClassifier
        return head(encoder, n_labels, p.encoder_hidden, p.dropout)


class Regression(WordTask):
    def make_head(self, encoder, n_labels, p):
        return M.PairRegressor(encoder, p.encoder_hidden, p.dropout)

    def targets(self, dataset) -> list:
        return [float(x) for x in dataset["label"]]

    def target_fields(self, targets, mask):
        return {"labels": torch.tensor(targets, dtype=torch.float32)}

    def loss(self, output, batch):
        return F.mse_loss(output, batch["labels"])

    def predict(self, output, batch, targets):
        return output.tolist()


class Tagging(WordTask):
    def make_head(self, encoder, n_labels, p):
        return M.Tagger(encoder, n_labels)

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


class WordInContext(WordTask):
    def make_head(self, encoder, n_labels, p):
        return M.WordInContextClassifier(encoder, p.encoder_hidden, p.dropout)

    def targets(self, dataset) -> list:
        """(target word in sentence 1, in sentence 2, label)."""
        return [(target_word(ex["sentence1"], ex["start1"]),
                 target_word(ex["sentence2"], ex["start2"]), ex["label"]) for ex in dataset]

    def target_fields(self, targets, mask):
        return {"target": torch.tensor([t[0] for t in targets]),
                "target2": torch.tensor([t[1] for t in targets]),
                "labels": torch.tensor([t[2] for t in targets])}


class SpanQA(WordTask):
    def make_head(self, encoder, n_labels, p):
        return M.SpanPointer(encoder)

    def targets(self, dataset) -> list:
        """(first word, last word) of the first answer, the context's word spans, the context."""
        return [(*answer_words(ex["context"], ex["answers"]), ex["context"]) for ex in dataset]

    def target_fields(self, targets, mask):
        return {"start": torch.tensor([t[0] for t in targets]),
                "end": torch.tensor([t[1] for t in targets])}

    def loss(self, output, batch):
        start_logits, end_logits = output
        return (F.cross_entropy(start_logits, batch["start"])
                + F.cross_entropy(end_logits, batch["end"]))

    def predict(self, output, batch, targets):
        """The context's text from the first to the last word of the best span."""
        texts = []
        for b, (_, _, spans, context) in enumerate(targets):
            n = len(spans)
            _, first, last = best_span(output[0][b, :n], output[1][b, :n], MAX_ANSWER_WORDS)
            texts.append(context[spans[first][0]:spans[last][1]])
        return texts


def make_word_task(kind: str) -> WordTask:
    if kind in ("classification", "pair_classification"):
        return Classification(pair=kind == "pair_classification")
    tasks = {"regression": Regression, "tagging": Tagging, "word_in_context": WordInContext,
             "span_qa": SpanQA}
    if kind not in tasks:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {list(KINDS)}")
    return tasks[kind]()
