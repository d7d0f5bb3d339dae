"""PNG figures of the report, byte-for-byte reproducible.

Figures are built on matplotlib's Agg canvas with the library's default style (a user's
matplotlibrc cannot change them), fixed sizes and dpi, and saved without the "Software" tag, so
the same inputs give the same bytes and DVC sees a change only when a number moved.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ctxrep.families import CORE, NAMES
from ctxrep.config.methods import LEARNED_MIX_METHODS, hf_name, is_hf_finetune
from ctxrep.io import atomic_file
from ctxrep.report.inputs import Curve, EvalCurve
from ctxrep.transfer.record import CellRecord

DPI = 100
PANEL_SIZE = (4.5, 3.2)   # inches per panel


def default_style(build):
    """Run ``build`` under matplotlib's default rcParams, whatever the user's matplotlibrc."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        with matplotlib.style.context("default"):
            return build(*args, **kwargs)

    return wrapper


def new_figure(n_panels: int, extra_width: float = 0.0) -> tuple[Figure, list]:
    """A row of ``n_panels`` axes of fixed size on an Agg canvas (no pyplot, no global state);
    ``extra_width`` inches leave room for a legend outside the axes."""
    fig = Figure(figsize=(PANEL_SIZE[0] * n_panels + extra_width, PANEL_SIZE[1]), dpi=DPI,
                 layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, n_panels, i + 1) for i in range(n_panels)]


def interval_line(ax, xs: list, intervals: list, scale: float = 1.0, label: str | None = None):
    """One line of point estimates with asymmetric error bars from their CIs (``Interval``-like:
    ``estimate``, ``low``, ``high``), all multiplied by ``scale``."""
    ys = [i.estimate * scale for i in intervals]
    err = [[(i.estimate - i.low) * scale for i in intervals],
           [(i.high - i.estimate) * scale for i in intervals]]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, linewidth=1, label=label)


@default_style
def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def save_png(fig: Figure, path: Path | str) -> None:
    with atomic_file(path, "wb") as f:
        f.write(png_bytes(fig))


# What each pretrained model's held-out curve is plotted as: (held-out metric, label,
# whether the panel's y axis is perplexity (log scale: the train loss as exp(loss)) or loss).
HELDOUT = {name: CORE[name].heldout for name in NAMES}


def moving_mean(values: list[float], window: int) -> np.ndarray:
    """The mean of each run of ``window`` consecutive values (``len - window + 1`` of them)."""
    v = np.asarray(values, dtype=np.float64)
    c = np.concatenate([[0.0], np.cumsum(v)])
    return (c[window:] - c[:-window]) / window


@default_style
def loss_curves(curves: dict[str, Curve | None], heldout: dict[str, EvalCurve | None] | None = None,
                references: dict[str, dict[str, float]] | None = None,
                train_labels: dict[str, str] | None = None) -> Figure | None:
    """One panel per pretrained model: the training loss against step (faint, and a moving
    mean), the held-out evaluations (``heldout``: model -> its held-out curve) as points,
    and horizontal reference lines (``references``: model -> label -> value in the panel's
    units, e.g. the unigram model's perplexity). A model whose held-out curve is a perplexity
    (``HELDOUT``) gets a log-scale perplexity axis with the train loss as exp(loss)."""
    heldout, references, train_labels = heldout or {}, references or {}, train_labels or {}
    present = {model: c for model, c in curves.items() if c and c.steps}
    if not present:
        return None
    fig, axes = new_figure(len(present), extra_width=0.6)
    for ax, (model, curve) in zip(axes, present.items()):
        key, label, perplexity = HELDOUT.get(model, (None, "held-out", False))
        val = heldout.get(model)
        points = [(s, v) for s, v in zip(val.steps, val.metrics.get(key, []))
                  if np.isfinite(v)] if val and key else []
        loss = np.asarray(curve.train_loss, dtype=np.float64)
        show = np.exp if perplexity else (lambda x: x)
        train = train_labels.get(model, "train loss")
        ax.plot(curve.steps, show(loss), linewidth=0.6, alpha=0.35, color="tab:blue")
        window = max(1, len(loss) // 40)
        if window > 1:
            ax.plot(curve.steps[window - 1:], show(moving_mean(loss, window)), linewidth=1.2,
                    color="tab:blue", label=f"{train} (moving mean of {window} points)")
        else:
            ax.lines[-1].set(alpha=1.0, label=train)
        if points:
            ax.plot(*zip(*points), marker="o", linewidth=1, color="tab:orange", label=label)
        styles = iter(("dashed", "dotted", "dashdot"))
        for name, value in sorted(references.get(model, {}).items()):
            ax.axhline(value, color="gray", linestyle=next(styles, "dashed"), linewidth=1,
                       label=name)
        ax.set(title=f"{model} pretraining", xlabel="step",
               ylabel="perplexity (log scale)" if perplexity else "loss (nats per token)")
        if perplexity:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return fig


@default_style
def probe_curves(probes: dict[str, dict | None],
                 intervals: dict[str, dict[str, list]] | None = None,
                 baselines: dict[str, dict[str, float]] | None = None) -> Figure | None:
    """Per-layer probe score, one panel per task, one line per model; with 95 % CI error bars
    where ``intervals`` (model -> task -> an ``Interval`` per layer) has them, and the task's
    trivial baselines (``baselines``: task -> name -> score) as horizontal lines."""
    intervals, baselines = intervals or {}, baselines or {}
    tasks = sorted({task for probe in probes.values() if probe
                    for task, entry in probe["tasks"].items() if entry.get("layers")})
    if not tasks:
        return None
    fig, axes = new_figure(len(tasks), extra_width=1.6)
    for ax, task in zip(axes, tasks):
        entries = {model: probe["tasks"][task] for model, probe in probes.items()
                   if probe and probe["tasks"].get(task, {}).get("layers")}
        for model, entry in entries.items():
            layers = entry["layers"]
            cis = intervals.get(model, {}).get(task)
            if cis and len(cis) == len(layers):
                interval_line(ax, range(len(layers)), cis, 100.0, label=f"{model} (95 % CI)")
            else:
                ax.plot(range(len(layers)), [100 * s for s in layers], marker="o", label=model)
        styles = iter(("dashed", "dotted", "dashdot"))
        for name, score in baselines.get(task, {}).items():
            ax.axhline(100 * score, color="gray", linestyle=next(styles, "dashed"), linewidth=1,
                       label=f"baseline: {name}")
        metric = next(iter(entries.values()))["metric"]
        ax.set(title=f"{task} linear probe", xlabel="layer", ylabel=f"{metric} (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


# colour and marker of each verdict in the claims forest plot
VERDICT_STYLE = {"reproduced": ("tab:green", "o"), "contradicted": ("tab:red", "D"),
                 "inconclusive": ("tab:gray", "s")}


@default_style
def claims_forest(rows: list[tuple[str, float, float, float, str]]) -> Figure | None:
    """A forest plot of the judged claims: one row per (label, Δ, low, high, verdict), in the
    given order from the top: Δ as a point, its 95 % CI as a bar, coloured by verdict, and the
    line Δ = 0 (a CI clear of it decides the verdict)."""
    if not rows:
        return None
    fig = Figure(figsize=(9.0, 1.2 + 0.3 * len(rows)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.axvline(0.0, color="black", linestyle="dashed", linewidth=1)
    for y, (_, delta, low, high, verdict) in enumerate(rows):
        colour, marker = VERDICT_STYLE.get(verdict, ("tab:blue", "o"))
        ax.errorbar([delta], [y], xerr=[[delta - low], [high - delta]], fmt=marker,
                    color=colour, capsize=3, linewidth=1.5, markersize=6)
    ax.set_yticks(range(len(rows)), [row[0] for row in rows], fontsize="small")
    ax.set_ylim(len(rows) - 0.5, -0.5)        # the first claim on top, as in the table
    ax.set(xlabel="Δ = better − worse (points), 95 % bootstrap CI",
           title="The papers' claims, judged")
    ax.grid(alpha=0.3, axis="x")
    shown = [v for v in VERDICT_STYLE if any(row[4] == v for row in rows)]
    handles = [Line2D([], [], color=VERDICT_STYLE[v][0], marker=VERDICT_STYLE[v][1],
                      linestyle="none", label=v) for v in shown]
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def normalised(weights: list[float]) -> np.ndarray:
    """Layer weights as a distribution: kept if they already are one (``ScalarMix.weights()``),
    else taken as the raw scalars ``s`` and softmax-normalised."""
    w = np.asarray(weights, dtype=np.float64)
    is_distribution = (w >= 0).all() and abs(w.sum() - 1.0) < 1e-3
    return w if is_distribution else softmax(w)


def mean_layer_weights(per_seed: list[list[float]]) -> np.ndarray:
    """Mean over seeds of the normalised per-layer weights."""
    return np.mean([normalised(row) for row in per_seed], axis=0)


def mix_series(cells: dict[str, CellRecord]) -> dict[str, np.ndarray]:
    """Label ("elmo", "elmo-io input", ...) → mean normalised weights, learned mixes only."""
    series = {}
    hf = [m for m in cells if hf_name(m) is not None and not is_hf_finetune(m)]  # mixed too
    for method in (*LEARNED_MIX_METHODS, *hf):
        mix = cells[method].learned_mix if method in cells else {}
        for position, per_seed in sorted(mix.items()):
            label = method if len(mix) == 1 else f"{method} {position}"
            series[label] = mean_layer_weights(per_seed)
    return series


@default_style
def mix_weights(task: str, cells: dict[str, CellRecord]) -> Figure | None:
    """Grouped bars: the learned softmax weight of each layer, per method (mean over seeds);
    dashed: the equal mix 1 / n_layers."""
    series = mix_series(cells)
    if not series:
        return None
    fig, (ax,) = new_figure(1, extra_width=1.8)
    width = 0.8 / len(series)
    for k, (label, weights) in enumerate(series.items()):
        ax.bar(np.arange(len(weights)) + (k - (len(series) - 1) / 2) * width, weights, width,
               label=label)
    for n_layers in sorted({len(w) for w in series.values()}):
        ax.hlines(1 / n_layers, -0.5, n_layers - 0.5, colors="gray", linestyles="dashed",
                  linewidth=1)
    n_max = max(len(w) for w in series.values())
    ax.set(title=f"{task}: learned scalar-mix weights", xlabel="layer",
           ylabel="softmax weight (mean over seeds)", xticks=range(n_max))
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3, axis="y")
    return fig


@default_style
def transfer_curves(tasks: list[str], transfer: dict[str, dict[str, CellRecord]]) -> Figure | None:
    """Two rows of panels, one column per task: the first seed's train loss (top) and dev
    score (bottom) per epoch, one line per method; a marker at the epoch kept."""
    shown = [t for t in tasks if any(c.curves for c in transfer.get(t, {}).values())]
    if not shown:
        return None
    fig = Figure(figsize=(PANEL_SIZE[0] * len(shown) + 1.8, 2 * PANEL_SIZE[1]), dpi=DPI,
                 layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(shown), squeeze=False)
    for col, task in enumerate(shown):
        loss_ax, dev_ax = axes[0][col], axes[1][col]
        for method, cell in sorted(transfer[task].items()):
            if not cell.curves:
                continue
            curve = cell.curves[0]
            # the epochs trained at each dev evaluation: fine-tuning's are fractional
            epochs = curve.get("epoch") or list(range(1, len(curve["dev"]) + 1))
            (line,) = dev_ax.plot(epochs[:len(curve["dev"])], [100 * x for x in curve["dev"]],
                                  linewidth=1, label=method)
            loss_ax.plot(epochs[:len(curve["train_loss"])], curve["train_loss"],
                         linewidth=1, color=line.get_color())
            if cell.best_epoch:
                best = cell.best_epoch[0]
                dev_ax.plot([epochs[best - 1]], [100 * curve["dev"][best - 1]], marker="o",
                            color=line.get_color())
        loss_ax.set(title=f"{task}: train loss", xlabel="epoch", ylabel="loss")
        dev_ax.set(title=f"{task}: dev score", xlabel="epoch", ylabel="dev (%)")
        for ax in (loss_ax, dev_ax):
            ax.grid(alpha=0.3)
    axes[1][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
