"""A pretraining-budget sweep: how much pretraining before contextual features pay off.

Queue experiments that differ in one pretraining budget, run them, then collect them:

    for s in 100 200 400 800; do
      dvc exp run --queue -S profile=default -S pretrain_bilm.steps=$s -n bilm-steps-$s
    done
    dvc exp run --run-all
    ctxrep sweep --model bilm --claim elmo:static

Every experiment's ``metrics/claims.json`` carries the report's claims (Δ and its 95 %
bootstrap CI per task) and ``metrics/headline.json`` its pretraining tokens; both are
DVC metrics, so ``dvc exp show --json`` has them for every experiment without checking any out.
This module writes ``reports/sweep.md`` (one row per experiment and task) and
``reports/sweep.png`` (Δ with its CI against pretraining tokens, one line per task): the
smallest budget whose CI clears 0 is where the contextual features start to pay.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ctxrep.families import CLAIMS, NAMES
from ctxrep.analysis.bootstrap import Interval
from ctxrep.io import atomic_file
from ctxrep.report import plots
from ctxrep.report.tables import markdown_table


@dataclass(frozen=True)
class SweepPoint:
    experiment: str
    tokens: int           # pretraining tokens of the swept model
    delta: float          # better − worse, seed means (fraction, not percent)
    low: float
    high: float

    @property
    def verdict(self) -> str:
        return "reproduced" if self.low > 0 else "contradicted" if self.high < 0 else "inconclusive"


# An experiment whose executor is in one of these states has no metrics of its own yet: a
# running one shows its temporary workspace's files, a queued one its baseline's.
UNFINISHED = ("queued", "running", "failed")


def experiment_revs(show: list) -> list[tuple[str, str, dict]]:
    """(name, git revision, data) of every finished experiment in ``dvc exp show --json``
    output, and of each baseline commit (the workspace aside: it is one of them or uncommitted)."""
    out = []
    for baseline in show:
        if baseline.get("rev") != "workspace" and baseline.get("data"):
            out.append((baseline.get("name") or baseline["rev"][:7], baseline["rev"], baseline["data"]))
        for exp in baseline.get("experiments") or []:
            if (exp.get("executor") or {}).get("state") in UNFINISHED:
                continue
            for rev in exp.get("revs") or []:
                if rev.get("data"):
                    out.append((rev.get("name") or exp.get("name") or rev["rev"][:7], rev["rev"],
                                rev["data"]))
    return out


def experiments(show: list) -> list[tuple[str, dict]]:
    """(name, metrics by path) of every finished experiment and baseline commit."""
    return [(name, data) for name, _, data in experiment_revs(show)]


def exp_show_json() -> list:
    """``dvc exp show --json`` of the current repository (SystemExit 2 when DVC fails)."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "exp", "show", "--json"],
                          capture_output=True, text=True)  # this environment's DVC, PATH or not
    if proc.returncode != 0:
        print(f"dvc exp show failed: {proc.stderr.strip()}", file=sys.stderr)
        raise SystemExit(2)
    return json.loads(proc.stdout)


def _metric(data: dict, path: str) -> dict | None:
    entry = (data.get("metrics") or {}).get(path)
    return entry.get("data") if isinstance(entry, dict) else None


def sweep_points(show: list, model: str, better: str, worse: str,
                 names: str = "*") -> dict[str, list[SweepPoint]]:
    """task -> points (fewest pretraining tokens first) of the claim ``better`` > ``worse``,
    from every experiment named like the shell pattern ``names`` whose metrics hold both the
    claim and the model's token count."""
    points: dict[str, list[SweepPoint]] = {}
    for name, data in experiments(show):
        if not fnmatch.fnmatchcase(name, names):
            continue
        # the pretraining budget: in headline.json, else in the model's own metrics file
        pretrain = ((_metric(data, "metrics/headline.json") or {}).get("pretrain", {}).get(model)
                    or _metric(data, f"metrics/pretrain_{model}.json") or {})
        claims = _metric(data, "metrics/claims.json") or {}
        by_task = claims.get(f"{better}_vs_{worse}", {})
        if "train_tokens" not in pretrain:
            continue
        for task, c in by_task.items():
            points.setdefault(task, []).append(
                SweepPoint(name, int(pretrain["train_tokens"]), c["delta"], c["low"], c["high"]))
    return {task: sorted(pts, key=lambda p: (p.tokens, p.experiment))
            for task, pts in sorted(points.items())}


@plots.default_style
def figure(points: dict[str, list[SweepPoint]], better: str, worse: str) -> Figure | None:
    if not points:
        return None
    fig, (ax,) = plots.new_figure(1, extra_width=1.4)
    for task, pts in points.items():
        plots.interval_line(ax, [p.tokens for p in pts],
                            [Interval(p.delta, p.low, p.high) for p in pts], 100.0, label=task)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set(title=f"{better} − {worse} vs pretraining", xlabel="pretraining tokens",
           ylabel="Δ (points, 95 % CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def table(points: dict[str, list[SweepPoint]], better: str, worse: str) -> str:
    rows = [[task, p.experiment, f"{p.tokens:,}", f"{100 * p.delta:+.1f}",
             f"[{100 * p.low:+.1f}, {100 * p.high:+.1f}]", p.verdict]
            for task, pts in points.items() for p in pts]
    head = f"# Pretraining-budget sweep: {better} − {worse}\n\n"
    if not rows:
        return head + ("_No experiment has both the claim and the pretraining metrics: run the "
                       "queued experiments first (see `ctxrep sweep --help`)._\n")
    return head + markdown_table(["task", "experiment", "pretraining tokens", "Δ", "95 % CI",
                                  "verdict"], rows) + "\n"


def _claim(text: str) -> tuple[str, str]:
    if ":" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: expected BETTER:WORSE, e.g. elmo:static")
    better, worse = text.split(":", 1)
    return better, worse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--model", choices=NAMES, default=NAMES[0],
                        help="whose pretraining tokens are the x axis")
    # by default the catalogue's first claim (ELMo Table 1's: contextual beats static features)
    parser.add_argument("--claim", type=_claim, default=f"{CLAIMS[0].better}:{CLAIMS[0].worse}",
                        help="BETTER:WORSE (methods)")
    parser.add_argument("--show-json", type=Path,
                        help="read this `dvc exp show --json` output instead of running it")
    parser.add_argument("--experiments", default="*", metavar="PATTERN",
                        help="only experiments (and baseline commits) whose name matches this "
                             "shell pattern, e.g. 'bilm-steps-*'")
    parser.add_argument("--out", type=Path, default=Path("reports"))


def run(args: argparse.Namespace) -> int:
    better, worse = args.claim
    show = json.loads(args.show_json.read_text()) if args.show_json else exp_show_json()
    points = sweep_points(show, args.model, better, worse, args.experiments)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out / "sweep.md") as f:
        f.write(table(points, better, worse))
    fig = figure(points, better, worse)
    if fig is not None:
        plots.save_png(fig, args.out / "sweep.png")
    print(f"{sum(map(len, points.values()))} points on {len(points)} task(s) → "
          f"{args.out / 'sweep.md'}" + (f", {args.out / 'sweep.png'}" if fig else ""))
    return 0

