"""BERT fine-tuning, per task kind: how examples become input sequences, and the heads.

    TaskFormat            one per task kind: examples -> input sequences ("features"), head, loss,
                          head outputs -> one prediction per example (as ``scoring.score`` wants)
      SequenceClassification   [CLS] text [SEP] (text_pair [SEP]) -> label
      SequenceRegression       [CLS] text [SEP] text_pair [SEP] -> a float score (MSE)
      Tagging                  pre-split words -> one tag per word, read at its first sub-word
      SpanQA                   [CLS] question [SEP] context window [SEP] -> answer span
      WordInContext            [CLS] sentence1 [SEP] sentence2 [SEP] -> same sense of the target?
    ClassificationHead, RegressionHead, TaggingHead, SpanHead, WordInContextHead   the heads
                          (math in docstrings)

``finetune.py`` trains a BERT encoder with one of these (``make_task_format``).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from tokenizers import Encoding, Tokenizer
from torch import nn

from ctxrep.config import FinetuneTransferParams
from ctxrep.data.schemas import KINDS
from ctxrep.models.bert import IGNORE_INDEX, BertOutput
from ctxrep.transfer.kinds import best_span, n_labels

log = logging.getLogger(__name__)

MAX_ANSWER_TOKENS = 30  # longest answer span considered at inference, in sub-words (as in BERT)
MAX_QUESTION_TOKENS = 64  # questions are cut to this many sub-words (BERT's max_query_length)
MASKED_LOGIT = -1e4  # span logit at padding: exp() underflows to 0, and it is finite in bf16

Feature = dict[str, Any]  # one input sequence: example, input_ids, token_type_ids + task fields


def truncating(tokenizer: Tokenizer, max_len: int) -> Tokenizer:
    """A copy of ``tokenizer`` that cuts encodings (specials included) to ``max_len`` sub-words,
    taking from the longer text of a pair first."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.enable_truncation(max_len, strategy="longest_first")
    return copy


# ----------------------------------------------------------------------------------------------
# Heads


class ClassificationHead(nn.Module):
    """logits = W Dropout(pooled) + b, with pooled = tanh(W_p h_[CLS] + b_p) BERT's pooler output."""

    def __init__(self, hidden: int, num_labels: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.classifier(self.dropout(encoded.pooled_output))  # (B, labels)


class RegressionHead(nn.Module):
    """score = w · Dropout(pooled) + b, with pooled BERT's pooler output (as for STS-B in BERT)."""

    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.regressor = nn.Linear(hidden, 1)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.regressor(self.dropout(encoded.pooled_output)).squeeze(-1)  # (B,)


class TaggingHead(nn.Module):
    """logits_t = W Dropout(h_t) + b at every sub-word t; a word's tag is read at its first sub-word."""

    def __init__(self, hidden: int, num_tags: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_tags)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        return self.classifier(self.dropout(encoded.last_hidden_state))  # (B, T, tags)


class SpanHead(nn.Module):
    """(s_t, e_t) = W Dropout(h_t) + b with W in R^{2 x H}: P(answer starts at t) = softmax_t(s),
    P(ends at t) = softmax_t(e), over the window's real tokens (padding gets MASKED_LOGIT)."""

    def __init__(self, hidden: int, dropout: float):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.start_end = nn.Linear(hidden, 2)

    def forward(self, encoded: BertOutput, batch: dict) -> torch.Tensor:
        logits = self.start_end(self.dropout(encoded.last_hidden_state))  # (B, T, 2)
        padding = ~batch["attention_mask"].bool()
        return logits.masked_fill(padding[..., None], MASKED_LOGIT)


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
        pair = torch.cat([u, v, (u - v).abs(), u * v], dim=-1)
        return self.classifier(self.dropout(pair))  # (B, 2)


# ----------------------------------------------------------------------------------------------
# Task formats


class TaskFormat:
    """How a task kind becomes BERT inputs, a head, a loss and per-example predictions.

    A *feature* is one input sequence; it records the index of its ``example``. Span QA makes
    several per example (context windows); the other kinds make one.
    """

    columns: ClassVar[tuple[str, ...]] = ()  # dataset columns the format reads
    token_fields: ClassVar[dict[str, int]] = {}  # per-sub-word feature fields -> padding value
    sequence_fields: ClassVar[tuple[str, ...]] = ()  # per-feature integer targets
    token_level_output: ClassVar[bool] = False  # head output is (B, T, ...) rather than (B, ...)

    def check_columns(self, dataset, split: str) -> None:
        missing = [c for c in self.columns if c not in dataset.column_names]
        if missing:
            raise ValueError(f"{split} split: missing columns {missing} for {type(self).__name__} "
                             f"(has {dataset.column_names})")

    def encode(self, dataset) -> list[Feature]:
        raise NotImplementedError

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        raise NotImplementedError

    def loss(self, output: torch.Tensor, batch: dict) -> torch.Tensor:
        """Mean training loss of a batch (float32)."""
        return F.cross_entropy(output.float(), batch["label"])

    def predict(self, outputs: list[torch.Tensor], features: list[Feature], dataset) -> list:
        """Head outputs of every feature of ``dataset`` (trimmed to the feature's length when
        token-level) -> one prediction per example, in dataset order."""
        return [int(output.argmax()) for output in outputs]


def sequence_feature(example: int, encoding: Encoding, **fields) -> Feature:
    return {"example": example, "input_ids": encoding.ids, "token_type_ids": encoding.type_ids,
            **fields}


class SequenceClassification(TaskFormat):
    """``[CLS] text [SEP]`` or ``[CLS] text [SEP] text_pair [SEP]`` (segments 0 / 1) -> label."""

    sequence_fields = ("label",)

    def __init__(self, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set, pair: bool):
        self.pair = pair
        self.columns = ("text", "text_pair", "label") if pair else ("text", "label")
        self.tokenizer = truncating(tokenizer, p.max_seq_len)
        self.num_labels = n_labels("classification", train_set)

    def encode(self, dataset) -> list[Feature]:
        texts = list(zip(dataset["text"], dataset["text_pair"])) if self.pair else list(dataset["text"])
        encodings = self.tokenizer.encode_batch(texts)
        return [sequence_feature(i, enc, label=label)
                for i, (enc, label) in enumerate(zip(encodings, dataset["label"]))]

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return ClassificationHead(hidden, self.num_labels, dropout)


class SequenceRegression(TaskFormat):
    """``[CLS] text [SEP] text_pair [SEP]`` (segments 0 / 1) -> a float score, trained with
    squared error against the gold score (``label``)."""

    columns = ("text", "text_pair", "label")
    sequence_fields = ("label",)

    def __init__(self, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set):
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


def first_subwords(word_ids: list[int | None]) -> dict[int, int]:
    """word index -> position of its first sub-word (words cut off or lost to tokenization are absent)."""
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None and word not in first:
            first[word] = position
    return first


class Tagging(TaskFormat):
    """Pre-split words -> one tag per word. The tag is the target of the word's first sub-word;
    its other sub-words and the specials carry IGNORE_INDEX. A word with no sub-word in the
    window (cut by max_seq_len, or emptied by normalisation) is predicted as the most frequent
    training tag."""

    columns = ("tokens", "tags")
    token_fields = {"labels": IGNORE_INDEX}
    token_level_output = True

    def __init__(self, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set):
        self.tokenizer = truncating(tokenizer, p.max_seq_len)
        self.num_tags = n_labels("tagging", train_set)
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


def char_span_positions(encoding: Encoding, sequence: int, start: int, end: int) -> list[int]:
    """Positions of the sub-words of text ``sequence`` (0 or 1) overlapping characters [start, end)."""
    return [position for position, (seq, (s, e)) in enumerate(zip(encoding.sequence_ids, encoding.offsets))
            if seq == sequence and s < end and e > start]


class WordInContext(TaskFormat):
    """``[CLS] sentence1 [SEP] sentence2 [SEP]``; the target word's sub-words in each sentence
    (found from the character spans start1/end1, start2/end2 via offsets) are pooled by the
    head. A target cut off by max_seq_len pools the [CLS] vector instead."""

    columns = ("sentence1", "start1", "end1", "sentence2", "start2", "end2", "label")
    token_fields = {"span1": 0, "span2": 0}
    sequence_fields = ("label",)

    def __init__(self, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set):
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


def context_windows(n_tokens: int, window: int, overlap: int) -> list[tuple[int, int]]:
    """[a, b) sub-word ranges of width ``window`` covering 0..n_tokens, neighbours sharing
    ``overlap`` tokens (at most half a window, so windows always advance)."""
    step = window - min(overlap, window // 2)
    bounds = [(0, min(window, n_tokens))]
    while bounds[-1][1] < n_tokens:
        start = bounds[-1][0] + step
        bounds.append((start, min(start + window, n_tokens)))
    return bounds


class SpanQA(TaskFormat):
    """SQuAD-style extractive QA. Each example becomes windows ``[CLS] question [SEP] context[a:b]
    [SEP]`` of at most max_seq_len sub-words, consecutive windows overlapping by doc_stride.
    Training targets are the first answer's first and last sub-words (from its character span
    via offsets) when the window holds the whole answer, else [CLS] (position 0). At inference
    the best valid span (start <= end, at most MAX_ANSWER_TOKENS, inside the context) over all
    windows of an example is returned as the context's text between its offsets."""

    columns = ("id", "context", "question", "answers")
    sequence_fields = ("start", "end")
    token_level_output = True

    def __init__(self, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set):
        self.tokenizer = tokenizer
        self.max_seq_len, self.doc_stride = p.max_seq_len, p.doc_stride
        self.max_question = min(MAX_QUESTION_TOKENS, (p.max_seq_len - 3) // 2)
        self.cls_id, self.sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")

    @staticmethod
    def answer_tokens(context: Encoding, answers: dict) -> tuple[int, int] | None:
        """First and last context sub-word of the first answer, or None (no answer, or no
        sub-word covers it)."""
        if not answers["text"]:
            return None
        start = answers["answer_start"][0]
        inside = [t for t, (s, e) in enumerate(context.offsets)
                  if s < start + len(answers["text"][0]) and e > start]
        return (inside[0], inside[-1]) if inside else None

    def encode(self, dataset) -> list[Feature]:
        questions = self.tokenizer.encode_batch(list(dataset["question"]), add_special_tokens=False)
        contexts = self.tokenizer.encode_batch(list(dataset["context"]), add_special_tokens=False)
        features = []
        for i, (question, context, answers) in enumerate(zip(questions, contexts, dataset["answers"])):
            question_ids = question.ids[: self.max_question]
            offset = len(question_ids) + 2  # position of the window's first context sub-word
            window = self.max_seq_len - offset - 1
            answer = self.answer_tokens(context, answers)
            for a, b in context_windows(len(context.ids), window, self.doc_stride):
                start = end = 0
                if answer is not None and a <= answer[0] and answer[1] < b:
                    start, end = answer[0] - a + offset, answer[1] - a + offset
                features.append({
                    "example": i,
                    "input_ids": [self.cls_id, *question_ids, self.sep_id, *context.ids[a:b], self.sep_id],
                    "token_type_ids": [0] * offset + [1] * (b - a + 1),
                    "start": start, "end": end,
                    "context_offset": offset, "char_offsets": context.offsets[a:b],
                })
        return features

    def make_head(self, hidden: int, dropout: float) -> nn.Module:
        return SpanHead(hidden, dropout)

    def loss(self, output: torch.Tensor, batch: dict) -> torch.Tensor:
        start_logits, end_logits = output.float().unbind(-1)
        return (F.cross_entropy(start_logits, batch["start"]) + F.cross_entropy(end_logits, batch["end"])) / 2

    def predict(self, outputs, features, dataset) -> list[str]:
        contexts = list(dataset["context"])
        best: list[tuple[float, str]] = [(-math.inf, "")] * len(contexts)
        for output, feature in zip(outputs, features):
            char_offsets = feature["char_offsets"]
            if not char_offsets:
                continue
            inside = output[feature["context_offset"]: feature["context_offset"] + len(char_offsets)]
            span_score, first, last = best_span(inside[:, 0], inside[:, 1], MAX_ANSWER_TOKENS)
            example = feature["example"]
            if span_score > best[example][0]:
                text = contexts[example][char_offsets[first][0]: char_offsets[last][1]]
                best[example] = (span_score, text)
        return [text for _, text in best]


def make_task_format(kind: str, tokenizer: Tokenizer, p: FinetuneTransferParams, train_set) -> TaskFormat:
    if kind in ("classification", "pair_classification"):
        return SequenceClassification(tokenizer, p, train_set, pair=kind == "pair_classification")
    formats = {"regression": SequenceRegression, "tagging": Tagging,
               "word_in_context": WordInContext, "span_qa": SpanQA}
    if kind not in formats:
        raise ValueError(f"unknown task kind {kind!r}; expected one of {list(KINDS)}")
    return formats[kind](tokenizer, p, train_set)


__all__ = [
    "TaskFormat", "SequenceClassification", "SequenceRegression", "Tagging", "SpanQA", "WordInContext",
    "make_task_format", "ClassificationHead", "RegressionHead", "TaggingHead", "SpanHead", "WordInContextHead",
    "Feature", "context_windows", "truncating",
]
