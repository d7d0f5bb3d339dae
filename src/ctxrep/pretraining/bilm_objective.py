"""The biLM's pretraining data and objective for the shared loop.

Sentences are held compactly: one flat int32 array of *word-type* ids with sentence offsets, and
a table type → 50 char ids (int16). A type is any word seen in the corpus, in the vocabulary or
not: its chars feed the char-CNN, while the softmax target is its vocabulary id (or ``<UNK>``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import torch

from ctxrep import seeds
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.models.bilm import BiLM
from ctxrep.batching import bucket_by_length
from ctxrep.text.elmo_chars import ELMO_CHAR_SPEC, word_to_char_ids
from ctxrep.text.vocab import BOS, EOS, UNK
from ctxrep.training.distributed import Dist, rank_share


@dataclass
class SentenceArrays:
    """Sentences as type ids; type 0 is ``<S>``, type 1 ``</S>`` (shared by all splits)."""

    type_ids: np.ndarray    # (total words,) int32
    offsets: np.ndarray     # (n_sentences + 1,) int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def sentence(self, i: int) -> np.ndarray:
        return self.type_ids[self.offsets[i]:self.offsets[i + 1]]


class WordTypes:
    """Every word type seen, with its char ids and its vocabulary id."""

    def __init__(self, vocab: list[str]):
        self.vocab_index = {w: i for i, w in enumerate(vocab)}
        self.types: dict[str, int] = {BOS: 0, EOS: 1}

    def ids(self, words: list[str]) -> list[int]:
        types = self.types
        out = []
        for w in words:
            t = types.get(w)
            if t is None:
                t = types[w] = len(types)
            out.append(t)
        return out

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(types, 50) char ids and (types,) vocabulary ids."""
        words = sorted(self.types, key=self.types.get)
        chars = torch.tensor(np.array([word_to_char_ids(w, ELMO_CHAR_SPEC) for w in words],
                                      dtype=np.int16))
        unk = self.vocab_index[UNK]
        targets = torch.tensor([self.vocab_index.get(w, unk) for w in words], dtype=torch.long)
        return chars, targets


def load_sentences(corpus: TokenizedCorpus, split: str, types: WordTypes,
                   max_sentences: int = 0) -> SentenceArrays:
    ids, offsets = [], [0]
    for doc in corpus.documents(split, columns=["words"]):
        for words in doc["words"]:
            ids.extend(types.ids(words))
            offsets.append(len(ids))
            if max_sentences and len(offsets) - 1 >= max_sentences:
                break
        if max_sentences and len(offsets) - 1 >= max_sentences:
            break
    return SentenceArrays(np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64))


class LMLossModule(torch.nn.Module):
    """``forward`` = :meth:`BiLM.lm_loss`, so DDP and ``torch.compile`` wrappers see the whole
    loss computation as a forward pass (DDP synchronises gradients only through ``forward``)."""

    def __init__(self, bilm: BiLM):
        super().__init__()
        self.bilm = bilm

    def forward(self, char_ids, target_ids, mask):
        return self.bilm.lm_loss(char_ids, target_ids, mask)


class BiLMObjective:
    """Forward + backward LM NLL on length-bucketed sentence batches (see
    ``ctxrep.training.loop.Objective``)."""

    def __init__(self, bilm: BiLM, train: SentenceArrays, heldout: SentenceArrays,
                 char_table: torch.Tensor, target_table: torch.Tensor, batch_size: int,
                 seed: int, device: torch.device, dist: Dist = Dist()):
        self.bilm, self.model, self.dist = bilm, LMLossModule(bilm), dist
        self.train, self.heldout = train, heldout
        self.char_table, self.target_table = char_table, target_table
        self.batch_size, self.seed, self.device = batch_size, seed, device
        self._lengths = train.lengths().tolist()

    def plan(self, epoch: int) -> list[list[int]]:
        return bucket_by_length(self._lengths, self.batch_size,
                                random.Random(seeds.BILM_BATCHES.at(self.seed, epoch)))

    def _tensors(self, sentences: SentenceArrays, indices: list[int]) -> dict:
        rows = [sentences.sentence(i) for i in indices]
        width = max(len(r) for r in rows) + 2
        types = torch.full((len(rows), width), -1, dtype=torch.long)
        for b, r in enumerate(rows):
            types[b, 0] = 0                                  # <S>
            types[b, 1:len(r) + 1] = torch.from_numpy(r.astype(np.int64))
            types[b, len(r) + 1] = 1                         # </S>
        mask = types >= 0
        safe = types.clamp_min(0)
        char_ids = self.char_table[safe].long() * mask[..., None]
        targets = self.target_table[safe] * mask
        return {"char_ids": char_ids.to(self.device), "targets": targets.to(self.device),
                "mask": mask.to(self.device)}

    def batch(self, indices: list[int], step: int) -> dict:
        return self._tensors(self.train, indices)

    def loss(self, batch: dict, model):
        lm = model(batch["char_ids"], batch["targets"], batch["mask"])
        tokens = int(batch["mask"].sum())
        # the global batch's mean (both directions predict as many words; 1 in one process)
        loss = lm.loss * rank_share(lm.forward_tokens, self.dist)
        return loss, {"loss": loss.item(), "loss_forward": (lm.forward_nll / lm.forward_tokens).item(),
                      "loss_backward": (lm.backward_nll / lm.backward_tokens).item()}, tokens

    def evaluate(self) -> dict:
        """Exact (full-softmax) perplexity of each direction on the held-out sentences."""
        nll_f = nll_b = n_f = n_b = 0.0
        order = sorted(range(len(self.heldout)), key=lambda i: self.heldout.lengths()[i])
        for start in range(0, len(order), self.batch_size):
            b = self._tensors(self.heldout, order[start:start + self.batch_size])
            lm = self.bilm.exact_nll(b["char_ids"], b["targets"], b["mask"])
            nll_f += float(lm.forward_nll)
            nll_b += float(lm.backward_nll)
            n_f += float(lm.forward_tokens)
            n_b += float(lm.backward_tokens)
        ppl_f, ppl_b = math.exp(nll_f / n_f), math.exp(nll_b / n_b)
        return {"val_ppl_forward": ppl_f, "val_ppl_backward": ppl_b,
                "val_ppl": math.exp(0.5 * (nll_f / n_f + nll_b / n_b))}


def unigram_perplexity(train: SentenceArrays, heldout: SentenceArrays,
                       target_table: torch.Tensor, vocab_size: int) -> float:
    """The floor to beat: a unigram model over the same vocabulary (add-one smoothed), scored on
    the same held-out predictions as the biLM (each sentence's words plus one marker)."""
    train_targets = target_table[torch.from_numpy(train.type_ids.astype(np.int64))]
    counts = torch.bincount(train_targets, minlength=vocab_size).double()
    counts[0] += len(train)  # <S>: predicted once per sentence by the backward LM
    counts[1] += len(train)  # </S>: once per sentence by the forward LM
    logp = torch.log((counts + 1) / (counts.sum() + vocab_size))
    held = target_table[torch.from_numpy(heldout.type_ids.astype(np.int64))]
    # forward predicts words + </S>; backward predicts words + <S>: same count, averaged
    nll = -(logp[held].sum() + 0.5 * len(heldout) * (logp[1] + logp[0]))
    n = len(held) + len(heldout)
    return float(torch.exp(nll / n))
