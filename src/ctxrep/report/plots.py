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

from ctxrep.io import atomic_file
from ctxrep.report.inputs import Curve
from ctxrep.transfer.record import CellRecord

DPI = 100
PANEL_SIZE = (4.5, 3.2)   # inches per panel
LEARNED_MIX_METHODS = ("elmo", "elmo-io", "bert-feature")


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


@default_style
def loss_curves(curves: dict[str, Curve | None]) -> Figure | None:
    """Training loss against step, one panel per pretrained model."""
    present = {model: c for model, c in curves.items() if c and c.steps}
    if not present:
        return None
    fig, axes = new_figure(len(present))
    for ax, (model, curve) in zip(axes, present.items()):
        ax.plot(curve.steps, curve.train_loss, linewidth=1)
        ax.set(title=f"{model} pretraining", xlabel="step", ylabel="train loss")
        ax.grid(alpha=0.3)
    return fig


@default_style
def probe_curves(probes: dict[str, dict | None]) -> Figure | None:
    """Per-layer probe score, one panel per task, one line per model."""
    tasks = sorted({task for probe in probes.values() if probe
                    for task, entry in probe["tasks"].items() if entry.get("layers")})
    if not tasks:
        return None
    fig, axes = new_figure(len(tasks))
    for ax, task in zip(axes, tasks):
        entries = {model: probe["tasks"][task] for model, probe in probes.items()
                   if probe and probe["tasks"].get(task, {}).get("layers")}
        for model, entry in entries.items():
            layers = entry["layers"]
            ax.plot(range(len(layers)), [100 * s for s in layers], marker="o", label=model)
        metric = next(iter(entries.values()))["metric"]
        ax.set(title=f"{task} linear probe", xlabel="layer", ylabel=f"{metric} (%)")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend()
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
    for method in LEARNED_MIX_METHODS:
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
            epochs = range(1, len(curve["dev"]) + 1)
            (line,) = dev_ax.plot(epochs, [100 * x for x in curve["dev"]], linewidth=1,
                                  label=method)
            loss_ax.plot(range(1, len(curve["train_loss"]) + 1), curve["train_loss"],
                         linewidth=1, color=line.get_color())
            if cell.best_epoch:
                best = cell.best_epoch[0]
                dev_ax.plot([best], [100 * curve["dev"][best - 1]], marker="o",
                            color=line.get_color())
        loss_ax.set(title=f"{task}: train loss", xlabel="epoch", ylabel="loss")
        dev_ax.set(title=f"{task}: dev score", xlabel="epoch", ylabel="dev (%)")
        for ax in (loss_ax, dev_ax):
            ax.grid(alpha=0.3)
    axes[1][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
