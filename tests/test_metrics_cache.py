"""Computing a metric writes nothing under the home directory: `evaluate` copies each metric
script into a per-process scratch folder (not ~/.cache/huggingface/modules/evaluate_modules)
and the folder is removed when the process exits."""

import os
import subprocess
import sys

CODE = """
from ctxrep.metrics import METRIC_NAMES, compute, load_metric, scratch_dir
assert compute("accuracy", [0, 1], [0, 0]) == {"accuracy": 0.5}
assert compute("token_accuracy", [["A", "B"]], [["A", "C"]])["token_accuracy"] == 0.5
for name in METRIC_NAMES:
    assert load_metric(name).name == name
metric = load_metric("macro_f1")      # not kept in memory: its cache_dir is written
metric.add_batch(predictions=[0, 1], references=[0, 1])
assert metric.compute()["macro_f1"] == 1.0
print(scratch_dir())
"""


def test_computing_metrics_leaves_nothing_in_home_and_cleans_its_scratch(tmp_path):
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "XDG_")) or k == "HF_HUB_OFFLINE"}
    env.update(HOME=str(home), TMPDIR=str(tmp))
    proc = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    scratch = proc.stdout.strip().splitlines()[-1]
    assert scratch.startswith(str(tmp)), scratch
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
    assert list(tmp.iterdir()) == [], "the scratch folder outlived its process"
