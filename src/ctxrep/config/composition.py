"""Profiles composed into ``params.yaml`` by DVC's Hydra integration, as ``dvc exp run -S
profile=<p> -S key=value`` does, and checked before DVC touches anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ctxrep.config.fields import ParamError, from_dict
from ctxrep.config.params import (CONF_DIR, PARAMS_FILE, _section, check_profile_name,
                                  transfer_params_class)
from ctxrep.config.sections import SECTIONS

PROFILE_DIR = f"{CONF_DIR}/profile"


def defaults(path: str, **overrides):
    """Section ``path`` (``tokenize``, ``transfer.elmo``, ...) with the default profile's values
    from conf/config.yaml, then ``overrides``, validated: for tests, benchmarks and notebooks,
    which then share the pipeline's one source of values."""
    conf = Path(__file__).resolve().parents[3] / CONF_DIR / "config.yaml"
    raw = yaml.safe_load(conf.read_text(encoding="utf-8"))
    values = {**_section(raw, *path.split(".")), **overrides}
    cls = (transfer_params_class(path.split(".", 1)[1]) if path.startswith("transfer.")
           else SECTIONS[path])
    return from_dict(cls, values, path)


def check_profile(name: Any, root: Path | str = ".") -> str:
    """A profile name that is a plain word (:func:`~ctxrep.config.params.check_profile_name`)
    and names a file in conf/profile/."""
    check_profile_name(name)
    available = profiles(root)
    if name not in available:
        raise ParamError("profile", name, f"one of {available} (files in {PROFILE_DIR}/)")
    return name


def profiles(root: Path | str = ".") -> list[str]:
    return sorted(p.stem for p in (Path(root) / PROFILE_DIR).glob("*.yaml"))


def compose(profile: str, overrides: list[str] = (), root: Path | str = ".",
            out: Path | str | None = None) -> dict:
    """Write params.yaml (or ``out``) from conf/ exactly as ``dvc exp run -S profile=<p>
    -S <override>...`` does (DVC's own Hydra composition), and return it. A value resolved per
    machine (``compute.isa: auto``) is written resolved, as ``make repro`` passes it to DVC
    (:func:`resolved_overrides`)."""
    root = Path(root).resolve()
    check_profile(profile, root)
    out = Path(out) if out is not None else root / PARAMS_FILE
    compose_and_dump_only(profile, list(overrides), root, out)
    composed = yaml.safe_load(out.read_text())
    resolved = resolved_overrides(composed)
    if resolved:  # params.yaml holds the effective value, as `make repro` passes it to DVC
        compose_and_dump_only(profile, [*overrides, *resolved], root, out)
        composed = yaml.safe_load(out.read_text())
    return composed


def resolved_overrides(composed: dict) -> list[str]:
    """The overrides that turn a request resolved per machine into its effective value:
    ``compute.isa=auto`` into ``avx2`` or ``native`` (:func:`ctxrep.compute.resolve`)."""
    from ctxrep import compute

    isa = (composed.get("compute") or {}).get("isa") if isinstance(composed, dict) else None
    return [f"compute.isa={compute.resolve(isa)}"] if isa == compute.AUTO else []


def effective_overrides(profile: str, overrides: list[str], root: Path | str = ".") -> list[str]:
    """``overrides`` and the ones :func:`resolved_overrides` adds to the params they compose
    to: what ``make repro`` passes to ``dvc exp run -S`` so that DVC writes and records the
    effective values."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / PARAMS_FILE
        compose_and_dump_only(profile, overrides, Path(root).resolve(), out)
        return [*overrides, *resolved_overrides(yaml.safe_load(out.read_text()))]


def compose_and_dump_only(profile: str, overrides: list[str], root: Path, out: Path) -> None:
    """DVC's Hydra composition alone (no value resolved)."""
    from dvc.utils.hydra import compose_and_dump

    compose_and_dump(out, str(root / CONF_DIR), None, "config", str(root),
                     [f"profile={profile}", *overrides])
