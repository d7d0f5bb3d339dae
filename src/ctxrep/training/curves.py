"""Training curves: every logged point of a training run goes to DVCLive and to MLflow, once.

A run's DVCLive folder (a stage output, e.g. ``dvclive/pretrain_bilm/``) holds one TSV per
metric, written as training goes, in the layout `dvc plots`, `dvc exp show` and DVC's VS Code
extension read::

    plots/metrics/train/loss.tsv    step  loss   mean training loss since the previous point
    plots/metrics/train/lr.tsv      step  lr     learning rate after that step
    plots/metrics/val/<name>.tsv    step  <name> each held-out evaluation (``val_<name>``)
    metrics.json                    the latest value of each, and the step

Only values that are a pure function of params, data and code go there (no wall-clock times,
no DVCLive timestamps), so the folder is byte-identical run to run on CPU and DVC's cache and
``dvc.lock`` stay stable. The same points reach the stage's MLflow run under MLflow's names
(``train_loss``, ``lr``, ``val_<name>``) together with what may differ run to run (throughput,
seconds, gradient norms): those go to MLflow only.

A resumed run starts a fresh folder and replays the history its checkpoint carries before
training on (:meth:`Curves.replay`), so an interrupted run ends with the same folder as an
uninterrupted one. The folder is written in place while training runs: a killed stage leaves
it partial, and DVC (which removes a stage's outputs before running it) never records that.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

TRAIN, VAL = "train", "val"


def live_name(key: str) -> str:
    """DVCLive's name of a held-out metric: ``val_ppl`` and ``ppl`` are both ``val/ppl``."""
    return f"{VAL}/{key.removeprefix('val_')}"


def mlflow_name(name: str) -> str:
    """MLflow's name of a curve: ``train/loss`` -> ``train_loss``; ``train/lr`` -> ``lr``."""
    return "lr" if name == f"{TRAIN}/lr" else name.replace("/", "_")


class Curves:
    """One training run's curves: ``directory`` (a DVCLive folder; ``None``: MLflow only) and
    ``run`` (a :class:`ctxrep.tracking.StageRun`; ``None``: DVCLive only)."""

    def __init__(self, directory: Path | str | None, run=None):
        self.run = run
        self.live = None
        if directory is not None:
            from dvclive import Live

            # DVCLive's own INFO lines ("Logging to experiment ...") once per seed are noise.
            logging.getLogger("dvclive").setLevel(logging.WARNING)
            shutil.rmtree(directory, ignore_errors=True)  # a fresh folder, whatever was there
            # The pipeline's dvc.yaml declares the folder and its plots, and `dvc exp run`
            # makes the experiment: DVCLive writes neither a dvc.yaml nor an experiment.
            self.live = Live(str(directory), resume=False, report=None, save_dvc_exp=False,
                             dvcyaml=None, monitor_system=False)

    def log(self, step: int, curves: dict[str, float], extra: dict[str, float] | None = None):
        """``curves`` (DVCLive names, e.g. ``train/loss``) at ``step`` to both places;
        ``extra`` (MLflow names: values that differ run to run) to MLflow only."""
        if self.live is not None and curves:
            self.live.step = int(step)
            for name, value in curves.items():
                self.live.log_metric(name, float(value))
            self.live.make_summary()
        if self.run is not None:
            self.run.log_metrics({**{mlflow_name(k): float(v) for k, v in curves.items()},
                                  **(extra or {})}, step=int(step))

    def replay(self, rows: list, evals: list, log_every: int, last_step: int) -> int:
        """Log again the points of a checkpointed history (``rows``: ``[step, loss, lr]`` per
        step; ``evals``: ``[step, metrics]``), exactly as they were logged live. Returns the
        row the next training point's window starts at."""
        begin = 0
        for i, row in enumerate(rows):
            if is_point(int(row[0]), log_every, last_step):
                self.log(int(row[0]), train_point(rows, begin, i + 1))
                begin = i + 1
        for step, metrics in evals:
            self.log(int(step), val_point(metrics))
        return begin

    def close(self) -> None:
        if self.live is not None:
            self.live.end()
            self.live = None


def fresh_folder(path: Path | str) -> Path:
    """``path`` emptied (or made): the root of a stage's DVCLive folders, one per training run
    inside it. A stage that trains nothing (its task unavailable) leaves it empty."""
    path = Path(path)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def is_point(step: int, log_every: int, last_step: int) -> bool:
    """Whether the training curve gets a point after ``step`` (1-based): after step 1, every
    ``log_every`` steps from there, and after the last."""
    return (step - 1) % log_every == 0 or step == last_step


def train_point(rows: list, begin: int, end: int) -> dict[str, float]:
    """The point of ``rows[begin:end]`` (``[step, loss, lr]`` per optimizer step): their mean
    loss, and the learning rate after the last of them."""
    window = [float(r[1]) for r in rows[begin:end]]
    return {f"{TRAIN}/loss": sum(window) / len(window), f"{TRAIN}/lr": float(rows[end - 1][2])}


def val_point(metrics: dict) -> dict[str, float]:
    """An evaluation's numbers under their DVCLive names (``val/<name>``)."""
    return {live_name(k): float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}
