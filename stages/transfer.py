"""Stage transfer@<task>-<method>: train and evaluate one grid cell over every seed.

Writes metrics/transfer/<task>/<method>.json (mean ± std over seeds of each metric, and the
learned scalar-mix weights of feature-based methods; see ctxrep.transfer.cell), each seed's
predictions, and each seed's curves as it trains (DVCLive: dvclive/transfer/<task>/<method>/
seed<N>/; see ctxrep.training.curves).
"""

import sys
from pathlib import Path

from ctxrep import config
from ctxrep.training.curves import fresh_folder
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.transfer.cell import run_cell
from ctxrep.transfer.predictions import predictions_dir, write_predictions

task, method = sys.argv[1], sys.argv[2]
with stage(f"transfer@{task}-{method}", None) as ctx:
    common, p = config.load_transfer(method, ctx.params)
    ctx.log_params({"task": task, "method": method, "transfer": {
        "common": config.as_dict(common), method: config.as_dict(p)}})
    live = fresh_folder(Path("dvclive/transfer") / task / method)
    cell = run_cell(task, method, common, p, ctx.run, live_root=live)
    write_predictions(predictions_dir(task, method), cell.predictions)
    record = cell.record
    write_json(Path("metrics/transfer") / task / f"{method}.json", record.to_json())
    cost = cell.cost
    ctx.compute(amount=cost.amount, unit=cost.unit, params=cost.params, flops=cost.flops)
    if record.unavailable is not None:
        ctx.summary(unavailable=record.unavailable)
    else:
        ctx.summary(**{record.primary: f"{record.mean:.4f} ± {record.std:.4f}"})
