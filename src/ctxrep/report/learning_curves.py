"""Learning curves: how much task data contextual features save (ELMo §5.4, Fig. 1).

For each task of ``learning_curve.tasks``, each method of ``learning_curve.methods`` has one
point per training fraction (the learning_curve stage) and one for the whole training data
(the grid's cell). A point is the seed-mean primary metric with its 95 % bootstrap CI
(evaluation examples and seeds resampled, :func:`ctxrep.analysis.bootstrap.bootstrap_mean`).

The claim judged, with ``base`` the first method and ``ctx`` the second, is that the gain of
contextual features is largest with little data:

    Δ = (ctx − base) at the smallest fraction − (ctx − base) with all the data

as one contrast of four runs on the same evaluation examples
(:func:`ctxrep.analysis.bootstrap.contrast`), so its CI accounts for the pairing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure

from ctxrep.analysis.bootstrap import STATISTIC, Interval, bootstrap_mean, contrast, example_stats
from ctxrep.analysis.claims import Claim, Judgement, verdict
from ctxrep.report import plots
from ctxrep.report.evidence import LEARNING_CURVE_SOURCE, Evidence, format_ci, task_metric
from ctxrep.report.inputs import ReportInputs
from ctxrep.report.tables import INTERVAL_SCALE, markdown_table

SOURCE = LEARNING_CURVE_SOURCE
FIGURE = "learning_curves.png"


@dataclass
class Point:
    train_examples: int
    runs: list[np.ndarray]      # per seed: per-example statistics (analysis.bootstrap)
    interval: Interval          # seed-mean metric with its 95 % CI


@dataclass
class Curves:
    """Per task: the bootstrap statistic, the factor its intervals are printed at (percent), and each method's
    points, fewest training examples first (the grid's cell last)."""
    statistic: dict[str, str] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    points: dict[str, dict[str, list[Point]]] = field(default_factory=dict)


def gather(inputs: ReportInputs, evidence: Evidence) -> Curves:
    """Every curve point's statistics and CI, computed once; the whole-data point is the grid
    cell's, taken from ``evidence``."""
    curves = Curves()
    for task, by_method in inputs.learning_curves.items():
        metric = task_metric(inputs, task)
        statistic = STATISTIC.get(metric) if metric else None
        if statistic is None:
            continue
        for method in inputs.curve.get("methods", []):
            pts = []
            for cp in by_method.get(method, []):
                runs = [example_stats(statistic, p.predictions, p.references)
                        for p in cp.predictions]
                pts.append(Point(cp.train_examples, runs, bootstrap_mean(statistic, runs)))
            cell = inputs.transfer.get(task, {}).get(method)
            full = evidence.runs.get(task, {}).get(method)
            if cell is not None and cell.train_examples and full:
                pts.append(Point(cell.train_examples, full, evidence.intervals[task][method]))
            if pts:
                curves.points.setdefault(task, {})[method] = sorted(
                    pts, key=lambda p: p.train_examples)
        if task in curves.points:
            curves.statistic[task], curves.scale[task] = statistic, INTERVAL_SCALE
    return curves


def judgements(curves: Curves, methods: list[str]) -> list[Judgement]:
    """The sample-efficiency claim (``methods[1]`` over ``methods[0]``) on each task where both
    have their smallest-fraction and whole-data points on the same numbers of examples."""
    if len(methods) < 2:
        return []
    base, ctx = methods[0], methods[1]
    out = []
    for task, by_method in curves.points.items():
        b, c = by_method.get(base, []), by_method.get(ctx, [])
        if len(b) < 2 or len(c) < 2:
            continue
        small, full = b[0].train_examples, b[-1].train_examples
        if (small, full) != (c[0].train_examples, c[-1].train_examples):
            continue
        difference = contrast(curves.statistic[task], [(1.0, c[0].runs), (-1.0, b[0].runs),
                                                       (-1.0, c[-1].runs), (1.0, b[-1].runs)])
        claim = Claim(f"({ctx} − {base}) @ {small} ex.", f"({ctx} − {base}) @ {full} ex.",
                      f"the gain of {ctx} over {base} is larger with little task data "
                      f"(sample efficiency)", SOURCE)
        out.append(Judgement(claim, task, difference, verdict(difference)))
    return out


@plots.default_style
def figure(curves: Curves) -> Figure | None:
    """One panel per task: metric (%) against training examples (log x), CI bars, a line per
    method."""
    tasks = sorted(curves.points)
    if not tasks:
        return None
    fig, axes = plots.new_figure(len(tasks), extra_width=1.4)
    for ax, task in zip(axes, tasks):
        for method, pts in curves.points[task].items():
            plots.interval_line(ax, [p.train_examples for p in pts], [p.interval for p in pts],
                                curves.scale[task], label=method)
        ax.set_xscale("log")
        ax.set(title=task, xlabel="training examples", ylabel="score (%)")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def section(inputs: ReportInputs, curves: Curves, figures: dict) -> str:
    parts = ["## Sample efficiency (learning curves)", "",
             "Each method retrained on nested fractions of the training examples (the dev and "
             "evaluation examples unchanged); the largest point is the grid's cell. Scores are "
             "seed means with 95 % bootstrap CIs. The claim row in the claims table compares "
             "the gain at the smallest fraction with the gain on all the data."]
    if not curves.points:
        if not inputs.curve.get("tasks"):
            return "\n".join(parts + ["", "_Not run: `learning_curve.tasks` is empty in this "
                                          "profile._"])
        return "\n".join(parts + ["", "_Not run yet: the learning_curve stages' outputs, or "
                                      "the grid cells they extend, are missing._"])
    rows = [[task, method, f"{p.train_examples:,}",
             f"{p.interval.estimate * curves.scale[task]:.1f}",
             format_ci(p.interval, curves.scale[task])]
            for task in sorted(curves.points)
            for method, pts in curves.points[task].items() for p in pts]
    parts += ["", markdown_table(["task", "method", "training examples", "score", "95 % CI"],
                                 rows)]
    fig = figure(curves)
    if fig is not None:
        figures[FIGURE] = fig
        parts += ["", f"![learning curves](figures/{FIGURE})"]
    return "\n".join(parts)
