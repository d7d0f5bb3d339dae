"""Fine-tuning a network on a task (Devlin et al. 2019): ``bert-finetune`` and ``bert-scratch``,
a left-to-right LM's ``<family>-finetune``, and any Hugging Face checkpoint's
``hf-<name>-finetune``.

All weights, encoder and a small task head, are trained together with the shared loop
(:func:`ctxrep.training.loop.train`): AdamW without decay on biases and LayerNorm gains,
linear warm-up then linear decay, gradient clipping, seeded batches and dropout. ``bert-scratch``
is the same run from a freshly initialised encoder of the same shape: the no-pretraining control.

    Network               what fine-tuning needs of a network: its tokenizer, padding id,
                          width, positions and encoder (:class:`BertNetwork`: a BERT folder of
                          this project's or an imported one; ``HFNetwork``: any Hugging Face
                          checkpoint, :mod:`ctxrep.models.hf_checkpoint`)
    TaskFormat            per task kind: inputs, head, loss, predictions (its ``task_format``,
                          :mod:`ctxrep.kinds`)
    FinetuneModel         encoder + head
    EncodedSplits         a cell's rows as the task's format encoded them (train, dev)
    FinetuneObjective     the loop's Objective: plan / batch / loss / evaluate
    run_finetune          one seed at one learning rate
    run_finetune_seed     one seed, its learning rate given, or chosen from the params' grid
                          on the dev split
    FineTuning            the approach a ``finetune`` cell runs (:mod:`ctxrep.transfer.cell`)

The budget is in optimizer steps (``steps``, the schedule's length), not epochs: a task with
400 training sentences gets as many updates as one with 40,000, and early stopping on the dev
split, scored every ``eval_every`` steps, ends a run that no longer improves. Batches hold
sequences of similar length, padded to the batch's longest, never to ``max_seq_len``, so the
extra steps cost little.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch
from tokenizers import Tokenizer
from torch import nn

from ctxrep import config, kinds, seeds
from ctxrep.config import BERT_MODELS, FINETUNE_METHODS, FROM_SCRATCH, FinetuneTrainingParams
from ctxrep.kinds.interface import Feature, TaskFormat
from ctxrep.models.bert import BertConfig, BertModel, flops_per_token, init_weights
from ctxrep.models.bert_hf import config_from_hf, load_pretrained
from ctxrep.models.hf_checkpoint import HFNetwork, checkpoint_record
from ctxrep.training.loop import LoopConfig, train
from ctxrep.transfer.data import CellData, training_batches
from ctxrep.transfer.record import SeedResult
from ctxrep.transfer.scoring import primary_key, score
from ctxrep.transfer.selection import BestOnDev, SelectsOnDev, interval_losses

if TYPE_CHECKING:
    from datasets import Dataset

log = logging.getLogger(__name__)



# ----------------------------------------------------------------------------------------------
# Model directory: config, encoder, tokenizer


def read_bert_config(model_dir: Path) -> BertConfig:
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: missing; model_dir must be a Hugging Face BERT directory "
            "(config.json, model.safetensors, tokenizer.json) as written by pretrain_bert")
    return config_from_hf(json.loads(path.read_text()))


def build_encoder(model_dir: Path, pretrained: bool, seed: int) -> BertModel:
    """The encoder to fine-tune, in float32: the pretrained weights of ``model_dir``, or (the
    no-pretraining control) a BertModel of the same config freshly initialised from ``seed``."""
    config = read_bert_config(model_dir)
    if pretrained:
        encoder = load_pretrained(model_dir).bert
    else:
        torch.manual_seed(seed)
        encoder = BertModel(config)
    return encoder.float()


def load_tokenizer(model_dir: Path) -> Tokenizer:
    """The fast WordPiece tokenizer of ``model_dir`` (``tokenizer.json``, or ``vocab.txt``
    converted by ``transformers``), with padding and truncation off: formats cut sequences."""
    model_dir = Path(model_dir)
    if (model_dir / "tokenizer.json").is_file():
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    elif (model_dir / "vocab.txt").is_file():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True).backend_tokenizer
    else:
        raise FileNotFoundError(f"{model_dir}: no tokenizer.json or vocab.txt; model_dir must hold "
                                "the tokenizer the model was pretrained with")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    for special in ("[CLS]", "[SEP]", "[PAD]"):
        if tokenizer.token_to_id(special) is None:
            raise ValueError(f"{model_dir}: the tokenizer has no {special} token (not a BERT WordPiece?)")
    return tokenizer


@runtime_checkable
class Network(Protocol):
    """A network fine-tuning can start from: its tokenizer (encodings with its specials at both
    ends, padding and truncation off), padding id, width, usable positions (None: no limit of
    its own), the std its heads are initialised with, and its encoder, which maps
    (input_ids, token_type_ids, attention_mask) to a :class:`~ctxrep.models.bert.BertOutput`."""

    tokenizer: Tokenizer
    pad_id: int
    hidden_size: int
    max_positions: int | None
    initializer_range: float

    def encoder(self, pretrained: bool, seed: int) -> nn.Module:
        """Its pretrained weights, or (the no-pretraining control) a fresh seeded init."""

    def flops_per_token(self, length: int) -> float:
        """Training FLOPs per sub-word at sequences of ``length`` (of the encoder last built)."""


class BertNetwork:
    """A BERT folder (config.json, model.safetensors, tokenizer.json) as pretrain_bert,
    pretrain_ltr and import_bert write it: this project's BERT, encoder or left-to-right."""

    def __init__(self, model_dir: Path | str):
        self.model_dir = Path(model_dir)
        self.config = read_bert_config(self.model_dir)
        self.tokenizer = load_tokenizer(self.model_dir)
        self.pad_id = self.tokenizer.token_to_id("[PAD]")
        self.hidden_size = self.config.hidden_size
        self.max_positions = self.config.max_position_embeddings
        self.initializer_range = self.config.initializer_range

    def encoder(self, pretrained: bool, seed: int) -> BertModel:
        return build_encoder(self.model_dir, pretrained, seed)

    def flops_per_token(self, length: int) -> float:
        return flops_per_token(self.config, length, 0.0)


class FinetuneModel(nn.Module):
    """head(encoder(input_ids, token_type_ids, attention_mask), batch): all weights trainable."""

    def __init__(self, encoder: nn.Module, head: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.head = head

    def forward(self, batch: dict) -> torch.Tensor:
        encoded = self.encoder(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        return self.head(encoded, batch)


# ----------------------------------------------------------------------------------------------
# Batching, inference, the loop's Objective


def collate(features: list[Feature], task: TaskFormat, pad_id: int, device: torch.device) -> dict:
    """Tensors for a list of features, padded to the longest of them."""
    length = max(len(f["input_ids"]) for f in features)

    def padded(rows: list[list[int]], value: int) -> torch.Tensor:
        return torch.tensor([row + [value] * (length - len(row)) for row in rows])

    batch = {
        "input_ids": padded([f["input_ids"] for f in features], pad_id),
        "token_type_ids": padded([f["token_type_ids"] for f in features], 0),
        "attention_mask": padded([[1] * len(f["input_ids"]) for f in features], 0),
    }
    for name, value in task.token_fields.items():
        batch[name] = padded([f[name] for f in features], value)
    for name in task.sequence_fields:
        batch[name] = torch.tensor([f[name] for f in features])
    return {name: tensor.to(device) for name, tensor in batch.items()}


@torch.no_grad()
def infer(model: FinetuneModel, task: TaskFormat, features: list[Feature], batch_size: int,
          pad_id: int, device: torch.device) -> list[torch.Tensor]:
    """The head's output for every feature (float32, on CPU; token-level outputs cut to the
    feature's length). Batches are formed by length to keep padding small."""
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    outputs: list[torch.Tensor | None] = [None] * len(features)
    for chunk in range(0, len(order), batch_size):
        indices = order[chunk: chunk + batch_size]
        output = model(collate([features[i] for i in indices], task, pad_id, device)).float().cpu()
        for row, i in enumerate(indices):
            length = len(features[i]["input_ids"])
            outputs[i] = output[row, :length] if task.token_level_output else output[row]
    return outputs


@dataclass
class EncodedSplits:
    """A cell's rows as fine-tuning reads them: the task's format (``task``) and the features
    it encoded from the training and dev rows, beside the dev rows themselves (their scores
    select the best evaluation)."""

    task: TaskFormat
    train: list[Feature]
    dev: list[Feature]
    dev_set: Dataset
    pad_id: int       # the tokenizer's [PAD]


class FinetuneObjective(SelectsOnDev):
    """The shared loop's view of fine-tuning: seeded shuffles of the training features into
    batches, the task's loss, and the dev split's scores (the cell's metric), which select the
    best evaluation; ``data.patience`` evaluations without a better one end training."""

    def __init__(self, model: FinetuneModel, encoded: EncodedSplits, data: CellData,
                 batch_size: int, seed: int, device: torch.device):
        self.model, self.encoded, self.task = model, encoded, encoded.task
        self.kind, self.metric = data.kind, data.metrics
        self.batch_size, self.seed, self.device = batch_size, seed, device
        self.selection = BestOnDev(model, primary_key(self.metric), data.patience)
        self.train_lengths = [len(f["input_ids"]) for f in encoded.train]

    def plan(self, epoch: int) -> list[list[int]]:
        """Seeded batches of similar-length features (padding per batch is then small)."""
        return training_batches(self.train_lengths, self.batch_size,
                                seeds.FINETUNE_BATCHES.at(self.seed, epoch))

    def batch(self, indices: list[int], step: int) -> dict:
        return collate([self.encoded.train[i] for i in indices], self.task, self.encoded.pad_id,
                       self.device)

    def loss(self, batch: dict, model) -> tuple[torch.Tensor, dict, int]:
        loss = self.task.loss(model(batch), batch)
        return loss, {"loss": float(loss.detach())}, int(batch["attention_mask"].sum())

    def predict(self, features: list[Feature], dataset) -> list:
        outputs = infer(self.model, self.task, features, self.batch_size, self.encoded.pad_id,
                        self.device)
        return self.task.predict(outputs, features, dataset)

    def dev_scores(self) -> dict:
        dev_set = self.encoded.dev_set
        return score(self.kind, self.metric, dev_set, self.predict(self.encoded.dev, dev_set))


# ----------------------------------------------------------------------------------------------
# Entry point


def remove_checkpoints(ckpt_dir: Path) -> None:
    """Delete the loop's step folders (they only serve resuming an unfinished run) and
    ``ckpt_dir`` itself when nothing else is left in it."""
    for folder in [*ckpt_dir.glob("step-*"), *ckpt_dir.glob(".tmp-step-*")]:
        shutil.rmtree(folder, ignore_errors=True)
    if ckpt_dir.is_dir() and not any(ckpt_dir.iterdir()):
        ckpt_dir.rmdir()




def as_network(network: Network | Path | str) -> Network:
    """``network`` itself, or the :class:`BertNetwork` of a BERT folder."""
    return network if isinstance(network, Network) else BertNetwork(network)


def run_finetune_seed(data: CellData, network: Network | Path, pretrained: bool,
                      p: FinetuneTrainingParams, seed: int, ckpt_dir: Path,
                      lr: float | None = None, run=None, device=None,
                      live_dir: Path | None = None) -> SeedResult:
    """One seed of a fine-tuning cell at rate ``lr``; with ``lr`` None, at every rate of
    ``p.lr`` (a grid: each run in full, with early stopping), keeping the one with the best dev
    score (the first on a tie). Its result names the rate (``lr``) and, for a grid, every
    rate's best dev score (``lr_search``). The evaluation split plays no part in the choice:
    each trial predicts it, but only the chosen trial's predictions are returned."""
    rates = [lr] if lr is not None else p.rates
    network = as_network(network)
    if len(rates) == 1:
        return run_finetune(data, network, pretrained, replace(p, lr=rates[0]), seed, ckpt_dir,
                            run, device, live_dir)
    trials = {}
    for rate in rates:
        name = f"lr{rate:g}"
        with (run.child(f"{name}", {"lr": rate}) if run is not None
              else contextlib.nullcontext()) as trial_run:
            trials[rate] = run_finetune(data, network, pretrained, replace(p, lr=rate), seed,
                                        Path(ckpt_dir) / name, trial_run, device,
                                        live_dir and Path(live_dir) / name)
        log.info("seed %d, lr %g: best dev score %.4f", seed, rate, trials[rate].dev_score)
    remove_checkpoints(Path(ckpt_dir))  # the trials' folders are gone: the seed's own too
    best = max(rates, key=lambda rate: trials[rate].dev_score)  # max keeps the first of a tie
    return replace(trials[best], lr_search={f"{rate:g}": round(trials[rate].dev_score, 6)
                                            for rate in rates})


def run_finetune(data: CellData, network: Network | Path, pretrained: bool,
                 p: FinetuneTrainingParams, seed: int, ckpt_dir: Path, run=None, device=None,
                 live_dir: Path | None = None) -> SeedResult:
    """Fine-tune ``network`` (or the BERT of a folder) from its weights (``pretrained``) or from
    a seeded random init of the same config on the ``data.train_idx`` rows of its training
    split at rate ``p.lr`` (a number), keep the weights with the best score on its
    ``data.dev_idx`` rows (scored every ``p.eval_every`` steps), and score the evaluated split
    with the task's metrics once, at the end.
    Curves go to ``run`` (MLflow) and ``live_dir`` (DVCLive).

    At most ``p.steps`` steps, each a batch of ``p.batch_size`` features (examples, or context
    windows for span QA), the data reshuffled each epoch; ``data.patience`` evaluations without a
    better dev score end it sooner. A checkpoint is written every ``p.checkpoint_evals``
    evaluations (none when that is past ``p.steps``) so a killed run resumes from the last one;
    it is removed once training ends (``ckpt_dir`` must be this run's
    own: a step folder left there by another run would be resumed).

    The result's ``train_flops`` are the encoder's, at the mean feature length (the small head
    is not counted); ``train_features`` counts the sequences trained on.
    """
    started = time.perf_counter()
    kind, metric, splits, eval_split = data.kind, data.metrics, data.splits, data.eval_split
    task_kind = kinds.get(kind)  # stops on an unknown kind
    if isinstance(p.lr, list):
        raise TypeError(f"run_finetune trains at one rate; lr={p.lr} is a grid (run_finetune_seed)")
    for split in ("train", eval_split):
        if split not in splits:
            raise ValueError(f"splits: no {split!r} split (have {sorted(splits)})")
    train_set, eval_set = splits["train"].select(data.train_idx), splits[eval_split]
    dev_set = splits["train"].select(data.dev_idx)
    if len(train_set) == 0 or len(dev_set) == 0:
        raise ValueError(f"need training and dev examples (have {len(train_set)} and "
                         f"{len(dev_set)}): nothing to fine-tune on")
    network = as_network(network)
    if network.max_positions is not None and p.max_seq_len > network.max_positions:
        raise ValueError(f"max_seq_len: {p.max_seq_len} exceeds the {network.max_positions} "
                         f"positions of the network it fine-tunes")

    task = task_kind.task_format(network.tokenizer, p, train_set)
    task.check_columns(train_set, "train")
    task.check_columns(eval_set, eval_split)
    train_features, dev_features = task.encode(train_set), task.encode(dev_set)
    eval_features = task.encode(eval_set)

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    encoder = network.encoder(pretrained, seed)
    torch.manual_seed(seed)
    head = task.make_head(network.hidden_size, p.dropout)
    head.apply(lambda module: init_weights(module, network.initializer_range))
    model = FinetuneModel(encoder, head).to(device)

    batches_per_epoch = math.ceil(len(train_features) / p.batch_size)
    loop_config = LoopConfig(steps=p.steps, lr=p.lr, optimizer="adamw",
                             weight_decay=p.weight_decay, warmup_fraction=p.warmup_fraction,
                             schedule="linear", grad_clip=p.grad_clip, grad_accum=1,
                             eval_every=p.eval_every,
                             checkpoint_every=p.eval_every * p.checkpoint_evals,
                             log_every=max(1, p.eval_every // 4), seed=seed,
                             compile=p.compile, precision=p.precision)
    encoded = EncodedSplits(task, train_features, dev_features, dev_set, pad_id=network.pad_id)
    objective = FinetuneObjective(model, encoded, data, p.batch_size, seed, device)
    result = train(objective, loop_config, Path(ckpt_dir), run,
                   desc=f"{'fine-tune' if pretrained else 'from scratch'} {kind}",
                   live_dir=live_dir)
    remove_checkpoints(Path(ckpt_dir))
    objective.selection.restore()
    model.eval()
    predictions = objective.predict(eval_features, eval_set)
    mean_length = sum(len(f["input_ids"]) for f in train_features) / len(train_features)
    evaluated = [step for step, _ in result.evals]  # the loop's evaluations, the last at the end
    return SeedResult(
        scores=score(kind, metric, eval_set, predictions),
        predictions=predictions,
        best_epoch=objective.selection.best_epoch,
        curve={"train_loss": interval_losses(result.curve, evaluated),
               "dev": [round(x, 6) for x in objective.selection.history],
               "epoch": [round(step / batches_per_epoch, 4) for step in evaluated]},
        train_examples=len(train_set),
        steps=result.steps,
        train_tokens=result.train_tokens,
        trainable_params=sum(p.numel() for p in model.parameters() if p.requires_grad),
        train_flops=result.train_tokens * network.flops_per_token(round(mean_length)),
        train_loss=result.curve[-1][1] if result.curve else float("nan"),
        resumed_from=result.resumed_from,
        seconds=time.perf_counter() - started,
        train_features=len(train_features),
        lr=p.lr,
        dev_score=objective.selection.best_score,
    )


class FineTuning:
    """The fine-tuning approach of a cell (:class:`ctxrep.transfer.cell.Approach`): a BERT of
    ``params.bert``, pretrained (``bert-finetune``, ``<family>-finetune``) or freshly
    initialised (``bert-scratch``), or the Hugging Face checkpoint ``hf.<name>``
    (``hf-<name>-finetune``), trained with a head. The first seed's rate (chosen on dev where
    ``params.lr`` is a grid) trains the others."""

    unit = "sub-word tokens"

    def __init__(self, method: str, params: FinetuneTrainingParams,
                 checkpoint: config.HFEncoderParams | None = None):
        if not config.is_finetune_method(method):
            raise ValueError(f"{method} is not a fine-tuning method "
                             f"({', '.join(FINETUNE_METHODS)}, hf-<name>-finetune): its cells "
                             f"run in stage transfer")
        self.method, self.params = method, params
        self.hf = config.hf_name(method) if config.is_hf_finetune(method) else None
        if self.hf is not None and checkpoint is None:
            raise ValueError(f"{method}: the checkpoint hf.{self.hf} of the params is needed")
        self.source = Path(checkpoint.path if self.hf is not None else BERT_MODELS[params.bert])
        self.network: Network | None = None
        self.lr: float | None = None

    @classmethod
    def for_cell(cls, method: str, p: FinetuneTrainingParams, params: dict) -> FineTuning:
        """As stage ``finetune`` builds it: ``hf-<name>-finetune`` reads ``hf.<name>``."""
        hf = config.hf_name(method) if config.is_hf_finetune(method) else None
        return cls(method, p, config.load_hf(params, hf) if hf is not None else None)

    def inputs(self, task: str) -> list[Path]:
        # A Hugging Face checkpoint's record names the sha256 of each of its files, and prepare()
        # stops unless the folder holds exactly those: hashing the record keys the same bytes
        # without reading the checkpoint twice.
        return [checkpoint_record_path(self.hf) if self.hf is not None else self.source]

    def prepare(self, data: CellData) -> None:
        self.lr = None
        if self.network is None:
            if self.hf is not None:
                check_checkpoint(self.source, checkpoint_record_path(self.hf))
                self.network = HFNetwork(self.source)
            else:
                self.network = BertNetwork(self.source)
        positions = self.network.max_positions
        if positions is not None and self.params.max_seq_len > positions:
            raise config.ParamError(f"transfer.{config.transfer_section(self.method)}.max_seq_len",
                                    self.params.max_seq_len,
                                    f"at most the {positions} positions of {self.source}")

    def train_seed(self, data: CellData, seed: int, ckpt: Path, run,
                   live_dir: Path | None) -> SeedResult:
        result = run_finetune_seed(data, self.network, self.method not in FROM_SCRATCH,
                                   self.params, seed, ckpt, self.lr, run, live_dir=live_dir)
        self.lr = result.lr
        return result

    def eval_oov_rate(self, data: CellData) -> float | None:
        return None


def checkpoint_record_path(name: str) -> Path:
    """The record of checkpoint ``hf.<name>`` that ``extract_hf@<name>`` writes: the sha256 of
    each of its files. A ``finetune_hf`` cell depends on it, not on the folder (DVC's matrix
    gives a stage the checkpoint's name, not its path)."""
    return Path("data/features") / config.hf_method(name) / "checkpoint.json"


def check_checkpoint(folder: Path, record: Path) -> None:
    """Stop unless ``folder`` holds exactly the files, with the sha256, that ``record`` names:
    the cell trains on what its declared dependency says."""
    if not record.is_file():
        raise FileNotFoundError(f"{record}: missing; stage extract_hf writes it (the checkpoint's "
                                f"files and their sha256)")
    expected = json.loads(record.read_text())["files"]
    found = checkpoint_record(folder)["files"]
    if found != expected:
        changed = sorted(set(found.items()) ^ set(expected.items()))
        raise ValueError(f"{folder}: its files differ from {record} ({changed[0][0]}, ...): the "
                         f"checkpoint changed since it was recorded; run `dvc repro` (or "
                         f"`make repro`), which records it again first")


__all__ = ["FineTuning", "Network", "BertNetwork", "run_finetune", "run_finetune_seed", "build_encoder",
           "load_tokenizer", "read_bert_config", "FinetuneModel", "EncodedSplits", "FinetuneObjective", "collate",
           "infer"]
