"""Training and evaluating a feature-based task model with the shared loop.

Its inputs are frozen: the layers of a model's features (:class:`FeatureStore`, per the method)
and the static word vectors x_k (:class:`WordVectors`, looked up here per word), batched into
one :class:`~ctxrep.models.feature_models.WordFeatures` per text field. What a task kind
does with them (targets, head, loss, predictions) is its ``word_task()`` (:mod:`ctxrep.kinds`).

The model trains on the training examples minus a dev split (``train_dev_indices``), is scored
on dev after every epoch, keeps its best epoch (``BestOnDev``) and predicts the evaluation
split once, at the end. :class:`FeatureBased` is the approach a ``transfer`` cell runs
(:func:`ctxrep.transfer.cell.run_cell`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ctxrep import config, kinds, seeds
from ctxrep.families import STATIC_DIR
from ctxrep.models.word_vectors import WordVectors
from ctxrep.training.checkpoints import Checkpoints
from ctxrep.training.loop import LoopConfig, train
from ctxrep.models import feature_models as M
from ctxrep.transfer.data import CellData, training_batches
from ctxrep.transfer.features import FeatureStore, task_words
from ctxrep.transfer.record import SeedResult
from ctxrep.transfer.scoring import primary_key, score
from ctxrep.transfer.selection import BestOnDev, SelectsOnDev, epoch_losses

FEATURES = Path("data/features")
WORD_VECTORS = STATIC_DIR


def build_model(kind: str, method: str, n_layers: int, dim: int, n_labels: int, p,
                vector_dim: int = 0) -> nn.Module:
    """The task model of ``kind``; its encoder reads ``n_layers`` × ``dim`` model features and
    ``vector_dim``-sized word vectors, as ``method`` says (0: none)."""
    task = kinds.get(kind).word_task()
    encoder = M.FeatureEncoder(method, n_layers, dim, p.encoder_hidden, p.encoder_layers,
                               p.dropout, p.layer_norm, vector_dim)
    return task.make_head(encoder, n_labels, p)


class FeatureTaskObjective(SelectsOnDev):
    """The loop's Objective for one (task, method, seed) cell: it batches the frozen inputs of
    each text field; its kind's :class:`~ctxrep.kinds.interface.WordTask` turns examples into
    targets and outputs into a loss and predictions. ``store`` (model features) or ``vectors``
    (word vectors) is None when the method does not read it."""

    def __init__(self, model, data: CellData, p, seed: int, store: FeatureStore | None = None,
                 vectors: WordVectors | None = None):
        kind, splits, train_idx, dev_idx = data.kind, data.splits, data.train_idx, data.dev_idx
        self.model, self.kind, self.p, self.seed, self.metric = model, kind, p, seed, data.metrics
        self.task = kinds.get(kind).word_task()
        self.splits, self.eval_split = splits, data.eval_split
        self.fields = fields = kinds.get(kind).FIELDS
        self.features = {s: [store.field(s, f) if store is not None else None for f in fields]
                         for s in splits}
        self.vectors = vectors
        # per split and field, each example's rows in the word-vector table (OOV: the zero row)
        self.word_ids = {s: [[vectors.ids(task_words(ex, f)) for ex in
                              splits[s].select_columns([f])] if vectors is not None else None
                             for f in fields] for s in splits}
        self.targets = {s: self.task.targets(splits[s]) for s in splits}
        if not train_idx or not dev_idx:
            raise ValueError(f"need training and dev examples (have {len(train_idx)} and "
                             f"{len(dev_idx)})")
        self.train_idx, self.dev_idx = train_idx, dev_idx
        words = [sum(n) for n in zip(*(self._lengths("train", f) for f in range(len(fields))))]
        self.train_lengths = [words[i] for i in train_idx]  # what each epoch's batching reads
        self.dev_set = splits["train"].select(dev_idx)
        self.selection = BestOnDev(model, primary_key(data.metrics), data.patience)

    def _lengths(self, split: str, field: int) -> list[int]:
        """Each example's word count in text field ``field``."""
        store, ids = self.features[split][field], self.word_ids[split][field]
        return np.diff(store.offsets).tolist() if store is not None else [len(x) for x in ids]

    # -- the loop's protocol

    def plan(self, epoch: int) -> list[list[int]]:
        batches = training_batches(self.train_lengths, self.p.batch_size,
                                   seeds.FEATURE_BATCHES.at(self.seed, epoch))
        return [[self.train_idx[j] for j in batch] for batch in batches]

    def _pad(self, split: str, field: int, indices: list[int]) -> tuple[M.WordFeatures,
                                                                        torch.Tensor]:
        """The inputs of text field ``field`` (its index in the kind's FIELDS) for ``indices``,
        zero-padded to the longest, and the mask of real words."""
        store, ids = self.features[split][field], self.word_ids[split][field]
        if store is not None:
            items = [store[i] for i in indices]
            lengths = [x.shape[1] for x in items]
        else:
            lengths = [len(ids[i]) for i in indices]
        t = max(1, max(lengths))
        mask = np.zeros((len(indices), t), dtype=bool)
        for b, n in enumerate(lengths):
            mask[b, :n] = True
        inputs = M.WordFeatures()
        if store is not None:
            layers = np.zeros((len(items), store.n_layers, t, store.dim), dtype=np.float32)
            for b, x in enumerate(items):
                layers[b, :, :x.shape[1]] = x
            inputs.layers = torch.from_numpy(layers)
        if ids is not None:
            rows = np.full((len(indices), t), self.vectors.oov_id, dtype=np.int64)
            for b, i in enumerate(indices):
                if len(ids[i]) != lengths[b]:
                    raise ValueError(f"{split} example {i}: {len(ids[i])} words, but "
                                     f"{lengths[b]} feature rows")
                rows[b, :lengths[b]] = ids[i]
            inputs.vectors = torch.from_numpy(self.vectors.table[rows])
        return inputs, torch.from_numpy(mask)

    def _batch(self, split: str, indices: list[int], targets: list) -> dict:
        batch = {}
        batch["layers"], batch["mask"] = self._pad(split, 0, indices)
        if len(self.fields) > 1:
            batch["layers2"], batch["mask2"] = self._pad(split, 1, indices)
        batch.update(self.task.target_fields(targets, batch["mask"]))
        return batch

    def batch(self, indices: list[int], step: int) -> dict:
        return self._batch("train", indices, [self.targets["train"][i] for i in indices])

    def loss(self, batch: dict, model):
        loss = self.task.loss(model(batch), batch)
        task_loss = loss.item()
        loss = loss + self.model.encoder.penalty(self.p.mix_l2)
        words = int(batch["mask"].sum()) + (int(batch["mask2"].sum()) if "mask2" in batch else 0)
        return loss, {"loss": task_loss}, words

    @torch.no_grad()
    def predict(self, split: str, rows: list[int] | None = None) -> list:
        """Predictions for ``rows`` of ``split`` (default: all), in that order."""
        rows = list(range(len(self.splits[split]))) if rows is None else rows
        preds = []
        for start in range(0, len(rows), 64):
            indices = rows[start:start + 64]
            targets = [self.targets[split][i] for i in indices]
            batch = self._batch(split, indices, targets)
            preds += self.task.predict(self.model(batch), batch, targets)
        return preds

    def dev_scores(self) -> dict:
        return score(self.kind, self.metric, self.dev_set, self.predict("train", self.dev_idx))


def run_feature_transfer(data: CellData, p, seed: int, ckpt_dir: Path,
                         store: FeatureStore | None = None, vectors: WordVectors | None = None,
                         run=None, live_dir: Path | None = None) -> SeedResult:
    """Train ``data.method`` on ``store``'s model features and/or the word ``vectors`` (x_k),
    select its epoch on dev, score it on the evaluated split. Curves go to ``run`` and
    ``live_dir``."""
    torch.manual_seed(seed)
    n_layers, dim = (store.n_layers, store.dim) if store is not None else (0, 0)
    n_labels = kinds.get(data.kind).n_labels(data.splits["train"])
    model = build_model(data.kind, data.method, n_layers, dim, n_labels, p,
                        vectors.dim if vectors is not None else 0)
    objective = FeatureTaskObjective(model, data, p, seed, store, vectors)
    steps_per_epoch = math.ceil(len(data.train_idx) / p.batch_size)
    steps = p.epochs * steps_per_epoch
    # A dev evaluation and a checkpoint per epoch: early stopping, and a killed cell resumes
    # its current seed where it stopped. No weight decay, no warm-up.
    cfg = LoopConfig.per_epoch(p, steps_per_epoch, seed, weight_decay=0.0, warmup_fraction=0.0,
                               log_every=max(1, steps // 20))
    result = train(objective, cfg, ckpt_dir, run, desc=f"{data.method} seed {seed}",
                   live_dir=live_dir)
    Checkpoints(ckpt_dir).clear()
    objective.selection.restore()
    model.eval()
    predictions = objective.predict(data.eval_split)
    scores = score(data.kind, data.metrics, data.splits[data.eval_split], predictions)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # Training FLOPs ~ 6 x weights x tokens (forward 2, backward 4 per weight and token; the
    # frozen features were computed once, by extract). Heads run per sentence: a slight over-count.
    return SeedResult(
        scores=scores, predictions=predictions, best_epoch=objective.selection.best_epoch,
        curve={"train_loss": epoch_losses(result.curve, steps_per_epoch),
               "dev": [round(x, 6) for x in objective.selection.history]},
        train_examples=len(data.train_idx), steps=result.steps, train_tokens=result.train_tokens,
        trainable_params=trainable, train_flops=6.0 * trainable * result.train_tokens,
        train_loss=result.curve[-1][1] if result.curve else float("nan"),
        resumed_from=result.resumed_from, seconds=result.train_seconds,
        mix_weights=model.encoder.mix_weights())


class FeatureBased:
    """The feature-based approach of a cell (:class:`ctxrep.transfer.cell.Approach`): a task
    model trained on a model's frozen features and/or the static word vectors, per ``method``."""

    unit = "words"

    def __init__(self, method: str, params):
        if not config.is_feature_method(method):
            raise ValueError(f"{method} is not a feature-based method "
                             f"({', '.join(config.FEATURE_METHODS)}, hf-<name>): its cells run "
                             f"in stage finetune")
        self.method, self.params = method, params
        self.store: FeatureStore | None = None
        self.vectors: WordVectors | None = None

    @classmethod
    def for_cell(cls, method: str, p, params: dict) -> FeatureBased:
        """As stage ``transfer`` builds it (its features name everything else it reads)."""
        return cls(method, p)

    def inputs(self, task: str) -> list[Path]:
        """The model's features of ``task`` and the static word vectors, as the method reads
        them."""
        features = config.features_of(self.method)
        return ([FEATURES / features / task] if features is not None else []) + (
            [WORD_VECTORS] if config.reads_word_vectors(self.method) else [])

    def prepare(self, data: CellData) -> None:
        """Open the inputs once per approach (a learning curve prepares one per fraction)."""
        features = config.features_of(self.method)
        if features is not None:
            if self.store is None or self.store.root != FEATURES / features / data.task:
                self.store = FeatureStore(FEATURES / features / data.task)
            self.store.check_examples(data.splits, data.kind)
        if config.reads_word_vectors(self.method) and self.vectors is None:
            self.vectors = WordVectors.load(WORD_VECTORS)

    def train_seed(self, data: CellData, seed: int, ckpt: Path, run,
                   live_dir: Path | None) -> SeedResult:
        return run_feature_transfer(data, self.params, seed, ckpt, self.store, self.vectors, run,
                                    live_dir)

    def eval_oov_rate(self, data: CellData) -> float | None:
        """The evaluation words with no static vector (x_k = 0)."""
        if self.vectors is None:
            return None
        fields = kinds.get(data.kind).FIELDS
        return round(self.vectors.oov_rate(
            task_words(ex, f) for f in fields for ex in data.splits[data.eval_split]), 6)
