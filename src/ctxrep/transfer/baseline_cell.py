"""A task's trivial baselines as a pipeline stage sees them (``baseline@<task>``): fitted on
exactly the training examples the transfer methods train on (the dev split held out, see
:mod:`ctxrep.transfer.selection`) and scored on the same evaluation examples. The baselines
themselves are in :mod:`ctxrep.analysis.baselines`; which a task gets is its kind's
``baselines`` (:mod:`ctxrep.kinds`)."""

from __future__ import annotations

from pathlib import Path

from ctxrep import config, kinds
from ctxrep.transfer.data import TaskUnavailable, load_task, spec
from ctxrep.transfer.predictions import predictions_dir, write_predictions
from ctxrep.transfer.scoring import primary_key, score
from ctxrep.transfer.selection import train_dev_indices

BASELINES = Path("metrics/baselines")


def run_baselines(task: str, common: config.TransferCommon) -> dict:
    """The trivial baselines of ``task``, fitted on exactly the training examples the methods
    train on (the dev split held out) and scored on the same evaluation examples; their
    predictions are saved like a method's, one file each
    (``data/predictions/<task>/baselines/<name>.json``)."""
    task_spec = spec(task)
    record = {"task": task, "kind": task_spec.kind, "metric": task_spec.metric,
              "metrics": list(task_spec.metrics), "primary": primary_key(task_spec.metrics),
              "eval_split": common.eval_split}
    try:
        splits, eval_split = load_task(task, common)
    except TaskUnavailable as e:
        write_predictions(predictions_dir(task, "baselines"),
                          {"unavailable.json": {"reason": str(e)}})
        return {**record, "unavailable": str(e)}
    record["eval_split"] = eval_split
    train_idx, _ = train_dev_indices(len(splits["train"]), common.dev_fraction)
    train_set, eval_set = splits["train"].select(train_idx), splits[eval_split]
    task_kind = kinds.get(task_spec.kind)
    gold = task_kind.references(eval_set)
    record["baselines"], files = {}, {}
    for name, predictions in task_kind.baselines(train_set, eval_set).items():
        scores = score(task_spec.kind, task_spec.metrics, eval_set, predictions)
        record["baselines"][name] = {k: round(v, 6) for k, v in sorted(scores.items())}
        files[f"{name}.json"] = {"task": task, "method": name, "seed": 0,
                                 "eval_split": eval_split, "references": gold,
                                 "predictions": task_kind.readable(eval_set, predictions)}
    write_predictions(predictions_dir(task, "baselines"), files)
    record["train_examples"], record["eval_examples"] = len(train_set), len(eval_set)
    return record
