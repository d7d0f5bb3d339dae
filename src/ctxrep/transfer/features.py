"""Per-word layer features of a frozen model, stored compactly and read lazily.

Layout of ``data/features/<model>/<task>/`` (``model`` is ``bilm`` or ``bert``)::

    meta.json                         n_layers, dim, fields, splits, word counts
    <split>.<field>.f16               (total words, n_layers, dim) float16, C order, raw bytes
    <split>.<field>.offsets.npy       (n_examples + 1,) int64: example i is rows offsets[i]:offsets[i+1]

A *field* is one text of an example: ``text``/``text_pair`` (classification, regression), ``tokens``
(tagging), ``sentence1``/``sentence2`` (word-in-context), ``question``/``context`` (span QA).
Words are the task's own words (see :func:`task_words`), so feature row j of an example is
its word j whatever model produced it: the biLM's 2L+1 layers or BERT's L+1 hidden layers
(a word's first or mean sub-word). Files are memory-mapped, never loaded whole.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctxrep import kinds
from ctxrep.errors import InputError

def task_words(example: dict, field: str) -> list[str]:
    value = example[field]
    return list(value) if isinstance(value, list) else kinds.words_with_spans(value)[0]


def examples_fingerprint(dataset, kind: str) -> str:
    """sha256 of the words of every field of every example, in order: which examples a feature
    file was extracted for (``meta.json``), checked by every reader against its own examples."""
    h = hashlib.sha256()
    for field in kinds.get(kind).FIELDS:
        for example in dataset.select_columns([field]):
            h.update(json.dumps(task_words(example, field)).encode())
            h.update(b"\n")
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class FieldFeatures:
    """Lazy view of one split's field: ``store[i]`` → (n_layers, n_words_i, dim) float16."""

    data: np.ndarray      # memmap (total words, n_layers, dim)
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.data[self.offsets[i]:self.offsets[i + 1]]).transpose(1, 0, 2)

    @property
    def n_layers(self) -> int:
        return self.data.shape[1]

    @property
    def dim(self) -> int:
        return self.data.shape[2]


class FeatureStore:
    def __init__(self, root: Path | str):
        self.root = Path(root)
        meta = self.root / "meta.json"
        if not meta.exists():
            raise FileNotFoundError(f"{meta}: missing; run the extract stage first")
        self.meta = json.loads(meta.read_text())

    @property
    def n_layers(self) -> int:
        return self.meta["n_layers"]

    @property
    def dim(self) -> int:
        return self.meta["dim"]

    def check_examples(self, splits: dict, kind: str) -> None:
        """Stop unless these features were extracted for exactly ``splits``' examples (a run
        whose subsample or data changed must not train on another run's features)."""
        for split, dataset in splits.items():
            recorded = self.meta.get("splits", {}).get(split, {}).get("fingerprint")
            actual = examples_fingerprint(dataset, kind)
            if recorded != actual:
                raise InputError(f"{self.root}: features of split '{split}' were extracted for "
                                 f"other examples (fingerprint {str(recorded)[:12]}, these "
                                 f"examples {actual[:12]}); rerun the extract stage")

    def field(self, split: str, field: str) -> FieldFeatures:
        offsets = np.load(self.root / f"{split}.{field}.offsets.npy")
        path = self.root / f"{split}.{field}.f16"
        expected = int(offsets[-1]) * self.n_layers * self.dim * 2
        if path.stat().st_size != expected:
            raise ValueError(f"{path}: {path.stat().st_size} bytes, expected {expected} "
                             f"(truncated or corrupt; rerun the extract stage)")
        data = np.memmap(path, dtype=np.float16, mode="r",
                         shape=(int(offsets[-1]), self.n_layers, self.dim))
        return FieldFeatures(data, offsets)


class FieldWriter:
    """Append examples' (n_layers, n_words, dim) features to one field file."""

    def __init__(self, root: Path, split: str, field: str):
        self.path = root / f"{split}.{field}.f16"
        self.offsets_path = root / f"{split}.{field}.offsets.npy"
        self._file = open(self.path, "wb")
        self.offsets = [0]

    def add(self, layers: np.ndarray) -> None:
        """``layers``: (n_layers, n_words, dim)."""
        rows = np.ascontiguousarray(layers.transpose(1, 0, 2), dtype=np.float16)
        self._file.write(rows.tobytes())
        self.offsets.append(self.offsets[-1] + rows.shape[0])

    def close(self) -> int:
        self._file.close()
        np.save(self.offsets_path, np.asarray(self.offsets, dtype=np.int64))
        return self.offsets[-1]
