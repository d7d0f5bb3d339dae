"""Stage baseline@<task>: the task's trivial baselines (majority class; most frequent tag per
word; TF-IDF + logistic regression; lexical-overlap window for span QA) on exactly the examples
the transfer methods see. Writes metrics/baselines/<task>.json and the baselines' predictions
under data/predictions/<task>/baselines/ (see ctxrep.analysis.baselines)."""

import sys

from ctxrep import config
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.transfer.baseline_cell import BASELINES, run_baselines

task = sys.argv[1]
with stage(f"baseline@{task}", None) as ctx:
    record = run_baselines(task, config.load_transfer_common(ctx.params))
    write_json(BASELINES / f"{task}.json", record)
    ctx.compute(amount=record.get("train_examples", 0), unit="examples")
    ctx.summary(**{name: f"{scores[record['primary']]:.4f}"
                   for name, scores in record.get("baselines", {}).items()})
