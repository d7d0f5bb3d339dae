"""Assemble the report: ``metrics/summary.json``, ``reports/report.md``, ``reports/figures/*.png``.

:func:`build_report` is pure (inputs → text, summary and figures); :func:`write_report` puts
them on disk atomically. Every sentence that judges a result is generated from the numbers
(:mod:`ctxrep.report.findings`); nothing here knows the outcome in advance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from ctxrep.io import atomic_dir, atomic_file, write_json
from ctxrep.report import evidence as ev
from ctxrep.report import findings, plots
from ctxrep.report import learning_curves as lc
from ctxrep.report.formatting import figure_link, fmt_int, fmt_int_range, fmt_seconds, missing_file
from ctxrep.report.inputs import ComputeEntry, ReportInputs, ledger_stages
from ctxrep.report import parts as family_parts
from ctxrep.report.provenance import data_section
from ctxrep.families import PROBED, PUBLISHED_MODELS, TABLES
from ctxrep.report.summary import claim_metrics, headline, summarise
from ctxrep.transfer.record import CellRecord
from ctxrep.report.tables import MISSING, markdown_table, published_sources, results_table

SUMMARY_PATH = Path("metrics/summary.json")
HEADLINE_PATH = Path("metrics/headline.json")     # the DVC metric: one number per cell
CLAIMS_PATH = Path("metrics/claims.json")         # the DVC metric: Δ and CI per claim
REPORT_PATH = Path("reports/report.md")
# Every cell's dev curve in one long table (a DVC plot, one chart for any grid: see dvc.yaml)
TRANSFER_CURVES_PATH = Path("reports/transfer_curves.tsv")
FIGURES_DIR = Path("reports/figures")


@dataclass
class Report:
    summary: dict
    markdown: str                  # the same bytes for the same results
    figures: dict[str, Figure]     # file name under reports/figures/ -> figure
    transfer_curves: str = ""      # TSV: every cell's per-epoch curves (transfer_curve_table)


# --------------------------------------------------------------------------------------------
# sections


def scale_section(inputs: ReportInputs) -> str:
    """The published models' scale beside ours, one line each."""
    return "\n".join([
        "## Scale: the papers vs this run", "", *family_parts.scale_lines(inputs),
        "",
        "Published numbers come from models and corpora orders of magnitude larger and from the "
        "papers' own task architectures and test sets; they show the direction of each effect, "
        "not a target for these absolute scores.",
    ])


def weights_section(inputs: ReportInputs) -> str:
    """Which weights each model of this run has: trained here on which data, or imported from
    which files (folder, origin URL when DVC imported them, sha256)."""
    lines = ["## Weights", ""]
    for model, label in family_parts.weights():
        record = inputs.weights.get(model)
        if record is None and model in PUBLISHED_MODELS.values():
            continue  # a run from before the stage existed
        if record is None:
            lines.append(f"- {label}: " + missing_file(f"reports/weights/{model}.json"))
        elif record["source"] == "train":
            lines.append(f"- {label}: trained by this pipeline on `{record['path']}`.")
        else:
            lines.append(f"- {label}: **published weights**, imported from `{record['path']}`:")
            if (package := record.get("package")) is not None:
                lines.append(f"  - installed from the package index: `{package['distribution']}"
                             f"=={package['version']}`, wheel sha256 `{package['wheel_sha256']}`, "
                             f"files from `{package['folder']}`; {package['licence']}")
            for f in record["files"]:
                origin = f" from <{f['origin']}>" if f.get("origin") else " (a local file)"
                lines.append(f"  - `{f['name']}`{origin}, {fmt_int(f['bytes'])} bytes, "
                             f"sha256 `{f['sha256']}`")
    return "\n".join(lines)


def ledger_section(inputs: ReportInputs, wall_s: dict[str, float] | None = None) -> str:
    """One row per stage (transfer: per method, summed over its tasks and seeds), then a total.
    ``wall_s`` (stage -> seconds, from ``reports/timings/``) adds a wall-time column: ``ctxrep
    timings``; report.md has none, so it is the same bytes for the same results.

    FLOPs are estimates: training 6 x weights x tokens (the models' own analytic counts for
    pretraining and BERT), forward only for extract; tokenize does no model arithmetic."""
    groups: dict[str, list[tuple[str, ComputeEntry]]] = {}
    for name, row in ledger_stages(inputs.tasks, inputs.methods, inputs.curve):
        if name in inputs.compute:
            groups.setdefault(row, []).append((name, inputs.compute[name]))
    if not groups:
        return "## Compute ledger\n\n_No stage has recorded its cost yet._"

    def seconds(stages: list[str]) -> str:
        known = [wall_s[s] for s in stages if s in wall_s]
        return fmt_seconds(sum(known)) if len(known) == len(stages) else MISSING

    rows = []
    for label, named in groups.items():
        entries = [e for _, e in named]
        units = " + ".join(sorted({e.unit for e in entries}))
        flops = [e.flops for e in entries if e.flops is not None]
        rows.append([label if len(entries) == 1 else f"{label} ({len(entries)} tasks)",
                     f"{sum(e.amount for e in entries):,} {units}",
                     fmt_int_range([e.params for e in entries if e.params is not None]),
                     f"{sum(flops):.2e}" if flops else MISSING]
                    + ([seconds([n for n, _ in named])] if wall_s is not None else []))
    every = [e for named in groups.values() for _, e in named]
    rows.append(["**total**", "", "", f"{sum(e.flops for e in every if e.flops is not None):.2e}"]
                + ([seconds([n for named in groups.values() for n, _ in named])]
                   if wall_s is not None else []))
    header = ["stage", "data processed", "parameters", "est. FLOPs"]
    if wall_s is not None:
        header.append("wall time")
        where = ("Wall time is each stage's last run in this workspace (loading, training, "
                 "evaluation), from `reports/timings/`; — where a stage has not run here (DVC "
                 "restored it from its cache).")
    else:
        where = ("Wall times differ from run to run, so DVC does not record them: `ctxrep "
                 "timings` prints them, and each stage's MLflow run has its own.")
    return ("## Compute ledger\n\n" + markdown_table(header, rows) + f"\n\n{where} "
            "FLOPs are estimates of the model arithmetic: training ≈ "
            "6 × weights × tokens (the analytic per-token counts for pretraining and BERT), "
            "forward only for `extract`; transfer rows sum all seeds. Parameters of a transfer "
            "row are the trained ones (fine-tuning: all of BERT; feature-based: the task model).")


def results_section(inputs: ReportInputs) -> str:
    parts = ["## Transfer results", "",
             "Mean ± standard deviation over seeds (number of seeds in parentheses), in percent "
             "(accuracy / F1 × 100; SQuAD F1 as published). " + evaluated_splits_sentence(inputs)
             + "\"—\": not run or not published."]
    for spec in TABLES:
        parts += ["", f"### {spec.title}", "", spec.question, "",
                  results_table(spec, inputs.tasks, inputs.transfer)]
        sources = published_sources(spec, inputs.tasks)
        if sources:
            parts += ["", "Published numbers:", "", *(f"- {line}" for line in sources)]
    return "\n".join(parts)


def evaluated_splits(inputs: ReportInputs) -> dict[str, list[str]]:
    """split -> the grid tasks evaluated on it, as their cells and baselines record it
    (``validation`` first): a task without a validation split is evaluated on its ``test``."""
    by_split: dict[str, list[str]] = {}
    for task in inputs.tasks:
        splits = {c.eval_split for c in inputs.transfer.get(task, {}).values()}
        if "eval_split" in inputs.baselines.get(task, {}):
            splits.add(inputs.baselines[task]["eval_split"])
        for split in splits:
            by_split.setdefault(split, []).append(task)
    return dict(sorted(by_split.items(), key=lambda item: (item[0] != "validation", item[0])))


def evaluated_splits_sentence(inputs: ReportInputs) -> str:
    """"Evaluated on each task's `validation` split. ", or the split of each task where they
    differ; nothing where no cell has recorded one."""
    by_split = evaluated_splits(inputs)
    if not by_split:
        return ""
    if len(by_split) == 1:
        return f"Evaluated on each task's `{next(iter(by_split))}` split. "
    return "Evaluated on " + "; ".join(f"the `{split}` split of {', '.join(tasks)}"
                                       for split, tasks in by_split.items()) + ". "


def findings_section(inputs: ReportInputs) -> str:
    """Checks without per-example predictions (so without a CI): the pretrained models against
    trivial predictors, and the probes' layer comparison when the probes saved no predictions
    (point estimates, said so)."""
    found = family_parts.pretraining_findings(inputs.pretrain)
    if PROBED not in inputs.probe_predictions:   # else judged with CIs in the claims table
        found += findings.probe_findings(inputs.probes.get(PROBED))
    parts = ["## Other checks (point estimates, no CI)", ""]
    if not found:
        return "\n".join(parts + ["_No check can be made yet: the metrics it needs are "
                                  "missing._"])
    parts += [f"- {'✓' if f.reproduced else '✗'} {f.sentence}" for f in found]
    return "\n".join(parts)


def curves_section(inputs: ReportInputs, figures: dict) -> str:
    fig = plots.transfer_curves(inputs.tasks, inputs.transfer)
    if fig is None:
        return "## Task-model training curves\n\n_No transfer cell has recorded curves yet._"
    figures["transfer_curves.png"] = fig
    rows = [[task, method, ", ".join(_epoch_at(c, best) for c, best in zip(cell.curves, cell.best_epoch)),
             ", ".join(_epoch_at(c, len(c.get("dev", []))) for c in cell.curves),
             _learning_rate(cell)]
            for task in inputs.tasks for method, cell in inputs.transfer.get(task, {}).items()
            if cell.curves]
    return "\n".join([
        "## Task-model training curves", "",
        "Train loss and dev score per dev evaluation (seed of each cell's first run): an epoch "
        "for the feature-based methods, every `eval_every` steps for fine-tuning. The dev split "
        "is carved from the training examples; the evaluation split is never seen before the "
        "kept weights, and a fine-tuning cell's learning rate, are chosen on it.", "",
        figure_link("transfer_curves.png", "transfer curves"), "",
        markdown_table(["task", "method", "epoch of the kept weights per seed",
                        "epochs trained per seed", "fine-tuning rate (dev score of each rate tried)"],
                       rows)])


def _epoch_at(curve: dict, evaluation: int) -> str:
    """The epochs trained at a (1-based) dev evaluation: the evaluation itself for a per-epoch
    curve, the curve's ``epoch`` entry (fractional) for fine-tuning's."""
    epochs = curve.get("epoch")
    if not epochs or not 1 <= evaluation <= len(epochs):
        return str(evaluation)
    return f"{epochs[evaluation - 1]:.3g}"


def _learning_rate(cell) -> str:
    if not cell.lr:
        return ""
    chosen = f"{cell.lr[0]:g}"
    if not cell.lr_search:
        return chosen
    tried = ", ".join(f"{rate}: {100 * score:.1f}" for rate, score in cell.lr_search.items())
    return f"{chosen} ({tried})"


def probe_section(inputs: ReportInputs, figures: dict) -> str:
    parts = ["## Probing: what each layer encodes", ""]
    if not any(inputs.probes.values()):
        return "\n".join(parts + [missing_file("metrics/probe/<model>.json")])
    parts += ["A linear probe trained on each layer alone (validation score, layer 0 = the "
              "context-free token layer); a probe that did not run says why, in the words of "
              "its stage.", ""]
    intervals = ev.probe_intervals(inputs)
    baselines = ev.probe_baselines(inputs)
    fig = plots.probe_curves(inputs.probes, intervals, baselines)
    if fig is not None:
        figures["probe_layers.png"] = fig
        notes = []
        if intervals:
            notes.append("error bars: 95 % bootstrap CI over the evaluation examples (one probe "
                         "run per layer), from the probe's saved predictions")
        if baselines:
            notes.append("gray lines: the task's trivial baselines (\"Every method beside its "
                         "baselines\"), fitted on the task's training examples")
        caption = f"In the figure, {'; '.join(notes)}." if notes else ""
        parts += [figure_link("probe_layers.png", "probe scores"),
                  *(["", caption] if caption else []), ""]
    rows = []
    for model, probe in inputs.probes.items():
        for task, entry in (probe or {}).get("tasks", {}).items():
            scores = (", ".join(f"{100 * s:.1f}" for s in entry["layers"]) if "layers" in entry
                      else f"skipped: {entry.get('skipped', '')}")
            rows.append([model, task, entry.get("metric", MISSING), scores])
    return "\n".join(parts + [markdown_table(["model", "task", "metric", "per layer (%)"], rows)])


def mix_section(inputs: ReportInputs, figures: dict) -> str:
    parts = ["## Learned scalar-mix weights", "",
             "softmax(s) per layer, mean over seeds (layer 0 = the token layer)."]
    shown = False
    for task in inputs.tasks:
        fig = plots.mix_weights(task, inputs.transfer.get(task, {}))
        if fig is not None:
            name = f"mix_weights_{task}.png"
            figures[name] = fig
            parts += ["", figure_link(name, f"{task} scalar-mix weights")]
            shown = True
    if not shown:
        parts += ["", "_No learned mix weights yet (no elmo / elmo-io / bert-feature cells)._"]
    return "\n".join(parts)


def loss_section(inputs: ReportInputs, figures: dict) -> str:
    references, train_labels = family_parts.loss_curves(inputs.pretrain)
    fig = plots.loss_curves(inputs.curves, inputs.heldout, references, train_labels)
    if fig is None:
        return "## Pretraining loss\n\n" + missing_file(
            "dvclive/pretrain_<model>/plots/metrics/train/loss.tsv")
    figures["pretraining_loss.png"] = fig
    return "\n".join([
        "## Pretraining loss", "",
        "Training loss (faint: each point the mean over the steps since the previous one, "
        "`log_every`) and its moving mean, with the held-out evaluations "
        "(`dvclive/pretrain_<model>/plots/metrics/val/`) as points. biLM: perplexity on a log "
        "scale; its "
        "training loss (the mean of the two directions' per-token NLL) is shown as exp(loss), "
        "which with a sampled softmax is below the exact perplexity that the held-out points "
        "and the unigram model's line (dashed) measure. BERT: the training loss adds the NSP "
        "loss to the masked-LM loss; the held-out points are the masked-LM loss alone.", "",
        figure_link("pretraining_loss.png", "pretraining loss")])


def demote_headings(markdown: str, top: int = 3) -> str:
    """``markdown`` with every ATX heading (outside fenced code) moved down so that its
    highest heading is at level ``top`` (at most 6), the others keeping their nesting."""
    lines, fenced, levels = markdown.splitlines(), False, []
    headings = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6})(\s|$)", line)):
            headings.append(i)
            levels.append(len(m.group(1)))
    if not levels:
        return markdown
    shift = max(0, top - min(levels))
    for i, level in zip(headings, levels):
        lines[i] = "#" * min(6, level + shift) + lines[i][level:]
    return "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")


def neighbors_section(inputs: ReportInputs) -> str:
    """``reports/neighbors.md`` pasted under the report's heading: its own title (a first-line
    top-level heading) becomes the section's, its other headings are demoted below it."""
    title = "## Contextual neighbours"
    if inputs.neighbors is None:
        return f"{title}\n\n" + missing_file("reports/neighbors.md")
    text = inputs.neighbors.strip()
    first, _, rest = text.partition("\n")
    if (m := re.match(r"#\s+(.+)", first)):
        title, text = f"## {m.group(1).strip()}", rest.strip()
    return f"{title}\n\n" + demote_headings(text).rstrip()


def build_report(inputs: ReportInputs, profile: str | None = None) -> Report:
    figures: dict[str, Figure] = {}
    header = "# ctxrep: ELMo and BERT reproduced at small scale"
    if profile:
        header += f"\n\nParams profile: `{profile}`."
    evidence = ev.gather(inputs)
    curves = lc.gather(inputs, evidence)
    evidence.judgements += lc.judgements(curves, inputs.curve.get("methods", []))
    sections = [header, ev.claims_section(evidence, inputs, figures),
                ev.baselines_section(inputs, evidence), data_section(inputs), scale_section(inputs),
                weights_section(inputs),
                ledger_section(inputs),
                results_section(inputs), findings_section(inputs), curves_section(inputs, figures),
                lc.section(inputs, curves, figures), probe_section(inputs, figures),
                mix_section(inputs, figures), loss_section(inputs, figures),
                neighbors_section(inputs)]
    summary = summarise(inputs.transfer, ev.summary_extras(inputs, evidence))
    return Report(summary, "\n\n".join(sections) + "\n", figures,
                  transfer_curve_table(inputs.transfer))


def transfer_curve_table(transfer: dict[str, dict[str, CellRecord]]) -> str:
    """Every cell's per-epoch curves in one long TSV (``task method seed epoch dev
    train_loss``), rows in grid order: one file that the top-level DVC plot draws as one
    panel per task, methods as colours, for any grid."""
    rows = ["task\tmethod\tseed\tepoch\tdev\ttrain_loss"]
    for task, cells in transfer.items():
        for method, cell in cells.items():
            for seed, curve in zip(cell.seeds, cell.curves):
                # fine-tuning's evaluations fall every eval_every steps: fractional epochs
                epochs = curve.get("epoch") or range(1, len(curve["dev"]) + 1)
                for epoch, dev, loss in zip(epochs, curve["dev"], curve["train_loss"]):
                    rows.append(f"{task}\t{method}\t{seed}\t{epoch:g}\t{dev:.6f}\t{loss:.6f}")
    return "\n".join(rows) + "\n"


def write_report(report: Report, root: Path | str = ".") -> None:
    """summary.json, report.md and the figures directory (replaced whole), each atomically."""
    root = Path(root)
    write_json(root / SUMMARY_PATH, report.summary)
    write_json(root / HEADLINE_PATH, headline(report.summary))
    write_json(root / CLAIMS_PATH, claim_metrics(report.summary))
    with atomic_file(root / TRANSFER_CURVES_PATH) as f:
        f.write(report.transfer_curves)
    with atomic_dir(root / FIGURES_DIR) as tmp:
        for name, fig in sorted(report.figures.items()):
            plots.save_png(fig, tmp / name)
    with atomic_file(root / REPORT_PATH) as f:
        f.write(report.markdown)
