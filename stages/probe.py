"""Stage probe@<model>: per-layer linear probes of one frozen model → metrics/probe/<model>.json.

    python stages/probe.py bilm|bert

Reads ``data/features/<model>/<task>/`` (extract) and ``data/raw/tasks/<task>/dataset``; also
writes each probed task's per-example predictions of every layer to
``data/predictions/probe/<model>/<task>.json``, from which the report bootstraps the layer
comparisons.
"""

import sys
import time

from ctxrep import config
from ctxrep.families import NAMES
from ctxrep.io import atomic_dir, write_json
from ctxrep.stage import stage
from ctxrep.transfer.data import load_task
from ctxrep.transfer.probe import probe_model


if len(sys.argv) != 2 or sys.argv[1] not in NAMES:
    sys.exit(f"usage: python stages/probe.py {{{'|'.join(NAMES)}}}")
model = sys.argv[1]

with stage(f"probe@{model}", "probe") as ctx:
    params = ctx.section
    start = time.perf_counter()
    # The examples extract featurized: the same subsample transfer uses (transfer.common).
    common = config.load_transfer_common(ctx.params)
    result, predictions = probe_model(model, "data/features",
                                      lambda task: load_task(task, common)[0], params)
    with atomic_dir(f"data/predictions/probe/{model}") as tmp:
        for task, entry in predictions.items():
            write_json(tmp / f"{task}.json", {"task": task, "model": model, **entry}, indent=None)
    write_json(f"metrics/probe/{model}.json", result)
    if ctx.run:
        ctx.run.log_metrics({f"{task}.layer{j}": score
                             for task, entry in result["tasks"].items()
                             for j, score in enumerate(entry.get("layers", []))})
        ctx.run.log_metrics({"probe_seconds": time.perf_counter() - start})
    probed = [entry for entry in result["tasks"].values() if "layers" in entry]
    ctx.compute(amount=sum(e["train_items"] for e in probed), unit="probe items",
                flops=sum(e["train_flops"] for e in probed))
    ctx.summary(**{task: entry.get("layers", "skipped") for task, entry in result["tasks"].items()})
