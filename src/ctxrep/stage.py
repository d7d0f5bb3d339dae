"""What every stage entry point shares: logging, params, the MLflow run, the closing line.

A stage script is then only its own work::

    with stage("tokenize", "tokenize") as ctx:
        meta = build(...)
        ctx.summary(docs=..., tokens=...)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ctxrep import config
from ctxrep.io import write_json

log = logging.getLogger("ctxrep")
COMPUTE_DIR = Path("metrics/compute")


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("CTXREP_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr, force=True)
    for noisy in ("alembic", "mlflow", "urllib3", "filelock", "datasets", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


@dataclass
class StageContext:
    name: str
    params: dict                      # the whole merged params (profile applied)
    section: object                   # the validated dataclass of this stage's section
    run: object = None                # tracking.StageRun
    _summary: dict = field(default_factory=dict)
    _compute: dict | None = None

    def summary(self, **items) -> None:
        self._summary.update(items)

    def compute(self, *, amount: int, unit: str, params: int | None = None,
                flops: float | None = None) -> None:
        """This stage's line in the report's compute ledger: the data it processed (``amount``
        ``unit``, e.g. training tokens), the parameters it trained or ran, and estimated FLOPs.
        Written with the stage's wall time to ``metrics/compute/<stage>.json`` when it ends."""
        self._compute = {"amount": int(amount), "unit": unit, "params": params,
                         "flops": None if flops is None else float(f"{flops:.4g}")}

    def write_metrics(self, path: Path | str, metrics: dict) -> None:
        """Small metrics JSON for ``dvc metrics``, also logged to MLflow."""
        write_json(path, metrics)
        if self.run:
            self.run.log_metrics(_numbers(metrics))


def _numbers(d: dict) -> dict:
    from ctxrep.tracking import flatten

    return {k: v for k, v in flatten(d).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


@contextlib.contextmanager
def stage(name: str, section: str | None, track: bool = True,
          logged_params: dict | None = None) -> Iterator[StageContext]:
    """Validate params (before any work), open the MLflow run, print one line at the end.

    ``section`` is the params section this stage reads (None: the stage validates its own,
    e.g. transfer cells, and passes what to log as ``logged_params``). A :class:`ParamError`
    anywhere exits with status 2 and the key named."""
    from ctxrep import tracking

    setup_logging()
    start = time.perf_counter()
    try:
        params = config.read_params()
        sec = config.load_section(section, params=params) if section else None
    except config.ParamError as e:
        log.error("%s: bad params: %s", name, e)
        raise SystemExit(2) from e
    ctx = StageContext(name, params, sec)
    log.info("%s: profile '%s'", name, params["profile"])
    logged = {"profile": params["profile"], **(logged_params or {})}
    if sec is not None:
        logged[section] = config.as_dict(sec)
    try:
        if track:
            with tracking.stage_run(name, logged) as run:
                ctx.run = run
                yield ctx
                run.log_metrics({"wall_s": time.perf_counter() - start})
        else:
            yield ctx
    except config.ParamError as e:
        log.error("%s: bad params: %s", name, e)
        raise SystemExit(2) from e
    seconds = time.perf_counter() - start
    # Git-tracked like the pretraining metrics, not a DVC output: wall time differs run to run.
    if ctx._compute is not None and int(os.environ.get("RANK", "0")) == 0:
        write_json(COMPUTE_DIR / f"{name}.json", {"wall_s": round(seconds, 1), **ctx._compute})
    items = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                      for k, v in ctx._summary.items())
    print(f"[{name}] done in {seconds:.1f} s: {items}", flush=True)
