"""``metrics/summary.json``: the headline number of every transfer cell, for ``dvc metrics diff``.

    {task: {method: {"metric": primary key, "mean": x, "std": y, "n_seeds": k}}}

Numbers are in the metric's own units (accuracy and F1 in [0, 1]; SQuAD F1 in [0, 100]) and
rounded to 4 decimals; keys are written sorted, so the file changes exactly when a number does.
"""

from __future__ import annotations

from ctxrep.report.inputs import TransferResult

DECIMALS = 4


def summarise(transfer: dict[str, dict[str, TransferResult]]) -> dict:
    return {task: {method: {"metric": cell.primary, "mean": round(cell.mean, DECIMALS),
                            "std": round(cell.std, DECIMALS), "n_seeds": cell.n_seeds}
                   for method, cell in sorted(cells.items())}
            for task, cells in sorted(transfer.items())}


def headline(summary: dict) -> dict:
    """``metrics/headline.json``, the DVC metric: {task: {method: mean}}, so ``dvc exp show``
    gets one column per grid cell (std, seeds and CIs stay in summary.json)."""
    return {task: {method: cell["mean"] for method, cell in cells.items()}
            for task, cells in summary.items()}


def flat_numbers(summary: dict) -> dict[str, float]:
    """``<task>.<method>.mean`` / ``.std`` for MLflow."""
    return {f"{task}.{method}.{stat}": cell[stat]
            for task, cells in summary.items() for method, cell in cells.items()
            for stat in ("mean", "std")}
