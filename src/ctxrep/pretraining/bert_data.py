"""BERT pretraining inputs, built at batch time.

1. `create_nsp_instances`: sentence-split documents -> `[CLS] A [SEP] B [SEP]` pairs with an
   IsNext / NotNext label, following google-research/bert `create_pretraining_data.py`
   (or single full-length segments for MLM-only training, `nsp=False`).
2. `mask_tokens`: BERT's masked-LM corruption (15% of tokens chosen; of those 80% [MASK],
   10% a random token, 10% unchanged), optionally masking whole words. Fresh every call.
3. `PretrainingCollator` pads instances to the batch maximum and masks them;
   (`ctxrep.batching.bucket_by_length` groups instances of similar length into shuffled batches.)

Special-token ids always come from the vocabulary (`SpecialTokens.from_vocab`), never constants.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ctxrep.models.bert import IGNORE_INDEX

# ----------------------------------------------------------------------------------------------
# Special tokens


@dataclass(frozen=True)
class SpecialTokens:
    """Ids of BERT's special tokens in one vocabulary."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    TOKENS = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}

    @classmethod
    def from_vocab(cls, vocab: Mapping[str, int]) -> SpecialTokens:
        missing = [token for token in cls.TOKENS.values() if token not in vocab]
        if missing:
            raise ValueError(f"vocab: missing BERT special tokens {missing}")
        return cls(**{field: vocab[token] for field, token in cls.TOKENS.items()})

    @property
    def ids(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)


# ----------------------------------------------------------------------------------------------
# 1. Sentence pairs for next-sentence prediction


class SentenceSpan(NamedTuple):
    """Sentences [start, end) of document `doc` (indices into the input documents). Truncation
    to the length budget may drop tokens at either edge of the span."""

    doc: int
    start: int
    end: int


@dataclass
class PretrainingInstance:
    input_ids: list[int]  # [CLS] A [SEP] B [SEP], or [CLS] A [SEP] without NSP
    token_type_ids: list[int]  # 0 for [CLS] A [SEP], 1 for B [SEP]
    is_random_next: bool  # NSP label: B is from another document (HF label 1), else its continuation (0)
    segment_a: SentenceSpan
    segment_b: SentenceSpan | None  # None without NSP


Document = Sequence[Sequence[int]]  # sentences of WordPiece ids


class _Segments(NamedTuple):
    """Token lists and provenance of one instance before truncation and special tokens."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool
    a: SentenceSpan
    b: SentenceSpan | None


def create_nsp_instances(
    documents: Sequence[Document],
    max_seq_len: int,
    short_seq_prob: float,
    rng: random.Random,
    special: SpecialTokens,
    nsp: bool = True,
) -> list[PretrainingInstance]:
    """One pass over `documents` (call again, with the same rng, for a fresh epoch of pairs).

    Per document, consecutive sentences accumulate into a chunk until it reaches a target
    length (max_seq_len - 3, or with probability short_seq_prob a uniform length in [2, that]).
    With NSP the chunk splits at a random sentence boundary into A and B; with probability 1/2
    (always for a one-sentence chunk, so NotNext ends up slightly over 1/2) B is replaced by
    sentences from a random *other* document and the chunk's unused sentences are put back for
    the next instance. The pair is then trimmed one token at a time from the longer side, front
    or back at random, to fit.
    Without NSP each chunk becomes one segment of up to max_seq_len - 2 tokens.

    Deviation from the reference: the target length is drawn per instance (the reference draws
    it once per document), and the random document is guaranteed to differ from the current one.
    Instances come in document order; shuffling or bucketing is the caller's job.
    """
    if max_seq_len < (5 if nsp else 3):
        raise ValueError(f"max_seq_len: {max_seq_len} leaves no room for tokens after the special tokens")
    if not 0.0 <= short_seq_prob <= 1.0:
        raise ValueError(f"short_seq_prob: expected a probability, got {short_seq_prob!r}")
    non_empty = [d for d, document in enumerate(documents) if any(len(s) for s in document)]
    if nsp and len(non_empty) < 2:
        raise ValueError("documents: next-sentence prediction needs at least two non-empty documents")

    max_tokens = max_seq_len - (3 if nsp else 2)
    instances = []
    for position, doc in enumerate(non_empty):
        document = documents[doc]
        target = _target_length(max_tokens, short_seq_prob, rng)
        chunk_start, chunk_len, i = 0, 0, 0
        while i < len(document):
            chunk_len += len(document[i])
            if i == len(document) - 1 or chunk_len >= target:
                if nsp:
                    segments, next_sentence = _sentence_pair(
                        documents, non_empty, position, chunk_start, i + 1, target, rng
                    )
                else:
                    segments, next_sentence = _single_segment(documents, doc, chunk_start, i + 1)
                instances.append(_finish(segments, max_tokens, special, rng))
                chunk_start, chunk_len, i = next_sentence, 0, next_sentence
                target = _target_length(max_tokens, short_seq_prob, rng)
            else:
                i += 1
    return instances


def _target_length(max_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    # Occasional short sequences reduce the mismatch with short fine-tuning inputs (BERT's README).
    return rng.randint(2, max_tokens) if rng.random() < short_seq_prob else max_tokens


def _tokens(documents: Sequence[Document], span: SentenceSpan) -> list[int]:
    return [token for sentence in documents[span.doc][span.start : span.end] for token in sentence]


def _single_segment(documents, doc, start, end) -> tuple[_Segments, int]:
    a = SentenceSpan(doc, start, end)
    return _Segments(_tokens(documents, a), [], False, a, None), end


def _sentence_pair(documents, non_empty, position, start, end, target, rng) -> tuple[_Segments, int]:
    """Split chunk [start, end) of document non_empty[position] into (A, B); returns the pair
    and the sentence where the next chunk starts."""
    doc = non_empty[position]
    a_end = rng.randint(start + 1, end - 1) if end - start >= 2 else start + 1
    a = SentenceSpan(doc, start, a_end)
    tokens_a = _tokens(documents, a)
    if end - start == 1 or rng.random() < 0.5:
        other = rng.randrange(len(non_empty) - 1)
        other += other >= position  # uniform over the other documents
        b = _random_continuation(documents, non_empty[other], target - len(tokens_a), rng)
        # B did not use chunk sentences [a_end, end): they start the next chunk instead.
        return _Segments(tokens_a, _tokens(documents, b), True, a, b), a_end
    b = SentenceSpan(doc, a_end, end)
    return _Segments(tokens_a, _tokens(documents, b), False, a, b), end


def _random_continuation(documents, doc, min_tokens, rng) -> SentenceSpan:
    """Consecutive sentences from a random start in `doc`, until at least min_tokens tokens."""
    document = documents[doc]
    start = rng.randrange(len(document))
    end, length = start, 0
    while end < len(document) and (end == start or length < min_tokens):
        length += len(document[end])
        end += 1
    return SentenceSpan(doc, start, end)


def _finish(segments: _Segments, max_tokens: int, special: SpecialTokens, rng: random.Random) -> PretrainingInstance:
    tokens_a, tokens_b, is_random_next, a, b = segments
    _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
    input_ids = [special.cls, *tokens_a, special.sep]
    token_type_ids = [0] * len(input_ids)
    if b is not None:
        input_ids += [*tokens_b, special.sep]
        token_type_ids += [1] * (len(tokens_b) + 1)
    return PretrainingInstance(input_ids, token_type_ids, is_random_next, a, b)


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer list by one token, at its front or back at random, until both fit. Random
    sides avoid always cutting sentence ends, which would bias what the model sees."""
    while len(tokens_a) + len(tokens_b) > max_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        del longer[0 if rng.random() < 0.5 else -1]


# ----------------------------------------------------------------------------------------------
# 2. Masked-LM corruption


def mask_tokens(
    input_ids: torch.Tensor,
    special_mask: torch.Tensor,
    vocab_size: int,
    mask_id: int,
    mlm_prob: float = 0.15,
    generator: torch.Generator | None = None,
    whole_word: bool = False,
    is_continuation: torch.Tensor | None = None,
    special_ids: Sequence[int] = (),
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-LM corruption of a (B, T) batch; returns (masked input_ids, labels).

    Per sequence, k = max(1, round(mlm_prob * n)) of its n maskable tokens are chosen (tokens
    where special_mask is False; pass True at special tokens and padding). Each chosen token
    becomes [MASK] with probability 0.8, a uniformly random non-special token (ids not in
    special_ids) with 0.1, and stays unchanged with 0.1. labels hold the original id at chosen
    positions and IGNORE_INDEX elsewhere.

    whole_word: choose whole words, in random order, while the chosen token count stays <= k
    (at least one word). A word is a token with is_continuation False followed by the
    is_continuation True tokens after it (WordPiece `##` pieces); a continuation piece after a
    special token (its word start truncated away) is a word of its own.

    Randomness comes only from `generator` (on input_ids' device): seed it per epoch/step for
    reproducible, and therefore fresh-per-step, masks.
    """
    if not 0.0 < mlm_prob < 1.0:
        raise ValueError(f"mlm_prob: expected a probability in (0, 1), got {mlm_prob!r}")
    if whole_word and is_continuation is None:
        raise ValueError("is_continuation: whole-word masking needs the continuation-piece mask")
    batch, length = input_ids.shape
    device = input_ids.device

    # Words: runs of one start token and its continuation pieces; every token is a word without
    # whole_word. A piece right after a special token (its word start was truncated away)
    # starts a word of its own. word_id numbers the words of each sequence from 0.
    maskable = ~special_mask.bool()
    word_start = maskable
    if whole_word:
        follows_maskable = F.pad(maskable[:, :-1], (1, 0), value=False)
        word_start = maskable & ~(is_continuation.bool() & follows_maskable)
    word_index = (word_start.long().cumsum(1) - 1).clamp(min=0)

    # Visit words in a random order: every token of a word gets the word's random priority;
    # a stable sort keeps each word's tokens together, so rank = tokens visited before this one.
    word_priority = torch.rand(batch, length, generator=generator, device=device)
    priority = word_priority.gather(1, word_index).masked_fill(~maskable, 2.0)  # unmaskable last
    order = priority.argsort(dim=1, stable=True)
    positions = torch.arange(length, device=device).expand(batch, length)
    rank = torch.empty_like(order).scatter_(1, order, positions)

    # A word is chosen if it ends within the budget k, or is the first word visited.
    budget = (maskable.sum(1) * mlm_prob).round().clamp(min=1).long()
    # Per word (indexed by word_index): the last and first rank of its tokens; unmaskable
    # tokens sharing a word_index contribute -1 / length, i.e. nothing.
    word_last = torch.full_like(rank, -1).scatter_reduce(1, word_index, rank.where(maskable, -1), "amax")
    word_first = torch.full_like(rank, length).scatter_reduce(1, word_index, rank.where(maskable, length), "amin")
    chosen_word = (word_last < budget[:, None]) | (word_first == 0)
    chosen = maskable & chosen_word.gather(1, word_index)

    labels = torch.where(chosen, input_ids, IGNORE_INDEX)
    action = torch.rand(batch, length, generator=generator, device=device)
    replacements = _non_special_ids(vocab_size, special_ids, device)
    random_tokens = replacements[torch.randint(len(replacements), (batch, length), generator=generator, device=device)]
    masked = torch.where(chosen & (action < 0.8), mask_id, input_ids)
    masked = torch.where(chosen & (action >= 0.9), random_tokens, masked)
    return masked, labels


def _non_special_ids(vocab_size: int, special_ids: Sequence[int], device: torch.device) -> torch.Tensor:
    keep = torch.ones(vocab_size, dtype=torch.bool, device=device)
    keep[list(special_ids)] = False
    return keep.nonzero().squeeze(1)


# ----------------------------------------------------------------------------------------------
# 3. Batching


class PretrainingCollator:
    """Pads instances to the batch's longest (rounded up to pad_to_multiple_of) and masks them.

    Returns a dict of (B, T) int64 tensors input_ids (masked), token_type_ids, attention_mask
    (1 at real tokens), labels (IGNORE_INDEX where not masked), and next_sentence_label (B,)
    (0 IsNext, 1 NotNext). Call with one seed per instance (the caller's random stream).
    """

    def __init__(
        self,
        special: SpecialTokens,
        vocab_size: int,
        mlm_prob: float = 0.15,
        whole_word: bool = False,
        continuation_ids: torch.Tensor | None = None,
        pad_to_multiple_of: int = 1,
    ):
        if whole_word and continuation_ids is None:
            raise ValueError("continuation_ids: whole-word masking needs the (vocab_size,) continuation table")
        self.special = special
        self.vocab_size = vocab_size
        self.mlm_prob = mlm_prob
        self.whole_word = whole_word
        self.continuation_ids = continuation_ids
        self.pad_to_multiple_of = pad_to_multiple_of

    @classmethod
    def from_vocab(cls, vocab: Mapping[str, int], **kwargs) -> PretrainingCollator:
        """Special tokens from the vocab; WordPiece continuation pieces are those starting with `##`."""
        continuation = torch.zeros(len(vocab), dtype=torch.bool)
        continuation[[i for token, i in vocab.items() if token.startswith("##")]] = True
        return cls(SpecialTokens.from_vocab(vocab), len(vocab), continuation_ids=continuation, **kwargs)

    def pad(self, instances: Sequence[PretrainingInstance]) -> dict[str, torch.Tensor]:
        longest = max(len(instance.input_ids) for instance in instances)
        length = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        input_ids = torch.full((len(instances), length), self.special.pad, dtype=torch.long)
        token_type_ids = torch.zeros_like(input_ids)
        attention_mask = torch.zeros_like(input_ids)
        for row, instance in enumerate(instances):
            n = len(instance.input_ids)
            input_ids[row, :n] = torch.tensor(instance.input_ids)
            token_type_ids[row, :n] = torch.tensor(instance.token_type_ids)
            attention_mask[row, :n] = 1
        next_sentence_label = torch.tensor([int(instance.is_random_next) for instance in instances])
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": attention_mask,
            "next_sentence_label": next_sentence_label,
        }

    def __call__(self, instances: Sequence[PretrainingInstance], row_seeds: Sequence[int]) -> dict[str, torch.Tensor]:
        """Pad, then mask each instance on its own tokens with a generator seeded by its entry of
        ``row_seeds``: its masks do not depend on the batch it is in (nor on the padding, nor on
        which DDP rank collates it)."""
        if len(row_seeds) != len(instances):
            raise ValueError(f"row_seeds: one per instance ({len(instances)}), got {len(row_seeds)}")
        batch = self.pad(instances)
        input_ids = batch["input_ids"]
        labels = torch.full_like(input_ids, IGNORE_INDEX)
        special_ids = torch.tensor(self.special.ids)
        for row, (instance, seed) in enumerate(zip(instances, row_seeds)):
            n = len(instance.input_ids)
            ids = input_ids[row : row + 1, :n]
            is_continuation = self.continuation_ids[ids] if self.whole_word else None
            masked, row_labels = mask_tokens(
                ids, torch.isin(ids, special_ids), self.vocab_size, self.special.mask, self.mlm_prob,
                torch.Generator().manual_seed(seed), whole_word=self.whole_word,
                is_continuation=is_continuation, special_ids=self.special.ids,
            )  # fmt: skip
            input_ids[row, :n], labels[row, :n] = masked[0], row_labels[0]
        batch["labels"] = labels
        return batch


__all__ = [
    "SpecialTokens",
    "SentenceSpan",
    "PretrainingInstance",
    "create_nsp_instances",
    "mask_tokens",
    "PretrainingCollator",
]
