"""``ctxrep timings``: the compute ledger of the run in this workspace with each stage's wall
time, which DVC does not record (it differs run to run; ``dvc.lock`` holds only what does not).

Each stage writes its wall time, and a pretraining stage its throughput and training seconds to
each held-out point, to ``reports/timings/<stage>.json`` when it ends (and to its MLflow run).
This command reads them beside the DVC-recorded ledger of the grid in ``params.yaml`` and writes
``reports/timings.md``. A stage that DVC restored from its cache has no time here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ctxrep.io import atomic_file
from ctxrep.stage import TIMINGS_DIR


def wall_seconds(root: Path) -> dict[str, float]:
    """stage -> wall seconds of its last run here (unreadable files are skipped: a stage
    killed while writing one)."""
    out = {}
    for path in sorted((root / TIMINGS_DIR).glob("*.json")):
        try:
            out[path.stem] = float(json.loads(path.read_text())["wall_s"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--out", type=Path, default=Path("reports/timings.md"))


def run(args: argparse.Namespace) -> int:
    from ctxrep import config
    from ctxrep.report import ReportInputError, load_inputs
    from ctxrep.report.build import ledger_section

    params = config.read_params()
    grid = params["grid"]
    try:
        methods = config.grid_methods(grid, params["left_to_right"], params["hf"])
        inputs = load_inputs(".", list(grid["tasks"]), methods,
                             fetched=list(params["tasks"]), curve=params["learning_curve"])
    except ReportInputError as e:
        raise SystemExit(f"ctxrep timings: bad input: {e}") from e
    text = (f"# ctxrep: compute ledger with wall times (profile `{params.get('profile')}`)\n\n"
            + ledger_section(inputs, wall_s=wall_seconds(Path("."))) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out) as f:
        f.write(text)
    print(text, end="")
    return 0
