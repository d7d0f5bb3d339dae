"""Stage transfer@<task>-<method>: train and evaluate one grid cell over every seed.

Writes metrics/transfer/<task>/<method>.json (mean ± std over seeds of each metric, and the
learned scalar-mix weights of feature-based methods).
"""

import statistics
import sys
import time
from pathlib import Path

from ctxrep import config
from ctxrep.io import write_json
from ctxrep.stage import stage
from ctxrep.transfer.data import TaskUnavailable, load_task, spec
from ctxrep.transfer.feature_train import run_feature_transfer
from ctxrep.transfer.features import FeatureStore
from ctxrep.transfer.finetune import run_finetune
from ctxrep.transfer.scoring import primary_key

task, method = sys.argv[1], sys.argv[2]
out = Path("metrics/transfer") / task / f"{method}.json"
with stage(f"transfer@{task}-{method}", None) as ctx:
    config.check_grid(ctx.params, task, method)
    common, p = config.load_transfer(method, params=ctx.params)
    task_spec = spec(task)
    record = {"task": task, "method": method, "kind": task_spec.kind, "metric": task_spec.metric,
              "primary": primary_key(task_spec.metric), "eval_split": common.eval_split,
              "seeds": common.seeds}
    try:
        splits = load_task(task, common)
    except TaskUnavailable as e:
        write_json(out, {**record, "unavailable": str(e)})
        ctx.summary(unavailable=True)
        raise SystemExit(0)
    eval_split = next(s for s in splits if s != "train")
    ckpt_root = Path("data/checkpoints/transfer") / task / method
    runs, start = [], time.perf_counter()
    for seed in common.seeds:
        if method in config.FEATURE_METHODS:
            model = "bert" if method == "bert-feature" else "bilm"
            store = FeatureStore(Path("data/features") / model / task)
            train_ds = splits["train"]
            n_labels = (train_ds.features["tags"].feature.num_classes if task_spec.kind == "tagging"
                        else train_ds.features["label"].num_classes if "label" in train_ds.features
                        else 0)
            runs.append(run_feature_transfer(task_spec.kind, task_spec.metric, method, store,
                                             splits, eval_split, n_labels, p, seed,
                                             ckpt_root / f"seed{seed}", ctx.run))
        else:
            runs.append(run_finetune(task_spec.kind, task_spec.metric, splits, eval_split,
                                     Path("data/models/bert"), method == "bert-finetune", p, seed,
                                     ckpt_root / f"seed{seed}", ctx.run))
    keys = sorted(runs[0]["scores"])
    record["scores"] = {k: {"mean": round(statistics.fmean(r["scores"][k] for r in runs), 6),
                            "std": round(statistics.stdev(r["scores"][k] for r in runs), 6)
                            if len(runs) > 1 else 0.0,
                            "values": [round(r["scores"][k], 6) for r in runs]} for k in keys}
    if "mix_weights" in runs[0]:
        record["mix_weights"] = {part: [r["mix_weights"][part] for r in runs]
                                 for part in runs[0]["mix_weights"]}
    record["train_examples"] = len(splits["train"])
    record["eval_examples"] = len(splits[eval_split])
    # Timings stay out of this file: it is a DVC output and must be the same bytes every run.
    train_tokens = sum(r["train_tokens"] for r in runs)
    if ctx.run:
        ctx.run.log_metrics({"seconds": time.perf_counter() - start, "train_tokens": train_tokens})
    write_json(out, record)
    ctx.compute(amount=train_tokens,
                unit="words" if method in config.FEATURE_METHODS else "sub-word tokens",
                params=runs[0]["trainable_params"], flops=sum(r["train_flops"] for r in runs))
    headline = record["scores"][record["primary"]]
    ctx.summary(**{record["primary"]: f"{headline['mean']:.4f} ± {headline['std']:.4f}"})
