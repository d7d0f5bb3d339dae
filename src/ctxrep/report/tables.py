"""Markdown tables: the papers' Tables 1-3 as analogs over our tasks, with published numbers.

Scores are shown in percent (accuracy and F1 × 100; SQuAD F1 already is), as the papers do, as
``mean ± std (n)`` over ``n`` seeds. A cell that was not run shows "—".
"""

from __future__ import annotations

# The papers' tables, as their families declare them (ctxrep.families.TABLES)
from ctxrep.families import PaperTable
from ctxrep.metrics import metric_info
from ctxrep.transfer.record import CellRecord

MISSING = "—"


def percent_scale(metric: str) -> float:
    """Factor that turns a metric module's value into percent (the metric catalogue's)."""
    return metric_info(metric).percent


# Bootstrap intervals and claim differences come from ctxrep.analysis.bootstrap's per-example
# statistics, which are fractions for every metric, SQuAD's included: always x 100 (scaling them
# by percent_scale printed SQuAD's CIs and Δs 100 times too small).
INTERVAL_SCALE = 100.0


def fmt_score(cell: CellRecord, decimals: int = 1) -> str:
    """``mean ± std (n)`` in percent; no ± for a single seed."""
    scale = percent_scale(cell.metric)
    mean = f"{cell.mean * scale:.{decimals}f}"
    if cell.n_seeds > 1:
        mean += f" ± {cell.std * scale:.{decimals}f}"
    return f"{mean} ({cell.n_seeds})"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def published_methods(spec: PaperTable) -> list[str]:
    """The methods of ``spec`` with at least one published number, in the table's order."""
    have = {m for cells in spec.published.values() for m in cells}
    return [m for m in spec.methods if m in have]


def results_table(spec: PaperTable, tasks: list[str],
                  transfer: dict[str, dict[str, CellRecord]]) -> str:
    """Our cells per task and method, then the published numbers of the same cells."""
    paper = published_methods(spec)
    header = ["task", "metric", *spec.methods, *(f"paper: {m}" for m in paper)]
    rows = []
    for task in tasks:
        cells = transfer.get(task, {})
        metric = next((c.primary for c in cells.values()), MISSING)
        ours = [fmt_score(cells[m]) if m in cells else MISSING for m in spec.methods]
        theirs = [str(p) if (p := spec.published.get(task, {}).get(m)) else MISSING
                  for m in paper]
        rows.append([task, metric, *ours, *theirs])
    return markdown_table(header, rows)


def published_sources(spec: PaperTable, tasks: list[str]) -> list[str]:
    """One line per published number shown in the table: its paper, table and seed file."""
    lines = []
    for task in tasks:
        for method, number in spec.published.get(task, {}).items():
            lines.append(f"{task} / {method}: {number} — {number.source} "
                         f"(from seed `{number.seed_file}`)")
    return lines
