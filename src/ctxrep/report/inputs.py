"""Read every input of the report: small JSON / TSV files, any of which may be missing.

A missing file is ``None`` (the report says what is missing); a file that exists but cannot be
read as expected raises :class:`ReportInputError` naming it, so a broken upstream output never
turns silently into a "—".

Paths (relative to the repo root):

    metrics/tokenize.json, metrics/pretrain_bilm.json, metrics/pretrain_bert.json,
    metrics/pretrain_static.json (the static word vectors: no curve)
    dvclive/pretrain_{bilm,bert}/plots/metrics/       DVCLive histories (ctxrep.training.curves):
        train/loss.tsv, val/<metric>.tsv              header: step  <name>
    metrics/transfer/<task>/<method>.json             one transfer cell (a CellRecord)
    metrics/baselines/<task>.json                     the task's trivial baselines
    data/predictions/<task>/<method>/seed<N>.json     a cell's predictions, one file per seed
    data/predictions/<task>/baselines/<name>.json     a baseline's predictions
    metrics/learning_curves/<task>/<method>.json      a learning curve's points (CellRecords
                                                      of fractions < 1)
    data/learning_curves/<task>/<method>/fraction<f>/seed<N>.json   their predictions
    metrics/probe/<model>.json                        per-layer probe scores
    data/predictions/probe/<model>/<task>.json        per-layer probe predictions, per example
    reports/compute/<stage>.json                      data, parameters, FLOPs
    reports/weights/<model>.json                      trained here, or imported from where
    data/raw/corpus/MANIFEST.json, data/raw/tasks/<task>/MANIFEST.json
    reports/neighbors.md                              contextual-neighbours text, verbatim
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.config.methods import (FEATURE_SETS, cell_stage_name, extract_stage_name, hf_method, hf_name,
                                   left_to_right_family, pretrain_stage_name)
from ctxrep.families import LEFT_TO_RIGHT, PUBLISHED_MODELS, STATIC, STATIC_SECTION
from ctxrep.families import NAMES as FAMILY_NAMES
from ctxrep.transfer.record import CellRecord, ReportInputError, number, require

COMPUTE_DIR = Path("reports/compute")  # written by ctxrep.stage
WEIGHTS_DIR = Path("reports/weights")  # written by the pretraining stages (ctxrep.published)
LIVE_DIR = Path("dvclive")  # the training runs' DVCLive folders (ctxrep.training.curves)


def read_json(path: Path) -> dict | None:
    """The JSON object in ``path``; ``None`` when the file does not exist."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportInputError(path, f"not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise ReportInputError(path, f"expected a JSON object, got {type(data).__name__}")
    return data


@dataclass
class Curve:
    """A pretraining loss curve: each point the mean training loss since the previous one."""

    steps: list[int]
    train_loss: list[float]


@dataclass
class EvalCurve:
    """A pretraining run's held-out evaluations: their steps and each metric's values (NaN
    where an evaluation did not report it)."""

    steps: list[int]
    metrics: dict[str, list[float]]


def read_live_history(path: Path) -> dict[int, float]:
    """One DVCLive history file (``plots/metrics/<name>.tsv``: ``step<TAB><name>`` rows, maybe a
    ``timestamp`` column): step -> value ("nan" / "inf" as DVCLive writes them)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    name = path.stem
    if not rows or "step" not in rows[0] or name not in rows[0]:
        raise ReportInputError(path, f"expected a DVCLive header with 'step' and {name!r}")
    i, j = rows[0].index("step"), rows[0].index(name)
    history = {}
    for line, row in enumerate(rows[1:], start=2):
        try:
            history[int(row[i])] = float(row[j])
        except (IndexError, ValueError) as e:
            raise ReportInputError(path, f"line {line}: expected an integer step and a number, "
                                         f"got {row!r}") from e
    return history


def read_curve(folder: Path) -> Curve | None:
    """The training loss of a DVCLive folder (``plots/metrics/train/loss.tsv``, written by
    :mod:`ctxrep.training.curves`); ``None`` when the folder does not exist, an empty curve
    when the run trained nothing (an import)."""
    if not folder.is_dir():
        return None
    path = folder / "plots" / "metrics" / "train" / "loss.tsv"
    history = read_live_history(path) if path.exists() else {}
    return Curve(sorted(history), [history[s] for s in sorted(history)])


def read_eval_curve(folder: Path) -> EvalCurve | None:
    """Every held-out metric of a DVCLive folder (``plots/metrics/val/<name>.tsv``) joined on
    step, as ``val_<name>``; ``None`` when the folder does not exist."""
    if not folder.is_dir():
        return None
    histories = {f"val_{p.stem}": read_live_history(p)
                 for p in sorted((folder / "plots" / "metrics" / "val").glob("*.tsv"))}
    steps = sorted({s for h in histories.values() for s in h})
    return EvalCurve(steps, {k: [h.get(s, float("nan")) for s in steps]
                             for k, h in histories.items()})


def read_cell(path: Path) -> CellRecord:
    """The transfer cell in ``path`` (which exists)."""
    return CellRecord.from_json(read_json(path), path)


@dataclass
class Predictions:
    """One seed's (or a baseline's) predictions on the evaluation split, with the references."""

    predictions: list
    references: list


def read_predictions(path: Path) -> Predictions:
    data = read_json(path)
    require(data, path, "predictions", "references")
    if len(data["predictions"]) != len(data["references"]):
        raise ReportInputError(path, f"{len(data['predictions'])} predictions for "
                                     f"{len(data['references'])} references")
    return Predictions(data["predictions"], data["references"])


def read_prediction_grid(root: Path, transfer: dict, baselines: dict) -> dict:
    """task -> method or baseline name -> [Predictions per seed], for the cells (and baselines)
    the report shows; a cell without its prediction files is left out (no CI for it)."""
    grid: dict = {}
    for task, cells in transfer.items():
        for method, cell in cells.items():
            folder = root / "data" / "predictions" / task / method
            files = [folder / f"seed{seed}.json" for seed in cell.seeds]
            if files and all(f.exists() for f in files):
                grid.setdefault(task, {})[method] = [read_predictions(f) for f in files]
    for task, record in baselines.items():
        for name in record.get("baselines", {}):
            path = root / "data" / "predictions" / task / "baselines" / f"{name}.json"
            if path.exists():
                grid.setdefault(task, {})[name] = [read_predictions(path)]
    return grid


@dataclass
class CurvePoint:
    """One point of a learning curve: a method trained on ``train_examples`` examples."""

    train_examples: int
    predictions: list[Predictions]    # one per seed, on the same evaluation examples


def read_learning_curves(root: Path, tasks: list[str], methods: list[str]) -> dict:
    """task -> method -> [CurvePoint] of the learning_curve stage (fractions below 1, smallest
    first); the whole-data point is the grid's cell and is added by the report."""
    curves: dict = {}
    for task in tasks:
        for method in methods:
            path = root / "metrics" / "learning_curves" / task / f"{method}.json"
            record = read_json(path)
            if record is None:
                continue
            require(record, path, "points")
            points = []
            for data in record["points"]:
                require(data, path, "train_fraction")
                point = CellRecord.from_json(data, path)
                if point.unavailable is not None:
                    continue
                folder = (root / "data" / "learning_curves" / task / method
                          / f"fraction{point.train_fraction}")
                files = [folder / f"seed{seed}.json" for seed in point.seeds]
                if all(f.exists() for f in files):
                    points.append(CurvePoint(int(point.train_examples),
                                             [read_predictions(f) for f in files]))
            if points:
                curves.setdefault(task, {})[method] = points
    return curves


def read_probe_predictions(root: Path) -> dict:
    """model -> task -> {metric, references, layers: [per-example predictions of layer j]},
    written by the probe stage (``data/predictions/probe/<model>/<task>.json``)."""
    out: dict = {}
    for model in FAMILY_NAMES:
        folder = root / "data" / "predictions" / "probe" / model
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            data = read_json(path)
            require(data, path, "metric", "references", "layers")
            for j, layer in enumerate(data["layers"]):
                if len(layer) != len(data["references"]):
                    raise ReportInputError(path, f"layer {j}: {len(layer)} predictions for "
                                                 f"{len(data['references'])} references")
            out.setdefault(model, {})[path.stem] = data
    return out


def read_probe(path: Path) -> dict | None:
    """``{"model", "tasks": {task: {"metric", "layers": [...]} or {"skipped": why}}}``."""
    data = read_json(path)
    if data is None:
        return None
    require(data, path, "model", "tasks")
    for task, entry in data["tasks"].items():
        if "skipped" in entry:
            continue
        require(entry, path, "metric", "layers")
        for j, score in enumerate(entry["layers"]):
            number(score, path, f"tasks.{task}.layers[{j}]")
    return data


@dataclass
class ComputeEntry:
    """One stage's ``reports/compute/<stage>.json``: what it cost (see StageContext.compute)."""

    amount: int
    unit: str
    params: int | None
    flops: float | None


def read_compute(path: Path) -> ComputeEntry | None:
    data = read_json(path)
    if data is None:
        return None
    require(data, path, "amount", "unit")
    optional = {k: None if data.get(k) is None else number(data[k], path, k)
                for k in ("params", "flops")}
    return ComputeEntry(amount=int(number(data["amount"], path, "amount")), unit=str(data["unit"]),
                        params=None if optional["params"] is None else int(optional["params"]),
                        flops=optional["flops"])


def read_weights(path: Path) -> dict | None:
    """``reports/weights/<model>.json``: ``source`` train (with the corpus ``path``) or import
    (with the folder ``path`` and each file's ``name``, ``bytes``, ``sha256``, ``origin``)."""
    data = read_json(path)
    if data is None:
        return None
    require(data, path, "model", "source", "path")
    if data["source"] not in ("train", "import"):
        raise ReportInputError(path, f"source {data['source']!r}: expected 'train' or 'import'")
    if data["source"] == "import":
        require(data, path, "files")
        for i, f in enumerate(data["files"]):
            if not isinstance(f, dict) or not {"name", "bytes", "sha256"} <= set(f):
                raise ReportInputError(path, f"files[{i}]: expected name, bytes and sha256")
    return data


def ledger_stages(tasks: list[str], methods: list[str],
                  curve: dict | None = None) -> list[tuple[str, str]]:
    """(stage, ledger row) of every stage in the compute ledger, in pipeline order; a method's
    transfer cells share a row (stage ``transfer`` or, for a fine-tuned method, ``finetune``), as
    do its learning-curve stages. Only this run's grid and curves (``curve``: the learning_curve
    params): other files may be left from earlier runs."""
    curve_stages = [(f"learning_curve@{t}-{m}", f"learning curve {m}")
                    for m in curve["methods"] for t in curve["tasks"]] if curve else []
    left_to_right = dict.fromkeys(f for m in methods if (f := left_to_right_family(m)))
    single = ["tokenize", *map(pretrain_stage_name, FAMILY_NAMES), *PUBLISHED_MODELS,
              STATIC_SECTION, "neighbors", "intrinsic",
              *(extract_stage_name(f) for f in FEATURE_SETS if f not in LEFT_TO_RIGHT),
              *(stage for f in left_to_right for stage in (pretrain_stage_name(f), extract_stage_name(f))),
              *dict.fromkeys(extract_stage_name(hf_method(name)) for m in methods
                             if (name := hf_name(m)) is not None)]
    return ([(name, name) for name in single]
            + [(f"baseline@{t}", "baselines") for t in tasks]
            + [(cell_stage_name(t, m), f"transfer {m}") for m in methods for t in tasks]
            + curve_stages
            + [(f"probe@{name}",) * 2 for name in FAMILY_NAMES])


@dataclass
class ReportInputs:
    tasks: list[str]
    methods: list[str]
    tokenize: dict | None
    pretrain: dict[str, dict | None]          # bilm, bert, static -> metrics/pretrain_<it>.json;
                                              # bert-published -> metrics/import_bert.json
    curves: dict[str, Curve | None]           # model -> loss curve
    transfer: dict[str, dict[str, CellRecord]]   # task -> method -> cell
    probes: dict[str, dict | None]            # model -> metrics/probe/<model>.json
    corpus_manifest: dict | None
    task_manifests: dict[str, dict | None]
    neighbors: str | None
    compute: dict[str, ComputeEntry] = field(default_factory=dict)   # stage -> its cost
    weights: dict[str, dict | None] = field(default_factory=dict)  # model -> reports/weights
    baselines: dict[str, dict] = field(default_factory=dict)         # task -> baselines record
    predictions: dict = field(default_factory=dict)   # task -> method -> [Predictions per seed]
    learning_curves: dict = field(default_factory=dict)  # task -> method -> [CurvePoint]
    curve: dict = field(default_factory=dict)  # the learning_curve params: tasks, methods
    probe_predictions: dict = field(default_factory=dict)  # model -> task -> layer predictions
    heldout: dict[str, EvalCurve | None] = field(default_factory=dict)  # model -> held-out curve
    intrinsic: dict | None = None   # metrics/intrinsic.json: the models on an out-of-domain text


def read_transfer_grid(root: Path, tasks: list[str], methods: list[str]) -> dict:
    """task -> method -> result, for the cells whose file exists and that had data (a cell of
    an unavailable task records why, and the report says so from the task's manifest)."""
    grid = {}
    for task in tasks:
        files = [root / "metrics" / "transfer" / task / f"{m}.json" for m in methods]
        cells = {cell.method: cell for cell in (read_cell(p) for p in files if p.exists())
                 if cell.unavailable is None}
        if cells:
            grid[task] = cells
    return grid


def load_inputs(root: Path | str, tasks: list[str], methods: list[str],
                fetched: list[str] | None = None, curve: dict | None = None) -> ReportInputs:
    """Everything the report reads, from the repo at ``root``: the cells of ``tasks`` ×
    ``methods`` (the grid), the manifests of the ``fetched`` tasks (default: ``tasks``) and
    the learning curves of ``curve`` (the ``learning_curve`` params: tasks, methods)."""
    root = Path(root)
    metrics = root / "metrics"
    neighbors = root / "reports" / "neighbors.md"
    transfer = read_transfer_grid(root, tasks, methods)
    baselines = {t: b for t in tasks if (b := read_json(metrics / "baselines" / f"{t}.json"))
                 and "unavailable" not in b}
    return ReportInputs(
        tasks=list(tasks), methods=list(methods),
        tokenize=read_json(metrics / "tokenize.json"),
        pretrain={**{m: read_json(metrics / f"pretrain_{m}.json") for m in (*FAMILY_NAMES, STATIC)},
                  **{name: read_json(metrics / f"{stage}.json")
                     for stage, name in PUBLISHED_MODELS.items()}},
        curves={m: read_curve(root / LIVE_DIR / f"pretrain_{m}") for m in FAMILY_NAMES},
        heldout={m: read_eval_curve(root / LIVE_DIR / f"pretrain_{m}") for m in FAMILY_NAMES},
        transfer=transfer,
        probes={m: read_probe(metrics / "probe" / f"{m}.json") for m in FAMILY_NAMES},
        probe_predictions=read_probe_predictions(root),
        corpus_manifest=read_json(root / "data" / "raw" / "corpus" / "MANIFEST.json"),
        task_manifests={t: read_json(root / "data" / "raw" / "tasks" / t / "MANIFEST.json")
                        for t in (tasks if fetched is None else fetched)},
        neighbors=neighbors.read_text() if neighbors.exists() else None,
        compute={name: entry for name, _ in ledger_stages(tasks, methods, curve)
                 if (entry := read_compute(root / COMPUTE_DIR / f"{name}.json")) is not None},
        weights={m: read_weights(root / WEIGHTS_DIR / f"{m}.json")
                 for m in (*FAMILY_NAMES, *PUBLISHED_MODELS.values())},
        baselines=baselines,
        predictions=read_prediction_grid(root, transfer, baselines),
        learning_curves=read_learning_curves(root, list(curve["tasks"]), list(curve["methods"]))
        if curve else {},
        curve={"tasks": list(curve["tasks"]), "methods": list(curve["methods"])} if curve else {},
        intrinsic=read_json(metrics / "intrinsic.json"))


def imported_record(inputs: ReportInputs, model: str) -> dict | None:
    """The provenance of ``model`` when its weights were imported, else None."""
    record = inputs.weights.get(model)
    return record if record and record["source"] == "import" else None
