"""Stage learning_curve@<task>-<method>: the method retrained on nested fractions of the task's
training examples (``learning_curve.fractions``), every seed of ``transfer.common``.

Writes metrics/learning_curves/<task>/<method>.json (one grid-cell record per fraction) and each
point's predictions under data/learning_curves/<task>/<method>/fraction<f>/seed<N>.json, from
which the report draws the curves and judges the sample-efficiency claim with bootstrap CIs;
each point's training curves go to dvclive/learning_curves/<task>/<method>/fraction<f>/seed<N>/.
The whole-data point is the grid's own cell (transfer@<task>-<method>), not recomputed here.
Learning curves are drawn for feature-based methods (``learning_curve.methods``).
"""

import sys
from pathlib import Path

from ctxrep import config
from ctxrep.training.curves import fresh_folder
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.transfer.cell import CellCost, run_cell
from ctxrep.transfer.feature_train import FeatureBased
from ctxrep.transfer.predictions import curve_dir, write_predictions

task, method = sys.argv[1], sys.argv[2]
with stage(f"learning_curve@{task}-{method}", None) as ctx:
    curve = config.load_section("learning_curve", ctx.params)
    common, p = config.load_transfer(method, ctx.params)
    ctx.log_params({"task": task, "method": method, "learning_curve": config.as_dict(curve),
                    "transfer": {"common": config.as_dict(common), method: config.as_dict(p)}})
    points, files, cost = [], {}, CellCost()
    live = fresh_folder(Path("dvclive/learning_curves") / task / method)
    approach = FeatureBased(method, p)  # its features and word vectors, loaded once
    for fraction in curve.fractions:
        cell = run_cell(task, approach, common, ctx.run, train_fraction=fraction,
                        live_root=live / f"fraction{fraction}")
        points.append(cell.record)
        files.update({f"fraction{fraction}/{name}": obj for name, obj in cell.predictions.items()})
        cost = CellCost(cost.amount + cell.cost.amount, cell.cost.unit, cell.cost.params,
                        cost.flops + cell.cost.flops)
    write_predictions(curve_dir(task, method), files)
    write_json(Path("metrics/learning_curves") / task / f"{method}.json",
               {"task": task, "method": method, "fractions": curve.fractions,
                "points": [point.to_json() for point in points]})
    ctx.compute(amount=cost.amount, unit=cost.unit, params=cost.params, flops=cost.flops)
    ctx.summary(**{f"fraction {point.train_fraction}": f"{point.mean:.4f}"
                   for point in points if point.unavailable is None})
