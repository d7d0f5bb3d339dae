"""Small formatting helpers the report's sections share: a missing value prints as ``—``."""

from __future__ import annotations

from ctxrep.report.tables import MISSING


def fmt_int(value) -> str:
    return MISSING if value is None else f"{int(value):,}"


def fmt_float(value, fmt: str = ".1f") -> str:
    return MISSING if value is None else format(value, fmt)


def fmt_pct(metrics: dict, key: str) -> str:
    """A fraction in ``metrics`` shown in percent."""
    value = metrics.get(key)
    return MISSING if value is None else f"{100 * value:.1f}"


def fmt_int_range(values: list[int]) -> str:
    """"1,000" or "1,000–2,000" (smallest to largest); "—" for none."""
    if not values:
        return MISSING
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def fmt_seconds(value) -> str:
    return MISSING if value is None else f"{value:,.1f} s"


def missing_file(path: str) -> str:
    return f"_Not available: `{path}` is missing (its stage has not run)._"


def figure_link(name: str, caption: str) -> str:
    return f"![{caption}](figures/{name})"
