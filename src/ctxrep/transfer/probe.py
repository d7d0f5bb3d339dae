"""Linear probes: how much of a task each frozen layer makes *linearly* available.

For every layer ``j`` of a frozen model (the biLM's L+1 layers or BERT's L+1 hidden layers, as
stored by the extract stage in ``data/features/<model>/<task>/``) a multinomial logistic
regression is trained on that layer alone and scored on the validation split:

    p(y | x) = softmax(W z + b),   z = (x - mean_train) / std_train      (one W, b per layer)

trained with AdamW on the cross-entropy for a fixed number of epochs (seeded, so the same
features and params give the same scores). Standardising each layer with its own training
statistics puts layers of very different scale (a biLM token layer vs an LSTM output) on an
equal footing, so the scores compare what the layers encode, not how large their vectors are.

Tasks (the ELMo paper's §5.3 probes, on the data this project has):

- ``ud_pos``: UPOS tagging, one item per word: the word's vector → its tag (token accuracy).
- ``wic``: word sense, one item per sentence pair: the target word's vectors ``u`` and ``v`` in
  the two sentences, combined as ``[u; v; |u - v|; u * v]`` → same sense or not (accuracy).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ctxrep import kinds
from ctxrep.config import ProbeParams, as_dict
from ctxrep.kinds.shared import ProbeData
from ctxrep.transfer.features import FeatureStore

# task -> the metric the probe reports (the task's primary metric)
PROBE_METRICS = {"ud_pos": "token_accuracy", "wic": "accuracy"}
PROBE_KINDS = {"ud_pos": "tagging", "wic": "word_in_context"}
TRAIN_SPLIT, EVAL_SPLIT = "train", "validation"


# --------------------------------------------------------------------------------------------
# items: per-layer feature matrices and labels (each probed kind's ``probe_items``)


def probe_kind(task: str):
    """The kind module of a probed task: it makes the items, caps and names them."""
    if task not in PROBE_KINDS:
        raise ValueError(f"no probe for task {task!r}; probed tasks: {sorted(PROBE_METRICS)}")
    return kinds.get(PROBE_KINDS[task])


def task_items(task: str, store: FeatureStore, dataset, split: str, max_items: int,
               seed: int | None) -> ProbeData:
    """The probe items of ``task`` for one split, as its kind makes them from the features of
    its text fields (see the module docstring)."""
    kind = probe_kind(task)
    fields = [store.field(split, field) for field in kind.FIELDS]
    return kind.probe_items(fields, dataset[split], max_items, seed, f"{store.root} ({split})")


# --------------------------------------------------------------------------------------------
# the probe


def standardise(train: np.ndarray, other: np.ndarray, eps: float = 1e-6):
    """z-score both with the training statistics (per feature)."""
    mean, std = train.mean(axis=0), train.std(axis=0) + eps
    return (train - mean) / std, (other - mean) / std


def _batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    order = torch.randperm(n, generator=generator)
    yield from order.split(batch_size)


def train_linear_probe(x: torch.Tensor, y: torch.Tensor, n_classes: int,
                       params: ProbeParams) -> nn.Linear:
    """Multinomial logistic regression on (n, dim) features, AdamW for ``params.epochs``."""
    torch.manual_seed(params.seed)
    generator = torch.Generator().manual_seed(params.seed)
    probe = nn.Linear(x.shape[1], n_classes)
    optimizer = torch.optim.AdamW(probe.parameters(), lr=params.lr,
                                  weight_decay=params.weight_decay)
    for _ in range(params.epochs):
        for batch in _batches(len(y), params.batch_size, generator):
            loss = nn.functional.cross_entropy(probe(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return probe


@torch.no_grad()
def probe_predict(probe: nn.Linear, x: torch.Tensor) -> np.ndarray:
    return probe(x).argmax(dim=1).numpy()


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread, then restore the setting.

    A probe's matrices are small: a thread pool only adds overhead (and, on shared cores, can
    make training tens of times slower), while one thread also fixes the reduction order."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@one_torch_thread()
def layer_predictions(train: ProbeData, evaluation: ProbeData, n_classes: int,
                      params: ProbeParams) -> list[np.ndarray]:
    """The evaluation items' predicted labels of a probe trained on each layer alone, layer 0
    first."""
    out = []
    for layer in range(train.x.shape[0]):
        x_train, x_eval = standardise(train.x[layer].astype(np.float32),
                                      evaluation.x[layer].astype(np.float32))
        probe = train_linear_probe(torch.from_numpy(x_train), torch.from_numpy(train.y),
                                   n_classes, params)
        out.append(probe_predict(probe, torch.from_numpy(x_eval)))
    return out


def probe_task(task: str, store: FeatureStore, dataset, params: ProbeParams) -> tuple[dict, dict]:
    """Per-layer probe scores of one task (the ``tasks.<task>`` entry of the probe JSON) and its
    per-example predictions: {metric, references, layers: [predictions of layer j]}, grouped by
    example (a list of tag names per sentence, a label per pair) so the report can bootstrap
    them."""
    kind = probe_kind(task)
    cap = getattr(params, kind.PROBE_CAP)  # words (tagging) or pairs (word in context)
    train = task_items(task, store, dataset, TRAIN_SPLIT, cap, params.seed)
    # The split extract wrote beside train (transfer.common.eval_split): validation by default.
    eval_split = EVAL_SPLIT if EVAL_SPLIT in dataset else next(s for s in dataset if s != TRAIN_SPLIT)
    evaluation = task_items(task, store, dataset, eval_split, params.max_eval_examples, None)
    classes = kind.n_labels(dataset[TRAIN_SPLIT])
    n_layers, _, dim = train.x.shape
    predicted = layer_predictions(train, evaluation, classes, params)

    def readable(items: np.ndarray) -> list:  # as the transfer saves them: tag names, label ids
        return kind.readable(dataset[TRAIN_SPLIT], evaluation.per_example(items))

    predictions = {"metric": PROBE_METRICS[task], "references": readable(evaluation.y),
                   "layers": [readable(p) for p in predicted]}
    return {"metric": PROBE_METRICS[task],
            "layers": [round(float((p == evaluation.y).mean()), 4) for p in predicted],
            # 6 FLOPs per weight and item (forward + backward), every layer's probe, every epoch
            "train_flops": 6.0 * n_layers * params.epochs * train.n_items * dim * classes,
            "train_examples": train.n_examples, "train_items": train.n_items,
            "eval_examples": evaluation.n_examples, "eval_items": evaluation.n_items}, predictions


def probe_model(model: str, features_root, load_dataset, params: ProbeParams,
                tasks=tuple(PROBE_METRICS)) -> tuple[dict, dict]:
    """The probe JSON of one model (every task whose features exist, the others marked
    skipped) and each probed task's per-example predictions (see :func:`probe_task`).

    ``features_root``: the directory holding ``<model>/<task>/``; ``load_dataset(task)``: the
    task's ``DatasetDict``.
    """
    results, predictions = {}, {}
    for task in tasks:
        root = Path(features_root) / model / task
        if not (root / "meta.json").exists():
            results[task] = {"metric": PROBE_METRICS[task],
                             "skipped": f"no {model} features of {task} at {root}: extract "
                                        f"featurizes only the tasks of grid.tasks (add {task} "
                                        f"there to probe it)"}
            continue
        store, splits = FeatureStore(root), load_dataset(task)
        store.check_examples({s: splits[s] for s in (TRAIN_SPLIT, EVAL_SPLIT)}, PROBE_KINDS[task])
        results[task], predictions[task] = probe_task(task, store, splits, params)
    return {"model": model, "params": as_dict(params), "tasks": results}, predictions
