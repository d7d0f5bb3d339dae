"""BERT's pretraining data and objective for the shared loop.

Each epoch builds fresh NSP instances from the documents (seeded by the epoch), and each step
draws fresh masks (seeded by the step), as dynamic masking prescribes. Plan entries encode
(epoch, instance) as ``epoch << 32 | instance`` so a batch can be rebuilt from the plan alone.
"""

from __future__ import annotations

import random
from collections import Counter

import torch

from ctxrep import seeds
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.models.bert import IGNORE_INDEX, BertForPreTraining
from ctxrep.batching import bucket_by_length
from ctxrep.pretraining.bert_data import PretrainingCollator, SpecialTokens, create_nsp_instances
from ctxrep.training.distributed import Dist, rank_share

_EPOCH_SHIFT = 32
HELDOUT_MLM_PROB = 0.15  # BERT's rate: the held-out yardstick of every recipe


def load_documents(corpus: TokenizedCorpus, split: str) -> list[list[list[int]]]:
    return [doc["wordpieces"] for doc in corpus.documents(split, columns=["wordpieces"])]


class BertObjective:
    """MLM (+ NSP) loss on length-bucketed instance batches (see
    ``ctxrep.training.loop.Objective``)."""

    def __init__(self, model: BertForPreTraining, train_docs, heldout_docs, vocab: dict, p,
                 device: torch.device, dist: Dist = Dist()):
        self.model, self.p, self.device, self.dist = model, p, device, dist
        # the NSP head (see ctxrep.training.loop.train under DDP)
        self.has_unused_parameters = not p.nsp
        self.train_docs = train_docs
        self.special = SpecialTokens.from_vocab(vocab)
        self.collate, self.heldout_collate = self.collators(vocab, p)
        self._epochs: dict[int, list] = {}
        # Held-out: one fixed set of instances and masks, so every evaluation is comparable.
        if len(heldout_docs) < 2:
            raise ValueError(f"{len(heldout_docs)} held-out document(s): evaluation needs at "
                             f"least 2 (raise tokenize.heldout_fraction)")
        heldout_seed = seeds.BERT_HELDOUT.at(p.seed, seeds.BERT_HELDOUT_COUNTER)
        held = create_nsp_instances(heldout_docs, p.max_seq_len, p.short_seq_prob,
                                    random.Random(heldout_seed), self.special, nsp=p.nsp)
        self.heldout = held[: p.eval_instances]
        counts = Counter(t for doc in train_docs for sent in doc for t in sent)
        self.most_frequent = next(t for t, _ in counts.most_common() if t not in self.special.ids)

    @staticmethod
    def collators(vocab: dict, p):
        """(training, held-out) collators: pad and mask."""
        # The held-out set is masked at BERT's 15 % whatever the recipe trains with, so recipes
        # with more masks (less context left per prediction) are judged on the same task.
        return (PretrainingCollator.from_vocab(vocab, mlm_prob=p.mlm_prob, whole_word=p.whole_word),
                PretrainingCollator.from_vocab(vocab, mlm_prob=HELDOUT_MLM_PROB,
                                               whole_word=p.whole_word))

    def _instances(self, epoch: int) -> list:
        if epoch not in self._epochs:
            if len(self._epochs) > 1:
                self._epochs.pop(min(self._epochs))
            self._epochs[epoch] = create_nsp_instances(
                self.train_docs, self.p.max_seq_len, self.p.short_seq_prob,
                random.Random(seeds.BERT_INSTANCES.at(self.p.seed, epoch)), self.special,
                nsp=self.p.nsp)
        return self._epochs[epoch]

    def plan(self, epoch: int) -> list[list[int]]:
        instances = self._instances(epoch)
        lengths = [len(x.input_ids) for x in instances]
        batches = bucket_by_length(lengths, self.p.batch_size,
                                   random.Random(seeds.BERT_BATCHES.at(self.p.seed, epoch)))
        return [[(epoch << _EPOCH_SHIFT) | i for i in b] for b in batches]

    def _collate(self, instances, row_seeds: list[int], collate=None) -> dict:
        batch = (collate or self.collate)(instances, row_seeds)
        if not self.p.nsp:
            batch.pop("next_sentence_label")
        return {k: v.to(self.device) for k, v in batch.items()}

    def batch(self, indices: list[int], step: int) -> dict:
        instances = [self._instances(i >> _EPOCH_SHIFT)[i & ((1 << _EPOCH_SHIFT) - 1)]
                     for i in indices]
        return self._collate(instances, [seeds.BERT_MASKING.at(self.p.seed, i) for i in indices])

    def loss(self, batch: dict, model):
        out = model(**batch)
        # the global batch's means, not the mean of the ranks' means (factors of 1 in one process)
        loss = out.mlm_loss * rank_share(out.mlm_count, self.dist)
        if out.nsp_loss is not None:
            loss = loss + out.nsp_loss * rank_share(out.nsp_count, self.dist)
        logs = {"loss": out.loss.item(), "mlm_loss": out.mlm_loss.item(),
                "mlm_acc": (out.mlm_correct / out.mlm_count.clamp(min=1)).item()}
        if out.nsp_loss is not None:
            logs["nsp_loss"] = out.nsp_loss.item()
            logs["nsp_acc"] = (out.nsp_correct / out.nsp_count).item()
        return loss, logs, int(batch["attention_mask"].sum())

    def heldout_batches(self):
        """(batch, the model's output on it) over the held-out instances, shortest first; each
        instance masked (where the collator masks) from a seed of its own, the same every time."""
        order = sorted(range(len(self.heldout)), key=lambda i: len(self.heldout[i].input_ids))
        for start in range(0, len(order), self.p.batch_size):
            idx = order[start:start + self.p.batch_size]
            batch = self._collate([self.heldout[i] for i in idx], [12345 + i for i in idx],
                                  self.heldout_collate)
            yield batch, self.model(**batch)

    def evaluate(self) -> dict:
        sums = Counter()
        for batch, out in self.heldout_batches():
            n = float(out.mlm_count)
            sums["mlm_nll"] += float(out.mlm_loss) * n
            sums["mlm_correct"] += float(out.mlm_correct)
            sums["mlm_count"] += n
            labels = batch["labels"]
            sums["baseline_correct"] += float((labels == self.most_frequent).sum())
            # [MASK] positions alone: 10 % of the chosen positions keep their token, and a model
            # that copies its input there scores ~0.1 + 0.8 x the most-frequent rate while it
            # has learned nothing from context; at [MASK] only context can help.
            at_mask = batch["input_ids"][labels != IGNORE_INDEX] == self.special.mask
            sums["mask_correct"] += float(out.mlm_hits[at_mask].sum())
            sums["mask_count"] += float(at_mask.sum())
            sums["mask_baseline"] += float((labels[labels != IGNORE_INDEX][at_mask]
                                            == self.most_frequent).sum())
            if out.nsp_loss is not None:
                sums["nsp_correct"] += float(out.nsp_correct)
                sums["nsp_count"] += float(out.nsp_count)
        metrics = {"val_mlm_loss": sums["mlm_nll"] / sums["mlm_count"],
                   "val_mlm_acc": sums["mlm_correct"] / sums["mlm_count"],
                   "val_mlm_acc_most_frequent": sums["baseline_correct"] / sums["mlm_count"],
                   "val_mlm_acc_at_mask": sums["mask_correct"] / max(sums["mask_count"], 1.0),
                   "val_mlm_acc_at_mask_most_frequent":
                       sums["mask_baseline"] / max(sums["mask_count"], 1.0)}
        if sums["nsp_count"]:
            metrics["val_nsp_acc"] = sums["nsp_correct"] / sums["nsp_count"]
        return metrics
