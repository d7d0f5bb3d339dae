"""Typed parameter fields and their check: a dataclass field carries a type, a range and a
meaning but no value (:func:`param`); :func:`from_dict` builds a section from a mapping, checking
every key (unknown, missing, wrong type, out of range) and then the section's own ``check``, and
raises :class:`ParamError` naming ``section.key``, the value and what is allowed."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from ctxrep.errors import InputError


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


def check_seed_count(key: str, seeds: list) -> None:
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
