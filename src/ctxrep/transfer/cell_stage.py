"""The body of a transfer cell's stage: the stage side of :mod:`ctxrep.transfer.cell`, so the
cell itself (which ``learning_curve`` and the tests run too) knows nothing of DVC stages or
MLflow runs."""

from __future__ import annotations

from pathlib import Path

from ctxrep import config
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.training.curves import fresh_folder
from ctxrep.transfer.cell import run_cell
from ctxrep.transfer.predictions import predictions_dir, write_predictions


def cell_stage(task: str, method: str, approach_of) -> None:
    """The body of a cell's stage (``transfer@<task>-<method>``, ``finetune@<task>-<method>``,
    or a left-to-right LM's ``*_ltr`` cell: :func:`ctxrep.config.cell_stage_name`): run the cell
    with the approach ``approach_of(method, section, params)`` builds (``section``: the method's
    validated ``transfer.<method>``; ``params``: all of them), and write its record
    (metrics/transfer/<task>/<method>.json), each seed's predictions, and its DVCLive curves
    (dvclive/transfer/<task>/<method>/seed<N>/)."""
    with stage(config.cell_stage_name(task, method), None) as ctx:
        common, p = config.load_transfer(method, ctx.params)
        approach = approach_of(method, p, ctx.params)
        ctx.log_params({"task": task, "method": method, "transfer": {
            "common": config.as_dict(common), method: config.as_dict(p)}})
        live = fresh_folder(Path("dvclive/transfer") / task / method)
        cell = run_cell(task, approach, common, ctx.run, live_root=live)
        write_predictions(predictions_dir(task, method), cell.predictions)
        record = cell.record
        write_json(Path("metrics/transfer") / task / f"{method}.json", record.to_json())
        cost = cell.cost
        ctx.compute(amount=cost.amount, unit=cost.unit, params=cost.params, flops=cost.flops)
        if record.unavailable is not None:
            ctx.summary(unavailable=record.unavailable)
        else:
            ctx.summary(**{record.primary: f"{record.mean:.4f} ± {record.std:.4f}"})
