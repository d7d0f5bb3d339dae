"""Pretraining recipes compared by time to perplexity: held-out perplexity against training
seconds, not against steps (a recipe with twice the steps per second may win at equal steps and
lose at equal time, or the reverse).

Queue one experiment per recipe, running only the pretraining stage, then collect them:

    dvc exp run --queue pretrain_bilm -n bilm-recipe-base
    dvc exp run --queue pretrain_bilm -S pretrain_bilm.lr=0.005 -n bilm-recipe-lr5e-3
    dvc exp run --run-all                  # one after another: each timing has the machine
    ctxrep recipes --model bilm --experiments 'bilm-recipe-*' --target 190

Each experiment's pretraining stage logged to its MLflow run (tagged with the experiment's name)
every held-out evaluation's metrics and the training seconds before it (evaluation time
excluded), and its tokens per second: wall-clock numbers, which DVC does not record. An
experiment whose pretraining DVC restored from its cache, not run, has no timing and is left
out. This module writes
``reports/recipes.md`` (per recipe: the params that differ from the ``--reference`` one, tokens/s,
the first evaluation at or below ``--target`` and the final perplexity) and
``reports/recipes.png`` (perplexity against training seconds, one line per recipe).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ctxrep.families import CORE, NAMES, family
from ctxrep.io import atomic_file
from ctxrep.report import plots
from ctxrep.report.tables import markdown_table
from ctxrep.sweep import exp_show_json, experiment_revs
from ctxrep.tracking import flatten

# The families every profile pretrains in a stage of their own (pretrain_<model>)
METRIC = {name: CORE[name].recipe_metric for name in NAMES}


@dataclass(frozen=True)
class Recipe:
    experiment: str
    params: dict             # the model's pretraining section, flattened
    tokens_per_s: float
    curve: list[tuple[int, float, float]]   # (step, train seconds, metric)

    def first_at(self, target: float, lower_is_better: bool) -> tuple[int, float] | None:
        """(step, seconds) of the first evaluation at or past ``target``."""
        for step, seconds, value in self.curve:
            if (value <= target) if lower_is_better else (value >= target):
                return step, seconds
        return None


def timed_curve_from_mlflow(experiment: str, model: str) -> dict | None:
    """``{"tokens_per_s", "heldout_curve": [{"step", "train_s", <metric>}, ...]}`` of the newest
    finished ``pretrain_<model>`` run of DVC experiment ``experiment``, or None."""
    import mlflow

    from ctxrep.tracking import tracking_uri

    client = mlflow.MlflowClient(tracking_uri())
    ids = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(ids, max_results=1, order_by=["attributes.start_time DESC"],
                              filter_string=(f"tags.dvc_exp_name = '{experiment}' and "
                                             f"tags.stage = 'pretrain_{model}' and "
                                             "attributes.status = 'FINISHED'"))
    if not runs:
        return None
    run, metric = runs[0], METRIC[model]
    seconds = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "train_s")}
    values = {m.step: m.value for m in client.get_metric_history(run.info.run_id, metric)}
    return {"tokens_per_s": run.data.metrics.get("tokens_per_s", 0.0),
            "heldout_curve": [{"step": step, "train_s": seconds[step], metric: values[step]}
                              for step in sorted(values.keys() & seconds.keys())]}


def recipes(show: list, model: str, names: str = "*",
            timed: Callable[[str, str], dict | None] | None = None) -> list[Recipe]:
    """Every finished experiment named like ``names`` with a timed held-out curve
    (``timed(experiment, model)``, by default from MLflow); the others are skipped."""
    metric, out, timed = METRIC[model], [], timed or timed_curve_from_mlflow
    for name, _rev, data in experiment_revs(show):
        if not fnmatch.fnmatchcase(name, names):
            continue
        found = timed(name, model)
        points = [(int(p["step"]), float(p["train_s"]), float(p[metric]))
                  for p in (found or {}).get("heldout_curve") or [] if metric in p]
        if not points:
            continue
        section = ((data.get("params") or {}).get("params.yaml") or {}).get("data") or {}
        out.append(Recipe(name, flatten(section.get(f"pretrain_{model}") or {}),
                          float(found.get("tokens_per_s") or 0.0), points))
    return out


# Keys that change when and how often a run reports, not what it trains.
BOOKKEEPING = ("eval_every", "checkpoint_every", "log_every")


def changed(recipe: Recipe, reference: Recipe) -> str:
    keys = sorted(k for k in recipe.params.keys() | reference.params.keys()
                  if recipe.params.get(k) != reference.params.get(k) and k not in BOOKKEEPING)
    return ", ".join(f"{k}={recipe.params.get(k)}" for k in keys) or "(reference)"


def with_reference_first(found: list[Recipe], reference: str | None) -> list[Recipe]:
    """The recipes in name order, the one named ``reference`` (default: the first) first."""
    found = sorted(found, key=lambda r: r.experiment)
    chosen = [r for r in found if r.experiment == reference]
    if reference is not None and not chosen:
        raise SystemExit(f"--reference {reference!r}: no timed experiment of that name "
                         f"(found: {', '.join(r.experiment for r in found) or 'none'})")
    return chosen + [r for r in found if r not in chosen]


def table(found: list[Recipe], model: str, target: float) -> str:
    metric, lower = METRIC[model], family(model).recipe_lower_is_better
    head = f"# Pretraining recipes: {metric} against training seconds\n\n"
    if not found:
        return head + ("_No experiment has a timed held-out curve: run the queued experiments "
                       "first (see `ctxrep recipes --help`)._\n")
    rows = []
    for r in found:
        hit = r.first_at(target, lower)
        final_step, final_s, final = r.curve[-1]
        rows.append([r.experiment, changed(r, found[0]), f"{r.tokens_per_s:,.0f}",
                     "not reached" if hit is None else f"{hit[1]:,.0f} s (step {hit[0]:,})",
                     f"{final:.1f}", f"{final_s:,.0f} s ({final_step:,} steps)"])
    sign = "≤" if lower else "≥"
    return head + markdown_table(
        ["experiment", f"params (vs {found[0].experiment})", "tokens/s", f"first {metric} {sign} {target:g}",
         f"final {metric}", "training time"], rows) + "\n"


@plots.default_style
def figure(found: list[Recipe], model: str, target: float) -> Figure | None:
    if not found:
        return None
    fig, (ax,) = plots.new_figure(1, extra_width=1.6)
    for r in found:
        ax.plot([s for _, s, _ in r.curve], [v for _, _, v in r.curve], marker="o",
                markersize=3, label=r.experiment)
    ax.axhline(target, color="black", linewidth=0.8, linestyle="--")
    if family(model).recipe_lower_is_better:  # the recipe metrics that fall are perplexities
        ax.set_yscale("log")
    ax.set(title=f"{model}: held-out {METRIC[model]} against training time",
           xlabel="training seconds (evaluation excluded)", ylabel=METRIC[model])
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--model", choices=sorted(METRIC), default=NAMES[0])
    parser.add_argument("--target", type=float, default=190.0,
                        help="the held-out value to reach (bilm: perplexity; bert: MLM accuracy)")
    parser.add_argument("--experiments", default="*", metavar="PATTERN",
                        help="only experiments whose name matches this shell pattern")
    parser.add_argument("--reference", metavar="NAME",
                        help="the experiment the others' params are compared with (default: the "
                             "first by name)")
    parser.add_argument("--show-json", type=Path,
                        help="read this `dvc exp show --json` output instead of running it")
    parser.add_argument("--out", type=Path, default=Path("reports"))


def run(args: argparse.Namespace) -> int:
    show = json.loads(args.show_json.read_text()) if args.show_json else exp_show_json()
    found = with_reference_first(recipes(show, args.model, args.experiments), args.reference)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out / "recipes.md") as f:
        f.write(table(found, args.model, args.target))
    fig = figure(found, args.model, args.target)
    if fig is not None:
        plots.save_png(fig, args.out / "recipes.png")
    print(f"{len(found)} recipe(s) → {args.out / 'recipes.md'}"
          + (f", {args.out / 'recipes.png'}" if fig else ""))
    return 0

