"""Stage extract@<features>: frozen per-word layer features of every grid task →
data/features/<features>/<task>/ (a task no location served: only ``UNAVAILABLE.json`` there).
``bilm`` and ``bert`` are the pretrained models; ``bilm-random`` and ``bert-random`` the same
architectures untrained (the random-init controls); ``hf-<name>`` the Hugging Face checkpoint
``hf.<name>`` of the params (stage ``extract_hf@<name>``), its files' sha256 in
``checkpoint.json`` beside the features."""

import json
import sys
from pathlib import Path

import torch

from ctxrep import config
from ctxrep.families import model_dir_of
from ctxrep.io import atomic_dir, write_json
from ctxrep.models.hf_checkpoint import checkpoint_record
from ctxrep.models.hf_features import HFFeaturizer
from ctxrep.stage import stage
from ctxrep.transfer.data import TaskUnavailable, load_task, spec
from ctxrep.transfer.extract import FEATURIZERS, extract_task

features = sys.argv[1]
hf = config.hf_name(features)
if hf is None and features not in config.FEATURE_SETS:
    sys.exit(f"extract: unknown feature set {features!r}; expected one of {config.FEATURE_SETS} "
             "or hf-<a name of params hf>")
model, random_init = features.removesuffix("-random"), features.endswith("-random")
with stage(config.extract_stage_name(features), "extract") as ctx:
    p = ctx.section
    common = config.load_transfer_common(ctx.params)
    tasks = ctx.params["grid"]["tasks"]
    torch.set_grad_enabled(False)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if hf is not None:
        entry = config.load_hf(ctx.params, hf)
        featurize = HFFeaturizer.from_params(entry, device)
    else:
        featurize = FEATURIZERS[model].from_params(model_dir_of(model), device, p, random_init)
    words = 0
    with atomic_dir(Path("data/features") / features) as tmp:
        if hf is not None:
            write_json(tmp / "checkpoint.json", checkpoint_record(Path(entry.path)))
        for task in tasks:
            (tmp / task).mkdir()  # always there: each transfer cell depends on its task's folder
            try:
                splits, _ = load_task(task, common)
            except TaskUnavailable as e:
                (tmp / task / "UNAVAILABLE.json").write_text(json.dumps({"reason": str(e)}))
                continue
            meta = extract_task(featurize, splits, spec(task).kind, tmp / task, p.batch_size)
            words += sum(v for s in meta["splits"].values() for k, v in s.items()
                         if k.endswith("_words"))
    ctx.compute(amount=featurize.tokens, unit=featurize.unit, params=featurize.params,
                flops=featurize.flops)
    truncated = getattr(featurize, "truncated_words", 0)  # past the sub-word limit: zero vectors
    ctx.summary(tasks=len(tasks), words=words, **({"truncated_words": truncated} if truncated else {}))
