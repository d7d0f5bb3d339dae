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

from matplotlib.figure import Figure

from ctxrep.analysis.bootstrap import STATISTIC, Interval, bootstrap_mean, contrast, example_stats
from ctxrep.analysis.claims import Claim, Judgement, verdict
from ctxrep.report import plots
from ctxrep.report.inputs import CurvePoint, ReportInputs
from ctxrep.report.tables import markdown_table, percent_scale

SOURCE = "ELMo §5.4, Fig. 1 (seed 004)"
FIGURE = "learning_curves.png"


def points(inputs: ReportInputs, task: str, method: str) -> list[CurvePoint]:
    """The method's points on ``task``, fewest training examples first; the grid cell last."""
    out = list(inputs.learning_curves.get(task, {}).get(method, []))
    cell = inputs.transfer.get(task, {}).get(method)
    full = inputs.predictions.get(task, {}).get(method)
    if cell is not None and full and cell.train_examples:
        out.append(CurvePoint(cell.train_examples, full))
    return sorted(out, key=lambda p: p.train_examples)


def _statistic(inputs: ReportInputs, task: str) -> tuple[str, float] | None:
    """(bootstrap statistic, percent scale) of the task's primary metric."""
    for cell in inputs.transfer.get(task, {}).values():
        statistic = STATISTIC.get((cell.metric, cell.primary))
        return (statistic, percent_scale(cell.metric)) if statistic else None
    return None


def _stats(statistic: str, point: CurvePoint) -> list:
    return [example_stats(statistic, p.predictions, p.references) for p in point.predictions]


def curve_intervals(inputs: ReportInputs) -> dict[str, dict[str, list[tuple[int, Interval]]]]:
    """task -> method -> [(training examples, seed-mean metric with CI)]."""
    out: dict = {}
    for task in inputs.learning_curves:
        found = _statistic(inputs, task)
        if found is None:
            continue
        for method in inputs.curve.get("methods", []):
            pts = points(inputs, task, method)
            if pts:
                out.setdefault(task, {})[method] = [
                    (p.train_examples, bootstrap_mean(found[0], _stats(found[0], p)))
                    for p in pts]
    return out


def judgements(inputs: ReportInputs) -> list[Judgement]:
    """The sample-efficiency claim on each task where both methods have their smallest-fraction
    and whole-data points on the same examples."""
    methods = inputs.curve.get("methods", [])
    if len(methods) < 2:
        return []
    base, ctx = methods[0], methods[1]
    out = []
    for task in inputs.learning_curves:
        found = _statistic(inputs, task)
        b, c = points(inputs, task, base), points(inputs, task, ctx)
        if found is None or len(b) < 2 or len(c) < 2:
            continue
        if (b[0].train_examples, b[-1].train_examples) != (c[0].train_examples,
                                                           c[-1].train_examples):
            continue
        statistic = found[0]
        small, full = b[0].train_examples, b[-1].train_examples
        difference = contrast(statistic, [(1.0, _stats(statistic, c[0])),
                                          (-1.0, _stats(statistic, b[0])),
                                          (-1.0, _stats(statistic, c[-1])),
                                          (1.0, _stats(statistic, b[-1]))])
        claim = Claim(f"({ctx} − {base}) @ {small} ex.", f"({ctx} − {base}) @ {full} ex.",
                      f"the gain of {ctx} over {base} is larger with little task data "
                      f"(sample efficiency)", SOURCE)
        out.append(Judgement(claim, task, difference, verdict(difference)))
    return out


@plots.default_style
def figure(intervals: dict, scales: dict[str, float]) -> Figure | None:
    """One panel per task: metric (%) against training examples (log x), CI bars, a line per
    method."""
    tasks = sorted(intervals)
    if not tasks:
        return None
    fig, axes = plots.new_figure(len(tasks), extra_width=1.4)
    for ax, task in zip(axes, tasks):
        scale = scales[task]
        for method, pts in intervals[task].items():
            xs = [n for n, _ in pts]
            ys = [i.estimate * scale for _, i in pts]
            err = [[(i.estimate - i.low) * scale for _, i in pts],
                   [(i.high - i.estimate) * scale for _, i in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1, label=method)
        ax.set_xscale("log")
        ax.set(title=task, xlabel="training examples", ylabel="score (%)")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def section(inputs: ReportInputs, figures: dict) -> str:
    parts = ["## Sample efficiency (learning curves)", "",
             "Each method retrained on nested fractions of the training examples (the dev and "
             "evaluation examples unchanged); the largest point is the grid's cell. Scores are "
             "seed means with 95 % bootstrap CIs. The claim row in the claims table compares "
             "the gain at the smallest fraction with the gain on all the data."]
    intervals = curve_intervals(inputs)
    if not intervals:
        if not inputs.curve.get("tasks"):
            return "\n".join(parts + ["", "_Not run: `learning_curve.tasks` is empty in this "
                                          "profile._"])
        return "\n".join(parts + ["", "_Not run yet: the learning_curve stages' outputs, or "
                                      "the grid cells they extend, are missing._"])
    scales = {t: _statistic(inputs, t)[1] for t in intervals}
    rows = []
    for task in sorted(intervals):
        for method, pts in intervals[task].items():
            for n, i in pts:
                s = scales[task]
                rows.append([task, method, f"{n:,}", f"{i.estimate * s:.1f}",
                             f"[{i.low * s:.1f}, {i.high * s:.1f}]"])
    parts += ["", markdown_table(["task", "method", "training examples", "score", "95 % CI"],
                                 rows)]
    fig = figure(intervals, scales)
    if fig is not None:
        figures[FIGURE] = fig
        parts += ["", f"![learning curves](figures/{FIGURE})"]
    return "\n".join(parts)
