"""Stage transfer@<task>-<method>: train and evaluate one grid cell over every seed.

Writes metrics/transfer/<task>/<method>.json (mean ± std over seeds of each metric, and the
learned scalar-mix weights of feature-based methods; see ctxrep.transfer.cell) and each seed's
per-epoch curve, a DVC plot (metrics/curves/<task>/<method>/; see ctxrep.transfer.curves).
"""

import sys
from pathlib import Path

from ctxrep import config
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.transfer.cell import run_cell
from ctxrep.transfer.curves import write_seed_curves
from ctxrep.transfer.predictions import predictions_dir, write_predictions

task, method = sys.argv[1], sys.argv[2]
with stage(f"transfer@{task}-{method}", None) as ctx:
    common, p = config.load_transfer(method, ctx.params)
    ctx.log_params({"task": task, "method": method, "transfer": {
        "common": config.as_dict(common), method: config.as_dict(p)}})
    cell = run_cell(task, method, common, p, ctx.run)
    write_predictions(predictions_dir(task, method), cell.predictions)
    record = cell.record
    write_json(Path("metrics/transfer") / task / f"{method}.json", record.to_json())
    write_seed_curves(task, method, record)
    cost = cell.cost
    ctx.compute(amount=cost.amount, unit=cost.unit, params=cost.params, flops=cost.flops)
    if record.unavailable is not None:
        ctx.summary(unavailable=record.unavailable)
    else:
        ctx.summary(**{record.primary: f"{record.mean:.4f} ± {record.std:.4f}"})
