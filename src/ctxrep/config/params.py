"""Reading ``params.yaml``: its top level and every section checked before any work
(:func:`read_params`), one section at a time for a stage (:func:`load_section`,
:func:`load_transfer`), and the keys a stage reads traced for the dependency tests."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml

from ctxrep.config.fields import ParamError, from_dict
from ctxrep.config.methods import (FEATURE_METHODS, FEATURES_OF, FINETUNE_METHODS, HF_FINETUNE_SECTION,
                                   HF_NAME, HF_RESERVED, HF_TRANSFER_SECTION, LEFT_TO_RIGHT, METHODS,
                                   hf_finetune_method, hf_method, is_feature_method,
                                   left_to_right_family, transfer_section)
from ctxrep.config.sections import (SECTIONS, FeatureTransferParams, FinetuneTrainingParams,
                                    FinetuneTransferParams, HFEncoderParams, TransferCommon)

PARAMS_FILE = "params.yaml"
CONF_DIR = "conf"
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# Set by the dependency tests: each stage writes the params keys it read to <dir>/<stage>.json.
TRACE_ENV = "CTXREP_PARAMS_TRACE"


def transfer_params_class(section: str) -> type:
    """The dataclass of ``transfer.<section>``."""
    if section == "common":
        return TransferCommon
    if section == HF_FINETUNE_SECTION:
        return FinetuneTrainingParams
    return FeatureTransferParams if is_feature_method(section) else FinetuneTransferParams


def load_transfer(method: str, params: dict):
    """(common, method params) for one transfer cell, validated. A Hugging Face checkpoint's
    methods ``hf-<name>`` and ``hf-<name>-finetune`` read ``transfer.hf-feature`` and
    ``transfer.hf-finetune``, shared by every checkpoint of ``hf``."""
    section = transfer_section(method)
    if section not in METHODS and section not in (HF_TRANSFER_SECTION, HF_FINETUNE_SECTION):
        raise ParamError("method", method, f"one of {list(METHODS)}, or hf-<a name of params "
                                           f"hf>, or hf-<a name of params hf>-finetune")
    return load_transfer_common(params), from_dict(
        transfer_params_class(section), _section(params, "transfer", section),
        f"transfer.{section}")


def load_hf(params: dict, name: str) -> HFEncoderParams:
    """``hf.<name>``: the Hugging Face checkpoint of method ``hf-<name>``, validated."""
    checkpoints = params["hf"]
    if name not in checkpoints:
        raise ParamError("hf", name, f"a checkpoint named in params hf ({sorted(checkpoints)})")
    return from_dict(HFEncoderParams, checkpoints[name], f"hf.{name}")


def load_transfer_common(params: dict) -> TransferCommon:
    """``transfer.common``: also what extract and probe featurize (the same examples)."""
    return from_dict(TransferCommon, _section(params, "transfer", "common"), "transfer.common")


# Every top-level key of params.yaml; anything else (a typo, `-S +foo=1`) is an error.
TOP_LEVEL = ("profile", "tasks", "grid", "left_to_right", "hf", *SECTIONS, "transfer")


# The grid: tasks × methods. The methods are listed by approach (BERT §5.3), each approach's
# cells a DVC stage of its own (transfer, finetune), so neither depends on the other's code.
GRID_KEYS = ("tasks", "feature_based", "fine_tuned")


def grid_methods(grid: dict, left_to_right: list[str] = (), hf: dict | None = None) -> list[str]:
    """Every method of the grid, feature-based first, then those of the left-to-right LM
    families the profile lists (params ``left_to_right``) and of its Hugging Face checkpoints
    (params ``hf``: frozen, then fine-tuned), as the report lists them."""
    checkpoints = hf or {}
    return [*grid["feature_based"], *grid["fine_tuned"],
            *(m for family in left_to_right for m in LEFT_TO_RIGHT[family]),
            *map(hf_method, checkpoints), *map(hf_finetune_method, checkpoints)]


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
    for key in sorted(set(raw["grid"] or {}) - set(GRID_KEYS)):
        raise ParamError(f"grid.{key}", raw["grid"][key],
                         "a key of the grid: tasks, feature_based (methods on frozen features: "
                         "static, elmo, ...), fine_tuned (bert-finetune, bert-scratch)")
    for key in ("tasks", "left_to_right", *(f"grid.{k}" for k in GRID_KEYS)):
        value = raw[key] if "." not in key else (raw["grid"] or {}).get(key.split(".")[1])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ParamError(key, value, "a list of names")
    if not isinstance(raw["hf"], dict):
        raise ParamError("hf", raw["hf"], "a mapping of names to checkpoints ({} for none)")
    validate(raw)
    return _traced(raw)


def validate(raw: dict) -> None:
    """Every section of a params mapping, so a bad value anywhere stops the first stage (and
    ``make repro``, before DVC touches an output), not the stage that happens to read it."""
    for family in raw["left_to_right"]:
        if family not in LEFT_TO_RIGHT:
            raise ParamError("left_to_right", family,
                             f"left-to-right LM families: {list(LEFT_TO_RIGHT)}")
    if len(set(raw["left_to_right"])) != len(raw["left_to_right"]):
        raise ParamError("left_to_right", raw["left_to_right"], "each family listed once")
    for name, entry in (raw.get("hf") or {}).items():
        if not isinstance(name, str) or not HF_NAME.fullmatch(name) or name in HF_RESERVED:
            raise ParamError("hf", name, f"a checkpoint name matching {HF_NAME.pattern}, not "
                                         f"{' or '.join(HF_RESERVED)} (its methods are "
                                         f"hf-<name> and hf-<name>-finetune)")
        from_dict(HFEncoderParams, entry, f"hf.{name}")
    for key, allowed in (("feature_based", FEATURE_METHODS), ("fine_tuned", FINETUNE_METHODS)):
        for method in raw["grid"][key]:
            family = left_to_right_family(method)
            if family is not None:  # its cells are the *_ltr stages, which read its features
                raise ParamError(f"grid.{key}", method,
                                 f"a method of the grid's own stages; {method} runs on every "
                                 f"grid task when left_to_right lists {family!r}")
            if method in allowed:
                continue
            other = "fine_tuned" if key == "feature_based" else "feature_based"
            raise ParamError(f"grid.{key}", method, (
                f"{key.replace('_', '-')} methods: {list(allowed)}" + (
                    f"; {method} belongs in grid.{other}" if method in METHODS else "")))
    if len(set(grid_methods(raw["grid"]))) != len(grid_methods(raw["grid"])):
        raise ParamError("grid", raw["grid"], "each method listed once")
    for key in ("grid", "learning_curve"):
        for task in (raw.get(key) or {}).get("tasks", []):
            if task not in raw["tasks"]:
                raise ParamError(f"{key}.tasks", task,
                                 f"tasks that are fetched (tasks: {raw['tasks']}; a profile "
                                 f"may set its own list in conf/profile/{raw['profile']}.yaml)")
    intrinsic_task = (raw.get("intrinsic") or {}).get("task")
    if intrinsic_task not in raw["tasks"]:
        raise ParamError("intrinsic.task", intrinsic_task,
                         f"a task that is fetched (tasks: {raw['tasks']})")
    # extract featurizes grid.tasks only: a feature-based learning curve elsewhere would stop
    # late, at its first cell, on a missing features folder.
    curve = raw.get("learning_curve") or {}
    for method in curve.get("methods", []):
        if left_to_right_family(method) is not None:
            raise ParamError("learning_curve.methods", method,
                             "methods of the grid's own stages (learning_curve reads the "
                             "biLM's and BERT's features)")
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


def check_profile_name(name: Any) -> str:
    """A profile name is a plain word: it reaches a shell and a file path."""
    if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
        raise ParamError("profile", name, f"a name matching {PROFILE_NAME.pattern}")
    return name


# --------------------------------------------------------------------------------------------
# tracing which keys a stage reads (the dependency tests compare it with dvc.yaml)


_SEEN: set[str] = set()


class _Traced(dict):
    """A params mapping that notes the dotted path of every key read. Reading a whole mapping
    (iterating it, as :func:`from_dict` does, or asking its size or whether it is empty) notes
    the mapping's own path."""

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

    def __len__(self):  # truthiness too: whether a mapping is empty is a read of it
        self._note(self._path)
        return super().__len__()

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
