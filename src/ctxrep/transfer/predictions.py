"""Saved predictions: ``data/predictions/<task>/<method>/seed<N>.json`` for a transfer cell,
``data/predictions/<task>/baselines/<name>.json`` for a task's baselines.

Each file holds one run's predictions on the evaluation split beside the references, in the
form :func:`ctxrep.transfer.scoring.readable` gives (label ids, tag names, answer texts), so any
metric, and the report's bootstrap CIs, are computed from them without retraining.
"""

from __future__ import annotations

from pathlib import Path

from ctxrep.io import atomic_dir, write_json

PREDICTIONS = Path("data/predictions")


def predictions_dir(task: str, method: str) -> Path:
    return PREDICTIONS / task / method


def write_predictions(task: str, method: str, files: dict[str, dict]) -> None:
    """Replace ``predictions_dir(task, method)`` whole with ``files`` (name → JSON object); a
    task that could not be served gets ``unavailable.json``, so the DVC output always exists."""
    with atomic_dir(predictions_dir(task, method)) as tmp:
        for name, obj in files.items():
            write_json(tmp / name, obj, indent=None)
