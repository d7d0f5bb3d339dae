"""Evaluation metrics as Hugging Face `evaluate` modules shipped inside the package.

Each metric lives in `metrics/<name>/<name>.py` and is loaded by local path, so
nothing is fetched from the Hub (which is unreachable here; `evaluate.load("accuracy")`
would fail). What else the project needs to know of a metric is its entry in ``CATALOGUE``
(:class:`Metric`): the key of its headline number, the per-example statistic each key is
resampled from (:mod:`ctxrep.analysis.bootstrap`), and the factor to percent. Metrics, the
keys they return, and where they are the official number:

    accuracy              accuracy                        SST, WiC, SICK-E, MRPC/QQP (beside F1)
    macro_f1              macro_f1, per_class_f1          secondary for classification
    binary_f1             binary_f1 (F1 of class 1)       MRPC, QQP
    matthews_correlation  matthews_correlation            CoLA
    pearson_spearman      pearson, spearman               STS-B, SICK-R (float scores)
    seqeval_f1            f1, precision, recall, ...      CoNLL-2003 NER
    token_accuracy        token_accuracy, num_tokens      UD POS
    squad                 exact_match, f1 (percent)       SQuAD v1.1

    >>> from ctxrep.metrics import compute
    >>> compute("accuracy", [0, 1, 1], [0, 1, 0])
    {'accuracy': 0.6666666666666666}

`evaluate.load` copies a metric script into an importable "dynamic modules" folder, by default
``~/.cache/huggingface/modules/evaluate_modules`` (``evaluate.config.HF_MODULES_CACHE``), and
keeps a metric's pending predictions under ``~/.cache/huggingface/metrics`` (``cache_dir``).
Here both are a temporary folder of this process, removed when it exits: computing a metric
writes nothing under the home directory (the Hugging Face cache is used only by
``data.source: hub``), and two processes never share, lock or race on those copies.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Loading by local path never touches the network; this only makes any accidental
# Hub lookup inside `evaluate` fail fast instead of waiting on a connection.
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")



@dataclass(frozen=True)
class Metric:
    """What the project needs to know of a metric module besides its code."""

    headline: str                # the key of the number a task reports (its primary score)
    statistics: dict[str, str]   # output key → the per-example statistic whose sums give it
                                 # (ctxrep.analysis.bootstrap.example_stats); keys absent get no CI
    percent: float = 100.0       # factor that turns its values into percent (SQuAD's are already)


CATALOGUE = {
    "accuracy": Metric("accuracy", {"accuracy": "accuracy"}),
    "macro_f1": Metric("macro_f1", {"macro_f1": "macro_f1"}),
    "binary_f1": Metric("binary_f1", {"binary_f1": "binary_f1"}),
    "matthews_correlation": Metric("matthews_correlation",
                                   {"matthews_correlation": "matthews"}),
    # Spearman's rho has no per-example sums (ranks change under resampling): no CI
    "pearson_spearman": Metric("pearson", {"pearson": "pearson"}),
    "seqeval_f1": Metric("f1", {"f1": "entity_f1"}),
    "token_accuracy": Metric("token_accuracy", {"token_accuracy": "token_accuracy"}),
    "squad": Metric("f1", {"f1": "squad_f1", "exact_match": "squad_em"}, percent=1.0),
}
METRIC_NAMES = tuple(CATALOGUE)


def metric_info(name: str) -> Metric:
    """The catalogue's entry of metric module ``name``."""
    if name not in CATALOGUE:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}")
    return CATALOGUE[name]


def metric_path(name: str) -> Path:
    """Path of the metric script `<package>/metrics/<name>/<name>.py`."""
    metric_info(name)  # stops on an unknown name
    return Path(__file__).parent / name / f"{name}.py"


def load_metric(name: str, **load_kwargs: Any):
    """Load the metric `name` as an `evaluate.EvaluationModule`, from the package directory.

    `load_kwargs` go to `evaluate.load` (e.g. `experiment_id`, `keep_in_memory`); `cache_dir`
    defaults to this process's scratch folder (:func:`scratch_dir`), not the home directory.
    """
    evaluate = _import_evaluate()
    scratch = scratch_dir()
    load_kwargs.setdefault("cache_dir", str(scratch / "metrics"))
    # evaluate.load has no argument for where it copies the script: it reads
    # evaluate.config.HF_MODULES_CACHE (evaluate.utils.file_utils.init_hf_modules) at call time.
    settings = sys.modules["evaluate.config"]
    saved = settings.HF_MODULES_CACHE
    settings.HF_MODULES_CACHE = scratch / "modules"
    try:
        return evaluate.load(str(metric_path(name)), **load_kwargs)
    finally:
        settings.HF_MODULES_CACHE = saved


_SCRATCH: tuple[int, Path] | None = None


def scratch_dir() -> Path:
    """A temporary folder of this process for `evaluate`'s module copies and metric caches
    (under ``$TMPDIR``), removed at exit; a forked child that loads a metric gets its own."""
    global _SCRATCH
    if _SCRATCH is None or _SCRATCH[0] != os.getpid():
        path = Path(tempfile.mkdtemp(prefix="ctxrep-evaluate-"))
        _SCRATCH = (os.getpid(), path)
        atexit.register(_remove_scratch, os.getpid(), path)
    return _SCRATCH[1]


def _remove_scratch(owner: int, path: Path) -> None:
    if os.getpid() == owner:  # not from a forked child that inherited the atexit entry
        shutil.rmtree(path, ignore_errors=True)


# What evaluate's evaluators import, each inside ``try: … except ImportError`` (their tasks
# list, their bootstrap): ctxrep never uses evaluators, only metric modules.
EVALUATOR_IMPORTS = ("transformers.pipelines", "transformers", "scipy.stats")


def _import_evaluate():
    """``import evaluate``, without the imports its evaluators make on the way.

    ``evaluate/evaluator/`` imports ``transformers.pipelines`` (5 s of a stage's start-up on
    this CPU, with ``transformers`` itself) only to list the tasks its evaluators support, and
    ``scipy.stats`` for their bootstrap (0.6 s); ctxrep never uses evaluators. A ``None`` entry
    in ``sys.modules`` makes an import raise ``ImportError``, which evaluate handles as "not
    installed"; the entries are removed right after, so each module stays importable in this
    process (a metric that needs ``scipy.stats`` imports it when it is loaded).
    """
    if "evaluate" in sys.modules:
        return sys.modules["evaluate"]
    blocked = [name for name in EVALUATOR_IMPORTS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None
    try:
        import evaluate
    finally:
        for name in blocked:
            del sys.modules[name]
    return evaluate


@functools.lru_cache(maxsize=None)
def _cached(name: str):
    return load_metric(name, keep_in_memory=True)


def compute(name: str, predictions, references, **kwargs: Any) -> dict:
    """Load `name` (once per process) and return its scores for `predictions` against `references`.

    Extra keyword arguments go to the metric's `_compute` (e.g. `labels=` for macro_f1).
    """
    return _cached(name).compute(predictions=predictions, references=references, **kwargs)
