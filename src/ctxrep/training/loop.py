"""The training loop every training run shares: both pretraining objectives and the transfer
task models.

What is shared: optimizer (AdamW with decay only on matrices, or Adagrad as in ELMo) and
linear warm-up then linear decay (:mod:`ctxrep.training.optim`), gradient accumulation, gradient
clipping, bf16 autocast (``precision``, on CPU as on CUDA), ``torch.compile``, DDP under
``torchrun`` (:mod:`ctxrep.training.distributed`),
periodic evaluation, atomic checkpoints and exact resume (:mod:`ctxrep.training.checkpoints`),
NaN/inf stops, a progress bar, and the curves (DVCLive and MLflow, one path:
:mod:`ctxrep.training.curves`).

What a model brings is an :class:`Objective`: an epoch *plan* (batches of example indices, a
pure function of the epoch), a way to build a batch for a step, and its loss. Because the plan
and every random draw inside a step are seeded by (seed, epoch) and (seed, step), a run resumed
from a checkpoint at step k replays steps k.. exactly as an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from ctxrep import compute, seeds
from ctxrep.training.checkpoints import Checkpoints
from ctxrep.training.curves import Curves, is_point, train_point, val_point
from ctxrep.training.distributed import Dist, global_sum
from ctxrep.training.host_memory import keep_freed_memory
from ctxrep.training.optim import lr_factor, make_optimizer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopConfig:
    """What the loop is told. No field has a default: every value comes from a params section
    (:meth:`from_params`, :meth:`per_epoch`) or is spelled out by the caller."""

    steps: int
    lr: float
    optimizer: str                    # adamw | adagrad
    weight_decay: float
    warmup_fraction: float
    schedule: str                     # linear (warm-up then decay to 0) | constant (after warm-up)
    grad_clip: float                  # 0 = off
    grad_accum: int
    eval_every: int                   # 0 = only at the end
    checkpoint_every: int             # 0 = no intermediate checkpoints
    log_every: int
    seed: int
    compile: bool                     # torch.compile the training model (inductor, CPU or CUDA)
    precision: str                    # fp32 | bf16 (autocast on the model's device)

    @classmethod
    def from_params(cls, section) -> LoopConfig:
        """The loop keys of a pretraining params section (``ctxrep.config.LoopParams``)."""
        return cls(**{f.name: getattr(section, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def per_epoch(cls, p, steps_per_epoch: int, seed: int, *, weight_decay: float,
                  warmup_fraction: float, log_every: int, compile: bool = False,
                  precision: str = "fp32") -> LoopConfig:
        """A feature-based transfer cell's loop: ``p.epochs`` epochs of ``steps_per_epoch``
        steps at ``p.lr`` with ``p.grad_clip`` (its method's params section), AdamW and a
        linear schedule, a dev evaluation and a checkpoint per epoch (model selection, resume),
        one micro-batch per step."""
        return cls(steps=p.epochs * steps_per_epoch, lr=p.lr, optimizer="adamw",
                   weight_decay=weight_decay, warmup_fraction=warmup_fraction, schedule="linear",
                   grad_clip=p.grad_clip, grad_accum=1, eval_every=steps_per_epoch,
                   checkpoint_every=steps_per_epoch, log_every=log_every, seed=seed,
                   compile=False, precision="fp32")


class Objective(Protocol):
    model: nn.Module

    def plan(self, epoch: int) -> list[list[int]]:
        """Batches of example indices for ``epoch`` (deterministic)."""

    def batch(self, indices: list[int], step: int) -> dict:
        """Tensors for one micro-batch; random choices (masking) seeded by ``step``."""

    def loss(self, batch: dict, model: nn.Module) -> tuple[torch.Tensor, dict, int]:
        """(mean loss to backpropagate, floats to log, tokens processed).

        Run the forward pass through ``model``, not ``self.model``: during training it is the
        DDP / compiled wrapper, whose backward all-reduces the gradients."""

    def evaluate(self) -> dict:
        """Held-out metrics (no grad)."""

    # Optional: ``should_stop`` (bool attribute, read after each periodic evaluation: end
    # training early) and ``state_dict()`` / ``load_state_dict()`` (objective state saved in
    # and restored from checkpoints, e.g. model selection's best weights).


class NonFiniteLoss(RuntimeError):
    pass


# ------------------------------------------------------------------------------------- loop

@dataclass
class TrainResult:
    steps: int
    train_tokens: int
    train_seconds: float
    curve: list = field(default_factory=list)      # [step, loss, lr]
    evals: list = field(default_factory=list)      # [step, {metric: value}]
    eval_seconds: list = field(default_factory=list)  # [step, train_seconds] of each evaluation
    final_eval: dict = field(default_factory=dict)
    resumed_from: int = 0


def heldout_curve(result: TrainResult) -> list[dict]:
    """Each evaluation's step, training seconds so far (evaluation time excluded) and metrics."""
    seconds = dict((int(step), s) for step, s in result.eval_seconds)
    return [{"step": int(step), "train_s": round(seconds[int(step)], 1), **metrics}
            for step, metrics in result.evals if int(step) in seconds]


class _Plans:
    """Epoch plans, computed once per epoch: the size of every epoch so far (to find a step's
    epoch without recomputing earlier plans) and the latest few plans themselves."""

    def __init__(self, objective: Objective):
        self.objective = objective
        self.sizes: list[int] = []
        self.cache: dict[int, list[list[int]]] = {}

    def __getitem__(self, epoch: int) -> list[list[int]]:
        plan = self.cache.get(epoch)
        if plan is None:
            if len(self.cache) > 2:  # keep memory bounded over long runs
                self.cache.clear()
            plan = self.objective.plan(epoch)
            if not plan:
                raise ValueError("the objective's plan for an epoch is empty (no training data?)")
            self.cache[epoch] = plan
        if epoch == len(self.sizes):
            self.sizes.append(len(plan))
        return plan

    def size(self, epoch: int) -> int:
        while len(self.sizes) <= epoch:  # in order: sizes[e] is always epoch e's
            self[len(self.sizes)]
        return self.sizes[epoch]


def _locate(step: int, plans: _Plans, grad_accum: int) -> list[list[int]]:
    """The micro-batches of optimizer step ``step``."""
    start = step * grad_accum
    micro, epoch, offset = [], 0, 0
    while len(micro) < grad_accum:
        n = plans.size(epoch)
        if start + len(micro) < offset + n:
            micro.append(plans[epoch][start + len(micro) - offset])
        else:
            offset += n
            epoch += 1
    return micro


@dataclass
class _Training:
    """What one run of :func:`train` updates: the model, its optimizer and schedule, the
    checkpoints, and the result so far."""

    objective: Objective
    cfg: LoopConfig
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    ckpts: Checkpoints
    d: Dist
    result: TrainResult = field(default_factory=lambda: TrainResult(0, 0, 0.0))

    @property
    def model(self) -> nn.Module:
        return self.objective.model

    def resume(self) -> None:
        """Load the latest checkpoint, if any: weights, optimizer, schedule, the result so far
        and the objective's own state."""
        latest = self.ckpts.latest()
        if latest is None:
            return
        state, result = self.ckpts.load(latest), self.result
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        result.steps, result.train_tokens = int(state["step"]), int(state["train_tokens"])
        result.curve = [list(map(float, row)) for row in state["curve"].tolist()]
        result.evals = json.loads(bytes(state["evals"].tolist()).decode())
        if "eval_seconds" in state:  # optional: a checkpoint may hold no eval timings
            result.eval_seconds = [list(map(float, row)) for row in state["eval_seconds"].tolist()]
        result.train_seconds = float(state["train_seconds"])
        result.resumed_from = result.steps
        if "objective" in state:
            self.objective.load_state_dict(state["objective"])
        if self.d.main:
            log.info("resuming from %s (step %d of %d)", latest, result.steps, self.cfg.steps)

    def checkpoint(self, step: int) -> None:
        if not self.d.main:
            return
        result = self.result
        curve = torch.tensor(result.curve, dtype=torch.float64).reshape(-1, 3)
        evals = torch.tensor(list(json.dumps(result.evals).encode()), dtype=torch.uint8)
        eval_seconds = torch.tensor(result.eval_seconds, dtype=torch.float64).reshape(-1, 2)
        self.ckpts.save(step, {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "step": step,
            "train_tokens": result.train_tokens, "curve": curve, "evals": evals,
            "eval_seconds": eval_seconds, "train_seconds": result.train_seconds,
            **({"objective": self.objective.state_dict()}
               if hasattr(self.objective, "state_dict") else {})})

    def step(self, step: int, micro: list[list[int]], train_model: nn.Module,
             autocast) -> tuple[dict, int, torch.Tensor]:
        """One optimizer step over the micro-batches ``micro``: the mean of their logged values,
        the tokens this rank trained on, and the last micro-batch's loss. Raises
        :class:`NonFiniteLoss` on a non-finite loss or gradient norm."""
        cfg, d = self.cfg, self.d
        logs_sum: dict = {}
        step_tokens = 0
        for i, indices in enumerate(micro):
            if d.world > 1:  # each rank takes its slice of the global micro-batch
                indices = indices[d.rank::d.world]
            batch = self.objective.batch(indices, step * cfg.grad_accum + i)
            sync = (i == len(micro) - 1) or d.world == 1
            ctx = contextlib.nullcontext() if sync or not hasattr(train_model, "no_sync") \
                else train_model.no_sync()
            with ctx, autocast:
                loss, logs, tokens = self.objective.loss(batch, train_model)
            if not torch.isfinite(loss):
                raise NonFiniteLoss(
                    f"non-finite loss {loss.item()} at step {step} (micro-batch {i}, example "
                    f"indices {indices[:8]}{'...' if len(indices) > 8 else ''}); the last good "
                    f"checkpoint {self.ckpts.latest()} is kept")
            (loss / len(micro)).backward()
            step_tokens += tokens
            for k, v in logs.items():
                logs_sum[k] = logs_sum.get(k, 0.0) + float(v) / len(micro)
        if cfg.grad_clip > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                             cfg.grad_clip))
            if not math.isfinite(grad_norm):
                raise NonFiniteLoss(f"non-finite gradient norm at step {step}; the last good "
                                    f"checkpoint {self.ckpts.latest()} is kept")
            logs_sum["grad_norm"] = grad_norm
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return logs_sum, step_tokens, loss

    def evaluate(self, desc: str, curves: Curves, autocast) -> dict:
        """A held-out evaluation at the current step: logged, drawn, and kept in the result."""
        result = self.result
        metrics = _evaluate(self.objective, autocast)
        result.evals.append([result.steps, metrics])
        result.eval_seconds.append([result.steps, result.train_seconds])
        if self.d.main:
            log_evaluation(desc, result.steps, self.cfg.steps, metrics, result)
        curves.log(result.steps, val_point(metrics), {"train_s": result.train_seconds})
        return metrics


def _training_model(model: nn.Module, objective: Objective, cfg: LoopConfig, d: Dist,
                    device: torch.device) -> nn.Module:
    """The module a step runs: the model, wrapped in DDP across ranks and compiled as asked."""
    train_model = model
    if d.world > 1:
        # An objective that leaves parameters unused (BERT with nsp: false never calls its NSP
        # head) says so, or DDP would wait for their gradients forever.
        train_model = nn.parallel.DistributedDataParallel(
            model, device_ids=[d.local_rank] if device.type == "cuda" else None,
            find_unused_parameters=getattr(objective, "has_unused_parameters", False))
    if cfg.compile:
        if compute.refuses_compile(device):
            from ctxrep.config import ParamError

            raise ParamError("compute.isa", os.environ.get("MKL_CBWR", "portable").lower(),
                             "native for a CPU run with compile: true (inductor generates code "
                             "for this CPU, so the bytes are not portable anyway): add "
                             "SET='compute.isa=native'")
        # Shapes vary by design (a batch is padded to its longest sequence; the last batch and
        # the held-out passes have their own sizes): compile for symbolic shapes at once, not
        # for the first batch's and again at each new one (the default). On the tiny profile
        # (CPU, 2026-12-07): 52 against 84 s of CPU for BERT's pretraining, 69 against 97 for
        # the biLM's, the same losses.
        train_model = torch.compile(train_model, dynamic=True)
    return train_model


def train(objective: Objective, cfg: LoopConfig, ckpt_dir: Path, run=None,
          dist_info: Dist | None = None, desc: str = "train",
          live_dir: Path | None = None) -> TrainResult:
    """Train ``objective`` for ``cfg.steps`` optimizer steps, resuming from the latest checkpoint
    in ``ckpt_dir``. Curves go to ``live_dir`` (a DVCLive folder) and ``run`` (the MLflow run)
    through :class:`ctxrep.training.curves.Curves`."""
    from tqdm.auto import tqdm

    d = dist_info or Dist()
    model = objective.model
    device = next(model.parameters()).device
    if device.type == "cpu":
        keep_freed_memory()  # a step's freed blocks reused by the next, not faulted in again
    optimizer = make_optimizer(model, cfg.optimizer, cfg.lr, cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, cfg.steps, cfg.warmup_fraction, cfg.schedule))
    run_state = _Training(objective, cfg, optimizer, scheduler, Checkpoints(ckpt_dir), d)
    run_state.resume()
    result = run_state.result
    curves = Curves(live_dir, run) if d.main else Curves(None)
    # The row the next training-curve point's window starts at; a resumed run first replays
    # its checkpointed history, so its curves equal an uninterrupted run's.
    window = curves.replay(result.curve, result.evals, cfg.log_every, cfg.steps)
    train_model = _training_model(model, objective, cfg, d, device)
    autocast = precision_context(cfg.precision, device)

    plans = _Plans(objective)
    # disable=None: a bar on a terminal only; a log file gets one line per evaluation instead
    # of a carriage-return redraw per step.
    bar = tqdm(total=cfg.steps, initial=result.steps, desc=desc, unit="step",
               disable=None if d.main else True, dynamic_ncols=True)
    window_tokens, window_start = 0, time.perf_counter()
    model.train()
    for step in range(result.steps, cfg.steps):
        t0 = time.perf_counter()
        # dropout: a pure function of the step
        torch.manual_seed(seeds.STEP_DROPOUT.at(cfg.seed, step))
        logs_sum, step_tokens, loss = run_state.step(
            step, _locate(step, plans, cfg.grad_accum), train_model, autocast)

        result.steps = step + 1
        step_tokens = int(global_sum(step_tokens, d))  # every rank's slice of the global batch
        result.train_tokens += step_tokens
        result.train_seconds += time.perf_counter() - t0
        window_tokens += step_tokens
        lr = optimizer.param_groups[0]["lr"]
        result.curve.append([step + 1, logs_sum.get("loss", float(loss.detach())), lr])
        bar.update(1)
        if d.main and is_point(step + 1, cfg.log_every, cfg.steps):
            elapsed = time.perf_counter() - window_start
            tps = window_tokens / elapsed if elapsed > 0 else 0.0
            point = train_point(result.curve, window, len(result.curve))
            window = len(result.curve)
            bar.set_postfix(loss=f"{point['train/loss']:.3f}", tok_s=f"{tps:,.0f}")
            curves.log(step + 1, point, {**{f"train_{k}": v for k, v in logs_sum.items()
                                            if k != "loss"}, "tokens_per_s": tps})
            window_tokens, window_start = 0, time.perf_counter()
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0 and step + 1 < cfg.steps:
            run_state.evaluate(desc, curves, autocast)
            model.train()
            if getattr(objective, "should_stop", False):  # early stopping (model selection)
                break
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 \
                and step + 1 < cfg.steps:
            run_state.checkpoint(step + 1)
    bar.close()
    if window < len(result.curve):  # stopped early: the steps since the last point get theirs
        curves.log(result.steps, train_point(result.curve, window, len(result.curve)))
    if result.evals and result.evals[-1][0] == result.steps:  # stopped early, just evaluated
        result.final_eval = result.evals[-1][1]
    else:
        result.final_eval = run_state.evaluate(desc, curves, autocast)
    curves.close()
    return result


def precision_context(precision: str, device: torch.device):
    """The autocast a step and an evaluation run under: bf16 on the model's own device type,
    CPU included, so the branch a GPU run takes is the one the tests take on this machine."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    if precision == "fp32":
        return contextlib.nullcontext()
    raise ValueError(f"precision {precision!r}: expected 'fp32' or 'bf16'")


def log_evaluation(desc: str, step: int, steps: int, metrics: dict, result: TrainResult) -> None:
    """One log line per evaluation: where training is, the held-out metrics, the last loss."""
    shown = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool))
    loss = f", train loss {result.curve[-1][1]:.4g}" if result.curve else ""
    log.info("%s: step %d/%d (%.0f s of training): %s%s", desc, step, steps,
             result.train_seconds, shown, loss)


def _evaluate(objective: Objective, autocast) -> dict:
    objective.model.eval()
    with torch.no_grad(), autocast:
        return objective.evaluate()
