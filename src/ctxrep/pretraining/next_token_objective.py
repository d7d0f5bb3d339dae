"""The left-to-right LM objective of BERT's Table 5 ablation ("LTR & No NSP"), for the shared
loop:

    loss = -(1/N) sum_t log p(w_{t+1} | w_1 .. w_t)      over every real position but a segment's last

The network is BERT's with causal attention (``BertConfig(is_decoder=True)``), and its tied
MLM head is the LM head: ``BertForPreTraining`` decodes the positions whose label is set, and
here every position's label is the token after it. Segments, epochs and batches are
:class:`~ctxrep.pretraining.bert_objective.BertObjective`'s, from the same seeds, so the two
objectives see the same text in the same order; nothing is masked.
"""

from __future__ import annotations

import math
from collections import Counter

import torch

from ctxrep.models.bert import IGNORE_INDEX
from ctxrep.pretraining.bert_data import PretrainingCollator
from ctxrep.pretraining.bert_objective import BertObjective
from ctxrep.training.distributed import rank_share


class NextTokenCollator:
    """Pads instances (as BERT's collator) and labels each position with the next token:
    labels[t] = input_ids[t + 1], IGNORE_INDEX at a segment's last token and at padding."""

    def __init__(self, pad: PretrainingCollator):
        self._pad = pad

    def __call__(self, instances, row_seeds=None) -> dict[str, torch.Tensor]:
        batch = self._pad.pad(instances)  # its next_sentence_label goes (BertObjective, no NSP)
        ids, real = batch["input_ids"], batch["attention_mask"].bool()
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[:, :-1] = ids[:, 1:].masked_fill(~real[:, 1:], IGNORE_INDEX)
        batch["labels"] = labels
        return batch


class NextTokenObjective(BertObjective):
    """Next-token loss on BERT's length-bucketed segments (see ``ctxrep.training.loop.Objective``).
    Held out: the loss, its perplexity and next-token accuracy, beside the accuracy of always
    predicting the most frequent training token."""

    @staticmethod
    def collators(vocab: dict, p):
        collate = NextTokenCollator(PretrainingCollator.from_vocab(vocab))
        return collate, collate

    def loss(self, batch: dict, model):
        out = model(**batch)
        logs = {"loss": out.loss.item(), "lm_acc": (out.mlm_correct / out.mlm_count.clamp(min=1)).item()}
        # the global batch's mean, as BertObjective's
        return (out.mlm_loss * rank_share(out.mlm_count, self.dist), logs,
                int(batch["attention_mask"].sum()))

    def evaluate(self) -> dict:
        sums = Counter()
        for batch, out in self.heldout_batches():
            n = float(out.mlm_count)
            sums["nll"] += float(out.mlm_loss) * n
            sums["correct"] += float(out.mlm_correct)
            sums["count"] += n
            sums["baseline"] += float((batch["labels"] == self.most_frequent).sum())
        loss = sums["nll"] / sums["count"]
        return {"val_lm_loss": loss, "val_lm_ppl": math.exp(loss),
                "val_lm_acc": sums["correct"] / sums["count"],
                "val_lm_acc_most_frequent": sums["baseline"] / sums["count"]}
