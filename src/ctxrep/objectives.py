"""Which pretraining objective transfers best per FLOP (issue 63): the biLM, BERT's masked LM
and a left-to-right LM, pretrained on one corpus at budgets given in FLOPs, each checkpoint
through the same transfer cells, and BERT's Table 5 judged at equal FLOPs, at equal predicted
tokens and at equal steps.

    make objectives                   # all of it; BUDGETS="3e12 1e13 3e13" by default:
    make repro PROFILE=objectives     #   every objective once: its ledger gives FLOPs/step
    ctxrep objectives run --budgets 3e12 1e13 3e13
                                      #   plan, dvc exp run --queue each experiment not yet
                                      #   finished, dvc exp run --run-all, collect
    ctxrep objectives plan --budgets 3e12   # only print the experiments (--queue: queue them)
    ctxrep objectives collect         # reports/objectives.md and objectives.png again

**The budget is the param; the steps follow from the ledger.** ``plan`` reads each objective's
FLOPs per step from the finished run in the workspace (``metrics/pretrain_<family>.json``:
``train_flops / steps``, the analytic count of :mod:`ctxrep.models` over the tokens the run
trained on) and queues, per budget B, one experiment per comparison basis of Table 5; each sets
every objective's ``steps`` (the effective value, in its params.yaml; to three significant
figures, or the workspace run's own where they are within a per cent of them), every budget's
``flops-B`` first:

    flops-B     every objective at B FLOPs
    tokens-B    the masked LM at B FLOPs; the left-to-right LM at as many predicted tokens
                (its steps = the masked LM's × mlm_prob: it predicts every position, the masked
                LM ``mlm_prob`` of them; padding aside)
    steps-B     the masked LM at B FLOPs; the left-to-right LM at as many steps (BERT's Table 5)

The biLM and the masked LM have the same params in the three, so DVC runs them (and their
cells) once per budget; a budget added later is one more set of experiments, and reruns nothing
of the others. ``collect`` reads ``dvc exp show --json`` (each experiment's params and claims)
and each experiment's ``metrics/summary.json`` (its cells' means and CIs, from git), and writes
the table (Table 5's claims per basis and budget, fine-tuning against frozen features along the
budget) and the figure (each objective's score against its pretraining FLOPs, CIs as bands,
beside the lookup table, the static vectors and the untrained networks; held-out LM quality
against FLOPs beside it).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ctxrep.analysis.bootstrap import Interval
from ctxrep.config.methods import (FEATURES_OF, FINETUNE_METHODS, FROM_SCRATCH, feature_method_of,
                                   left_to_right_family)
from ctxrep.errors import InputError
from ctxrep.families import (CLAIMS, CORE, METHODS, NAMES, STARTING_POINT_KEY, family as
                             family_record, section_of)
from ctxrep.io import atomic_file
from ctxrep.report import plots
from ctxrep.report.tables import markdown_table
from ctxrep.sweep import exp_show_json, experiment_revs

BASES = ("flops", "tokens", "steps")   # what a Table 5 comparison holds equal, by experiment name
BASIS_LABEL = {"flops": "equal FLOPs", "tokens": "equal predicted tokens", "steps": "equal steps"}
PROFILE = "objectives"


# --------------------------------------------------------------------------------------------
# plan: budgets → experiments


def table5_pairs() -> list[tuple[str, str]]:
    """(masked-LM family, left-to-right family) of each Table 5 claim on frozen features."""
    pairs = []
    for claim in CLAIMS:
        if (ltr := left_to_right_family(claim.worse)) is not None and claim.worse in FEATURES_OF:
            pairs.append((FEATURES_OF[claim.better], ltr))
    return list(dict.fromkeys(pairs))


def flops_per_step(metrics_dir: Path, names: list[str]) -> dict[str, float]:
    """family → training FLOPs per optimizer step, from a finished run's
    ``metrics/pretrain_<family>.json``; an InputError naming what is missing."""
    out = {}
    for name in names:
        path = metrics_dir / f"{section_of(name)}.json"
        if not path.is_file():
            raise InputError(f"{path}: missing: run `make repro PROFILE={PROFILE}` first (its "
                             f"ledger gives each objective's FLOPs per step)")
        data = json.loads(path.read_text())
        if not data.get("steps") or not data.get("train_flops"):
            raise InputError(f"{path}: no steps or train_flops (an imported model?)")
        out[name] = data["train_flops"] / data["steps"]
    return out


def budget_name(flops: float) -> str:
    """3e12 → "3e12" (an experiment name's part: no dot, no plus)."""
    mantissa, exponent = f"{flops:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa.replace('.', 'p')}e{int(exponent)}"


@dataclass(frozen=True)
class Experiment:
    name: str
    basis: str
    budget: float
    steps: dict[str, int]     # family → steps

    def overrides(self, fixed: list[str] = ()) -> list[str]:
        """``-S`` values: the profile and ``fixed`` (what every experiment keeps of the profile's
        run), then each objective's steps and its held-out evaluation and checkpoint interval
        (four evaluations per run)."""
        out = [f"profile={PROFILE}", *fixed]
        for name, steps in self.steps.items():
            every = max(1, math.ceil(steps / 4))
            out += [f"{section_of(name)}.steps={steps}", f"{section_of(name)}.eval_every={every}",
                    f"{section_of(name)}.checkpoint_every={every}"]
        return out


def round_steps(steps: float) -> int:
    """Steps to three significant figures (at least 1): a plan of round numbers, which a ledger
    read again after a run of another length (its FLOPs per step differ in the third or fourth
    digit: the batches' sentences differ) mostly plans again to the same steps, so that DVC's run
    cache has them; :func:`plan` keeps the workspace run's own."""
    if steps < 1:
        return 1
    return int(round(steps, 2 - math.floor(math.log10(steps))))


# How far a ledger's FLOPs per step move with the run's length (the batches' sentence lengths
# differ): 0.6 % for the biLM and 0.5 % for the masked LM between 1,060 / 2,300 and 1,800 /
# 1,000 steps (docs/notebook/2026-12-07-objectives-one-command-and-report-parts.md).
LEDGER_SPREAD = 0.01


def plan(budgets: list[float], per_step: dict[str, float], mlm_prob: dict[str, float],
         workspace: dict[str, int] | None = None) -> list[Experiment]:
    """The experiments of ``budgets``: ``flops-B`` (every objective at B) for each budget first,
    the figure's points; then, for each Table 5 pair whose families both run, ``tokens-B`` and
    ``steps-B`` of each budget. A budget whose steps are all within :data:`LEDGER_SPREAD` of the
    ``workspace`` run's (family → steps: the run whose ledger gave ``per_step``) is that run:
    its steps are kept, so that DVC's run cache has ``flops-B`` already."""
    flops, others = [], []
    for budget in budgets:
        at_budget = {name: round_steps(budget / fps) for name, fps in per_step.items()}
        if workspace and all(name in workspace and abs(steps - workspace[name])
                             <= LEDGER_SPREAD * workspace[name]
                             for name, steps in at_budget.items()):
            at_budget = {name: workspace[name] for name in at_budget}
        flops.append(Experiment(f"flops-{budget_name(budget)}", "flops", budget, at_budget))
        for masked, ltr in table5_pairs():
            if masked not in per_step or ltr not in per_step:
                continue
            for basis, steps in (("tokens", at_budget[masked] * mlm_prob[masked]),
                                 ("steps", at_budget[masked])):
                others.append(Experiment(f"{basis}-{budget_name(budget)}", basis, budget,
                                         {**at_budget, ltr: round_steps(steps)}))
    return flops + others


def _positive_flops(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of FLOPs > 0, e.g. 3e12")
    return value


# --------------------------------------------------------------------------------------------
# collect: experiments → points, claims, figure


@dataclass(frozen=True)
class Point:
    experiment: str
    basis: str
    family: str
    method: str
    task: str
    flops: float
    score: Interval           # the cell's mean and 95 % CI (fractions)


def _params(data: dict) -> dict:
    entry = (data.get("params") or {}).get("params.yaml") or {}
    return entry.get("data") or {}


def _metric(data: dict, path: str) -> dict:
    entry = (data.get("metrics") or {}).get(path)
    return (entry.get("data") if isinstance(entry, dict) else None) or {}


def experiment_basis(name: str) -> str | None:
    basis = name.split("-", 1)[0]
    return basis if basis in BASES and "-" in name else None


def summary_at(rev: str) -> dict:
    """An experiment's ``metrics/summary.json`` (git-tracked), or {} where it has none."""
    proc = subprocess.run(["git", "show", f"{rev}:metrics/summary.json"], capture_output=True,
                          text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def objective_methods(params: dict) -> dict[str, str]:
    """method → the objective family it transfers: each family's learned-mix features, and each
    fine-tuned method that starts from a family this run pretrains."""
    names = [*NAMES, *(params.get("left_to_right") or [])]
    out = {m: name for name in names if (m := feature_method_of(name)) is not None}
    for method in FINETUNE_METHODS:
        start = ((params.get("transfer") or {}).get(method) or {}).get(STARTING_POINT_KEY)
        for name in names:
            if start == section_of(name) and method not in FROM_SCRATCH:
                out[method] = name
    return out


# What every budget is drawn beside: the static vectors alone and the untrained networks (the
# same cells in every experiment), and the task's lookup table.
REFERENCE_METHODS = tuple(m.name for m in METHODS.values()
                          if not m.fine_tuned and (m.features is None or m.untrained))
REFERENCE_BASELINE = "lookup"


def points(show: list, per_step: dict[str, float], summaries=None
           ) -> tuple[list[Point], dict[str, dict[str, float]]]:
    """Every objective cell of every ``flops-``/``tokens-``/``steps-`` experiment, at the FLOPs
    its objective's pretraining took (its steps × the ledger's FLOPs per step); and per task
    the references' means (:data:`REFERENCE_METHODS`, the lookup table)."""
    out, references = [], {}
    for name, rev, data in experiment_revs(show):
        basis = experiment_basis(name)
        if basis is None:
            continue
        params = _params(data)
        summary = (summaries or summary_at)(rev)
        cells = summary.get("cells") or {}
        for task, by_method in cells.items():
            found = {m: by_method[m]["mean"] for m in REFERENCE_METHODS if m in by_method}
            if REFERENCE_BASELINE in (summary.get("baselines") or {}).get(task, {}):
                found[REFERENCE_BASELINE] = summary["baselines"][task][REFERENCE_BASELINE]
            references.setdefault(task, {}).update(found)
        for method, fam in objective_methods(params).items():
            steps = (params.get(section_of(fam)) or {}).get("steps")
            if steps is None or fam not in per_step:
                continue
            for task, by_method in cells.items():
                if method in by_method:
                    c = by_method[method]
                    out.append(Point(name, basis, fam, method, task, steps * per_step[fam],
                                     Interval(c["mean"], *c["ci95"])))
    return out, references


@dataclass(frozen=True)
class LMPoint:
    family: str
    flops: float
    steps: int
    experiments: tuple[str, ...]   # every experiment that trained this objective at these steps
    quality: dict[str, float]      # its family's held-out headlines (metrics/pretrain_<f>.json)


def read_output(path: str, rev: str) -> dict:
    """A DVC output (``metrics/pretrain_<family>.json`` is one: statistics, not git-tracked) at
    an experiment's revision, from the cache; {} where it has none."""
    import dvc.api

    try:
        return json.loads(dvc.api.read(path, repo=".", rev=rev))
    except Exception:   # noqa: BLE001 -- not run there, or not in this cache: not drawn
        return {}


def lm_points(show: list, per_step: dict[str, float], read=read_output) -> list[LMPoint]:
    """Each objective's held-out LM quality at each pretraining budget it ran at: its family's
    headlines but the token count (the biLM's perplexity, the masked LM's masked-token
    accuracy, the left-to-right LM's perplexity and accuracy), once per (objective, steps)."""
    found: dict[tuple[str, int], LMPoint] = {}
    for name, rev, data in experiment_revs(show):
        if experiment_basis(name) is None:
            continue
        params = _params(data)
        for family in [*NAMES, *(params.get("left_to_right") or [])]:
            steps = (params.get(section_of(family)) or {}).get("steps")
            if family not in per_step or steps is None:
                continue
            if (family, steps) in found:
                seen = found[(family, steps)]
                found[(family, steps)] = LMPoint(family, seen.flops, steps,
                                                 (*seen.experiments, name), seen.quality)
                continue
            metrics = read(f"metrics/{section_of(family)}.json", rev)
            keys = [k for k in family_record(family).headlines if k != "train_tokens"]
            quality = {k: float(metrics[k]) for k in keys if isinstance(metrics.get(k), (int, float))}
            if quality:
                found[(family, steps)] = LMPoint(family, steps * per_step[family], steps, (name,),
                                                 quality)
    return sorted(found.values(), key=lambda p: (p.family, p.flops))


def lm_table(lm: list[LMPoint]) -> str:
    if not lm:
        return ""
    return ("\n## Held-out LM quality against pretraining FLOPs\n\n"
            "Each objective on its own held-out split of the corpus, in its own measure (a "
            "perplexity is per word for the biLM and per sub-word for the left-to-right LM; the "
            "masked LM's accuracy is on masked positions): each line compares budgets, not "
            "objectives.\n\n" + markdown_table(
                ["objective", "steps", "pretraining FLOPs", "held-out", "experiments"],
                [[family_record(p.family).label, f"{p.steps:,}", f"{p.flops:.2e}",
                  ", ".join(f"{k} {v:.4g}" for k, v in p.quality.items()),
                  ", ".join(p.experiments)] for p in lm]) + "\n")


@plots.default_style
def lm_figure(lm: list[LMPoint]) -> Figure | None:
    """One panel per objective: its first held-out headline against its pretraining FLOPs."""
    families = list(dict.fromkeys(p.family for p in lm))
    if not families:
        return None
    fig, axes = plots.new_figure(len(families))
    for ax, family in zip(axes, families):
        line = [p for p in lm if p.family == family]
        metric = next(iter(line[0].quality))
        xs, ys = zip(*((p.flops, p.quality[metric]) for p in line if metric in p.quality))
        ax.plot(xs, ys, marker="o", linewidth=1)
        ax.set_xscale("log")
        if "ppl" in metric:
            ax.set_yscale("log")
        ax.set(title=family_record(family).label, xlabel="pretraining FLOPs",
               ylabel=f"held-out {metric}")
        ax.grid(alpha=0.3)
    return fig


@dataclass(frozen=True)
class Row:
    basis: str
    experiment: str
    task: str
    better: str
    worse: str
    flops: tuple[float, float]        # each side's pretraining FLOPs
    delta: Interval

    @property
    def verdict(self) -> str:
        d = self.delta
        return "reproduced" if d.low > 0 else "contradicted" if d.high < 0 else "inconclusive"


def claim_rows(show: list, per_step: dict[str, float]) -> list[Row]:
    """Table 5's claims (masked LM − left-to-right LM, frozen and fine-tuned) and BERT's Table 7
    (fine-tuning − frozen features) as each experiment's claims.json judged them."""
    wanted = [c for c in CLAIMS if left_to_right_family(c.worse) is not None
              or (c.better in FINETUNE_METHODS and FEATURES_OF.get(c.worse) in CORE)]
    rows = []
    for name, _, data in experiment_revs(show):
        basis = experiment_basis(name)
        if basis is None:
            continue
        params, judged = _params(data), _metric(data, "metrics/claims.json")
        owner = objective_methods(params)
        for claim in wanted:
            for task, c in sorted((judged.get(f"{claim.better}_vs_{claim.worse}") or {}).items()):
                sides = [owner.get(m) for m in (claim.better, claim.worse)]
                flops = tuple((params.get(section_of(f)) or {}).get("steps", 0) * per_step.get(f, 0)
                              if f else 0.0 for f in sides)
                rows.append(Row(basis, name, task, claim.better, claim.worse, flops,
                                Interval(c["delta"], c["low"], c["high"])))
    return sorted(rows, key=lambda r: (BASES.index(r.basis), r.better, r.worse, r.task, r.flops))


def table(rows: list[Row], pts: list[Point]) -> str:
    head = "# Objectives per FLOP: BERT's Table 5 at equal compute\n\n"
    if not rows and not pts:
        return head + ("_No `flops-`, `tokens-` or `steps-` experiment has finished: see "
                       "`ctxrep objectives --help`._\n")
    claim_table = markdown_table(
        ["compared at", "experiment", "task", "comparison", "pretraining FLOPs (each side)",
         "Δ [95 % CI]", "verdict"],
        [[BASIS_LABEL[r.basis], r.experiment, r.task, f"`{r.better}` − `{r.worse}`",
          " / ".join(f"{f:.2e}" for f in r.flops),
          f"{100 * r.delta.estimate:+.1f} [{100 * r.delta.low:+.1f}, {100 * r.delta.high:+.1f}]",
          f"**{r.verdict}**"] for r in rows])
    score_table = markdown_table(
        ["task", "method", "objective", "pretraining FLOPs", "experiment", "score [95 % CI]"],
        [[p.task, f"`{p.method}`", family_record(p.family).label,
          f"{p.flops:.2e}", p.experiment,
          f"{100 * p.score.estimate:.1f} [{100 * p.score.low:.1f}, {100 * p.score.high:.1f}]"]
         for p in sorted(pts, key=lambda p: (p.task, p.method, p.flops, p.experiment))])
    return (head + "Each verdict rests on the comparison its row names: the experiment holds "
            "the two sides' pretraining FLOPs, predicted tokens or steps equal (Δ in points, a "
            "paired bootstrap over the evaluation examples and seeds).\n\n" + claim_table
            + "\n\n## Every objective's cells\n\n" + score_table + "\n")


@plots.default_style
def figure(pts: list[Point], references: dict[str, dict[str, float]]) -> Figure | None:
    # task → method → FLOPs → point: one point per FLOPs value (an objective's budget recurs
    # across the three bases)
    lines: dict[str, dict[str, dict[float, Point]]] = {}
    for p in pts:
        lines.setdefault(p.task, {}).setdefault(p.method, {})[p.flops] = p
    if not lines:
        return None
    fig, axes = plots.new_figure(len(lines), extra_width=1.6)
    for ax, (task, methods) in zip(axes, sorted(lines.items())):
        for method, line in sorted(methods.items()):
            xs = sorted(line)
            plots.interval_line(ax, xs, [line[x].score for x in xs], 100.0, label=method)
        for k, (label, value) in enumerate(sorted(references.get(task, {}).items())):
            ax.axhline(100 * value, color="gray", linestyle=("dashed", "dotted", "dashdot")[k % 3],
                       linewidth=1, label=label)
        ax.set_xscale("log")
        ax.set(title=task, xlabel="pretraining FLOPs", ylabel="score (%, 95 % CI)")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


# --------------------------------------------------------------------------------------------
# the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("action", choices=("plan", "run", "collect"),
                        help="plan: print (--queue: queue) the experiments of --budgets; "
                             "run: queue those not yet finished, run them (dvc exp run "
                             "--run-all), then collect; "
                             "collect: write reports/objectives.md and objectives.png")
    parser.add_argument("--budgets", type=_positive_flops, nargs="+",
                        help="plan, run: pretraining FLOPs per objective, e.g. 3e12 1e13 3e13")
    parser.add_argument("--queue", action="store_true", help="plan: dvc exp run --queue each one")
    parser.add_argument("--metrics", type=Path, default=Path("metrics"),
                        help="the finished run whose ledger gives each objective's FLOPs per step")
    parser.add_argument("--show-json", type=Path,
                        help="collect: read this `dvc exp show --json` output instead of running it")
    parser.add_argument("--out", type=Path, default=Path("reports"))


def _workspace_params(params_file: Path = Path("params.yaml")) -> dict:
    import yaml

    return (yaml.safe_load(params_file.read_text()) if params_file.is_file() else None) or {}


def _collect(args: argparse.Namespace, per_step: dict[str, float]) -> None:
    show = json.loads(args.show_json.read_text()) if args.show_json else exp_show_json()
    rows, (pts, references) = claim_rows(show, per_step), points(show, per_step)
    lm = lm_points(show, per_step)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_file(args.out / "objectives.md") as f:
        f.write(table(rows, pts) + lm_table(lm))
    for name, fig in (("objectives.png", figure(pts, references)),
                      ("objectives_lm.png", lm_figure(lm))):
        if fig is not None:
            plots.save_png(fig, args.out / name)
    print(f"{len(rows)} claim rows, {len(pts)} cells → {args.out / 'objectives.md'}")


def _dvc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "dvc", *args], check=True)  # this environment's DVC


def run(args: argparse.Namespace) -> int:
    if args.action in ("plan", "run") and not args.budgets:
        raise InputError(f"{args.action}: --budgets is required (pretraining FLOPs, e.g. "
                         f"3e12 1e13 3e13)")
    params = _workspace_params()
    names = [*NAMES, *(params.get("left_to_right") or [])]   # the objectives this run trains
    per_step = flops_per_step(args.metrics, names)
    if args.action == "collect":
        _collect(args, per_step)
        return 0
    mlm_prob = {n: (params.get(section_of(n)) or {}).get("mlm_prob", 1.0) for n in names}
    # `run` again with one more budget: what finished is not queued again (DVC would refuse
    # its name), and the new experiments find what they share with it in the run cache
    finished = {name for name, _, _ in experiment_revs(exp_show_json())} \
        if args.action == "run" else set()
    workspace = {n: steps for n in names
                 if (steps := (params.get(section_of(n)) or {}).get("steps")) is not None}
    # The profile's run resolved its compute mode (`make repro` writes the effective value,
    # `compute.isa=auto` → native or avx2): every experiment runs in that mode, so that params.yaml
    # records what ran and DVC's run cache has what the experiments share with that run.
    isa = (params.get("compute") or {}).get("isa")
    fixed = [f"compute.isa={isa}"] if isa else []
    for experiment in plan(args.budgets, per_step, mlm_prob, workspace):
        queue = ["exp", "run", "--queue", "-n", experiment.name,
                 *(a for o in experiment.overrides(fixed) for a in ("-S", o))]
        if experiment.name in finished:
            print(f"{experiment.name}: finished, not queued again")
            continue
        print("dvc " + " ".join(queue))
        if args.queue or args.action == "run":
            _dvc(*queue)
    if args.action == "run":
        _dvc("exp", "run", "--run-all")   # one after another: two cores, one experiment
        _collect(args, per_step)
    return 0
