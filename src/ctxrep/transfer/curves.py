"""A transfer cell's per-epoch training curves as DVC plot files.

``metrics/curves/<task>/<method>/seed<N>.tsv``, one file per seed, one row per epoch trained:
``epoch``, the mean training loss of the epoch and ``dev``, the task's primary metric on the dev
split after that epoch (the score model selection keeps the best epoch by). dvc.yaml declares
the folder as a plot (x: epoch, y: dev), so ``dvc plots diff <exp-a> <exp-b>`` overlays a seed's
dev curve from two runs. The same numbers are in the cell record's ``curves``
(``metrics/transfer/<task>/<method>.json``), which the report plots.
"""

from __future__ import annotations

from pathlib import Path

from ctxrep.io import atomic_dir
from ctxrep.transfer.record import CellRecord

CURVES = Path("metrics/curves")


def curves_dir(task: str, method: str) -> Path:
    return CURVES / task / method


def write_seed_curves(task: str, method: str, record: CellRecord) -> Path:
    """Write one TSV per seed of ``record`` into the cell's curves folder, replaced whole; a
    cell with no curves (task unavailable) leaves the folder empty. Returns the folder."""
    folder = curves_dir(task, method)
    curves = record.curves
    if curves and len(curves) != len(record.seeds):
        raise ValueError(f"{task}/{method}: {len(curves)} curves for seeds {record.seeds}")
    with atomic_dir(folder) as tmp:
        for seed, curve in zip(record.seeds, curves):
            losses, dev = curve["train_loss"], curve["dev"]
            if len(losses) != len(dev):
                raise ValueError(f"{task}/{method} seed {seed}: {len(losses)} epochs of training "
                                 f"loss but {len(dev)} dev scores")
            rows = [f"{epoch}\t{loss:.6f}\t{score:.6f}\n"
                    for epoch, (loss, score) in enumerate(zip(losses, dev), start=1)]
            (tmp / f"seed{seed}.tsv").write_text("epoch\ttrain_loss\tdev\n" + "".join(rows))
    return folder
