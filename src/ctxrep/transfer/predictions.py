"""Saved predictions: ``data/predictions/<task>/<method>/seed<N>.json`` for a transfer cell,
``data/predictions/<task>/baselines/<name>.json`` for a task's baselines, and
``data/learning_curves/<task>/<method>/fraction<f>/seed<N>.json`` for a learning-curve point.

Each file holds one run's predictions on the evaluation split beside the references, in the
form the task kind's ``readable`` gives (:mod:`ctxrep.kinds`: label ids, tag names, answer
texts), so any metric, and the report's bootstrap CIs, are computed from them without
retraining.
"""

from __future__ import annotations

from pathlib import Path

from ctxrep.io import atomic_dir, write_json

PREDICTIONS = Path("data/predictions")


LEARNING_CURVES = Path("data/learning_curves")


def predictions_dir(task: str, method: str) -> Path:
    return PREDICTIONS / task / method


def curve_dir(task: str, method: str) -> Path:
    return LEARNING_CURVES / task / method


def write_predictions(folder: Path, files: dict[str, dict]) -> None:
    """Replace ``folder`` whole with ``files`` (relative name → JSON object); a task that
    could not be served gets ``unavailable.json``, so the DVC output always exists."""
    with atomic_dir(folder) as tmp:
        for name, obj in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            write_json(tmp / name, obj, indent=None)
