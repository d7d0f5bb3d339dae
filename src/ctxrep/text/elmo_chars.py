"""ELMo character ids: how a word becomes the fixed-length id sequence the char-CNN reads.

The scheme is the one of bilm-tf / AllenNLP's ``ELMoCharacterMapper``:

* every word is ``MAX_WORD_LENGTH`` (50) ids long;
* an ordinary word is its UTF-8 bytes (0..255), truncated to 48 bytes, wrapped in
  beginning-of-word (258) and end-of-word (259) and right-padded with the padding char (260);
* the sentence markers ``<S>`` and ``</S>`` are one-"byte" words made of the reserved
  beginning-of-sentence (256) and end-of-sentence (257) chars, wrapped the same way;
* finally 1 is added to every id, so that id 0 is free to mean "no word here" (the padding of
  whole missing words in a batch). The char embedding therefore has 262 rows, row 0 unused.

Example: ``"a"`` -> ``[259, 98, 260, 261, 261, ..., 261]``.

Truncation is on bytes, as in the original, so it may cut a multi-byte character in half; the
model only ever sees the bytes, so this is harmless and keeps ids identical to the original.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

# Raw ids before the +1 shift (bytes use 0..255).
MAX_WORD_LENGTH = 50
BEGINNING_OF_SENTENCE_CHAR = 256
END_OF_SENTENCE_CHAR = 257
BEGINNING_OF_WORD_CHAR = 258
END_OF_WORD_CHAR = 259
PADDING_CHAR = 260
ID_OFFSET = 1  # added to every id; id 0 marks a missing word
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
N_CHAR_IDS = PADDING_CHAR + 1 + ID_OFFSET  # 262 rows in the char embedding


@dataclass(frozen=True)
class CharIdSpec:
    """The char-id scheme as data, written as ``char_spec.json`` beside a model.

    A model is only meaningful with the scheme it was trained with; loading checks the file
    against the keys below, so a model trained with another scheme fails loudly.
    """

    max_word_length: int = MAX_WORD_LENGTH
    beginning_of_sentence_char: int = BEGINNING_OF_SENTENCE_CHAR
    end_of_sentence_char: int = END_OF_SENTENCE_CHAR
    beginning_of_word_char: int = BEGINNING_OF_WORD_CHAR
    end_of_word_char: int = END_OF_WORD_CHAR
    padding_char: int = PADDING_CHAR
    id_offset: int = ID_OFFSET
    bos_token: str = BOS_TOKEN
    eos_token: str = EOS_TOKEN

    def __post_init__(self) -> None:
        if self.max_word_length < 3:
            raise ValueError(f"max_word_length must be >= 3 (BOW, a byte, EOW), got {self.max_word_length}")
        specials = {
            "beginning_of_sentence_char": self.beginning_of_sentence_char,
            "end_of_sentence_char": self.end_of_sentence_char,
            "beginning_of_word_char": self.beginning_of_word_char,
            "end_of_word_char": self.end_of_word_char,
            "padding_char": self.padding_char,
        }
        for key, value in specials.items():
            if not 256 <= value:
                raise ValueError(f"{key} must be >= 256 so it cannot collide with a byte, got {value}")
        if len(set(specials.values())) != len(specials):
            raise ValueError(f"special chars must be distinct, got {specials}")
        if self.id_offset < 1:
            raise ValueError(f"id_offset must be >= 1 so that id 0 stays free for padding, got {self.id_offset}")

    @property
    def n_char_ids(self) -> int:
        """Rows the char embedding needs (largest id + 1)."""
        return max(self.beginning_of_sentence_char, self.end_of_sentence_char, self.beginning_of_word_char,
                   self.end_of_word_char, self.padding_char) + self.id_offset + 1

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> CharIdSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                raise ValueError(f"char spec: unknown key {key!r} (expected some of {sorted(known)})")
        return cls(**data)


ELMO_CHAR_SPEC = CharIdSpec()


@functools.lru_cache(maxsize=1 << 18)
def _char_ids(word: str, spec: CharIdSpec) -> tuple[int, ...]:
    if word == spec.bos_token:
        body = [spec.beginning_of_sentence_char]
    elif word == spec.eos_token:
        body = [spec.end_of_sentence_char]
    else:
        body = list(word.encode("utf-8", "ignore")[: spec.max_word_length - 2])
    ids = [spec.beginning_of_word_char, *body, spec.end_of_word_char]
    ids += [spec.padding_char] * (spec.max_word_length - len(ids))
    return tuple(i + spec.id_offset for i in ids)


def word_to_char_ids(word: str, spec: CharIdSpec = ELMO_CHAR_SPEC) -> list[int]:
    """The ``spec.max_word_length`` char ids of one word (already shifted by ``id_offset``)."""
    return list(_char_ids(word, spec))


def batch_to_char_ids(
    sentences: Sequence[Sequence[str]], add_bos_eos: bool, spec: CharIdSpec = ELMO_CHAR_SPEC
) -> torch.LongTensor:
    """Char ids of a batch of tokenised sentences, shape (B, T, max_word_length).

    T is the longest sentence (+2 with ``add_bos_eos``, which wraps each one in ``<S>`` ... ``</S>``).
    Missing words of shorter sentences are all-zero rows, so ``char_ids[..., 0] != 0`` is the mask.
    """
    extra = 2 if add_bos_eos else 0
    max_len = max((len(s) for s in sentences), default=0) + extra
    out = np.zeros((len(sentences), max_len, spec.max_word_length), dtype=np.int64)
    for b, sentence in enumerate(sentences):
        words = [spec.bos_token, *sentence, spec.eos_token] if add_bos_eos else sentence
        if words:
            out[b, : len(words)] = [_char_ids(w, spec) for w in words]
    return torch.from_numpy(out)


def char_ids_mask(char_ids: torch.Tensor) -> torch.BoolTensor:
    """(B, T) mask of the positions that hold a word (every real word starts with a nonzero id)."""
    return char_ids[..., 0] != 0
