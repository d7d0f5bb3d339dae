"""Span QA: the answer to a question is a span of the context (SQuAD).

- fields: ``question``, ``context``; target: the first answer's span (``answers``);
  prediction: the answer text
- feature-based head :class:`SpanPointer`: start / end pointers over the context's words, the
  best span of at most MAX_ANSWER_WORDS words
- fine-tuning :class:`SpanQAFormat`: windows ``[CLS] question [SEP] context[a:b] [SEP]`` →
  :class:`SpanHead`, the best span of at most MAX_ANSWER_TOKENS sub-words over the windows
- baselines: ``window``; never degenerate; no probe
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tokenizers import Encoding
from torch import nn

from ctxrep.analysis.baselines import overlap_window
from ctxrep.kinds.interface import Feature, TaskFormat, WordTask, sequence_ends
from ctxrep.kinds.shared import best_span, word_at, words_with_spans
from ctxrep.models.bert import BertOutput
from ctxrep.models.feature_models import FeatureEncoder, pool

NAME = "span_qa"
FIELDS = ("question", "context")
MAX_ANSWER_WORDS = 30  # longest answer span considered by the feature-based head, in words
MAX_ANSWER_TOKENS = 30  # longest answer span considered at inference, in sub-words (as in BERT)
MAX_QUESTION_TOKENS = 64  # questions are cut to this many sub-words (BERT's max_query_length)
MASKED_LOGIT = -1e4  # span logit at padding: exp() underflows to 0, and it is finite in bf16


def n_labels(dataset) -> int:
    """0: a span, not a label."""
    return 0


def references(dataset) -> list:
    """The gold answer texts, a list per question."""
    return [list(answers["text"]) for answers in dataset["answers"]]


def readable(dataset, predictions: list) -> list:
    """Answer texts, as predicted."""
    return list(predictions)


def metric_inputs(dataset, predictions: list) -> tuple[list, list]:
    """SQuAD's form: ``{id, prediction_text}`` and ``{id, answers}``."""
    preds = [{"id": ex_id, "prediction_text": text}
             for ex_id, text in zip(dataset["id"], predictions)]
    refs = [{"id": ex_id, "answers": answers}
            for ex_id, answers in zip(dataset["id"], dataset["answers"])]
    return preds, refs


def is_degenerate(predictions: list, references: list | None = None) -> bool:
    """Never: answers are texts of each context, not labels from one set."""
    return False


def baselines(train_set, eval_set) -> dict[str, list]:
    return {"window": [overlap_window(q, c)
                       for q, c in zip(eval_set["question"], eval_set["context"])]}


def answer_words(context: str, answers: dict) -> tuple[int, int, list[tuple[int, int]]]:
    """The first answer of a span QA example as (first word, last word) of ``context``, and
    the context's word spans."""
    spans = words_with_spans(context)[1]
    start = answers["answer_start"][0]
    end = start + len(answers["text"][0]) - 1
    return word_at(spans, start), word_at(spans, end), spans


# ----------------------------------------------------------------------------------------------
# the feature-based path


class SpanPointer(nn.Module):
    """Start/end pointers over the context's encoder states, conditioned on the pooled question:
    logits_i = w · [c_i; c_i * q] for start and end separately."""

    def __init__(self, encoder: FeatureEncoder):
        super().__init__()
        d = encoder.out_dim
        self.encoder = encoder
        self.question = nn.Linear(2 * d, d)
        self.start, self.end = nn.Linear(2 * d, 1), nn.Linear(2 * d, 1)

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.question(pool(self.encoder(batch["layers"], batch["mask"]), batch["mask"]))
        c = self.encoder(batch["layers2"], batch["mask2"])
        x = torch.cat([c, c * q[:, None]], dim=-1)
        neg = torch.finfo(x.dtype).min
        start = self.start(x).squeeze(-1).masked_fill(~batch["mask2"], neg)
        end = self.end(x).squeeze(-1).masked_fill(~batch["mask2"], neg)
        return start, end


class SpanQATask(WordTask):
    """Start / end pointers over the context's words; loss = the sum of both cross-entropies;
    prediction = the best span of at most MAX_ANSWER_WORDS words."""

    def make_head(self, encoder, n_labels, p):
        return SpanPointer(encoder)

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


word_task = SpanQATask


# ----------------------------------------------------------------------------------------------
# fine-tuning


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


def context_windows(n_tokens: int, window: int, overlap: int) -> list[tuple[int, int]]:
    """[a, b) sub-word ranges of width ``window`` covering 0..n_tokens, neighbours sharing
    ``overlap`` tokens (at most half a window, so windows always advance)."""
    step = window - min(overlap, window // 2)
    bounds = [(0, min(window, n_tokens))]
    while bounds[-1][1] < n_tokens:
        start = bounds[-1][0] + step
        bounds.append((start, min(start + window, n_tokens)))
    return bounds


class SpanQAFormat(TaskFormat):
    """SQuAD-style extractive QA. Each example becomes windows ``[CLS] question [SEP] context[a:b]
    [SEP]`` of at most max_seq_len sub-words, consecutive windows overlapping by doc_stride.
    Training targets are the first answer's first and last sub-words (from its character span
    via offsets) when the window holds the whole answer, else [CLS] (position 0). At inference
    the best valid span (start <= end, at most MAX_ANSWER_TOKENS, inside the context) over all
    windows of an example is returned as the context's text between its offsets."""

    columns = ("id", "context", "question", "answers")
    sequence_fields = ("start", "end")
    token_level_output = True

    def __init__(self, tokenizer, p, train_set):
        self.tokenizer = tokenizer
        self.max_seq_len, self.doc_stride = p.max_seq_len, p.doc_stride
        self.max_question = min(MAX_QUESTION_TOKENS, (p.max_seq_len - 3) // 2)
        self.cls_id, self.sep_id = sequence_ends(tokenizer)  # [CLS] and [SEP], or the network's own

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


task_format = SpanQAFormat

PROBE_CAP = None
probe_items = None
