"""The tasks: one module per task, named as the task, each defining

    SHA256 = {...}          # the pinned sha256 of its mirror files (``ctxrep pin <task>``)
    SPEC = DatasetSpec(...)  # what it is, how to read it, where it can come from

and any reader only it uses. A task's module is imported only when that task is asked for,
so each per-task DVC stage depends on its own module (``src/ctxrep/data/tasks/${item}.py``)
and adding a task reruns none of the others (README, "Adding a task").
"""

from __future__ import annotations

import importlib
from pathlib import Path

HERE = Path(__file__).parent


def names() -> list[str]:
    """Every task of the registry, from the module names (nothing imported)."""
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def get(name: str):
    """The :class:`~ctxrep.data.registry.DatasetSpec` of task ``name``."""
    from ctxrep.config import ParamError

    module = f"{__name__}.{name}"
    try:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ModuleNotFoundError(name=module)
        spec = importlib.import_module(module).SPEC
    except ModuleNotFoundError as e:
        if e.name != module:  # the task's module exists and imports something missing
            raise
        raise ParamError("tasks", name, f"a task of the registry: {names()}") from None
    if spec.name != name:
        raise ValueError(f"{HERE / name}.py: SPEC.name is {spec.name!r}, not the module's name")
    return spec


def every() -> dict:
    """name → spec of every task (imports them all: for tools and tests, not for stages)."""
    return {name: get(name) for name in names()}


def dataset(name: str):
    """A task or a pretraining corpus by name (for commands that take either)."""
    from ctxrep.data import registry

    return registry.CORPORA[name] if name in registry.CORPORA else get(name)
