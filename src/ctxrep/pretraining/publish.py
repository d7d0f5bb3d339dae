"""What a pretraining stage leaves once its model is trained, besides the model and its curves."""

from __future__ import annotations

from pathlib import Path

from ctxrep.training.checkpoints import Checkpoints
from ctxrep.training.loop import TrainResult, heldout_curve


def publish(ctx, name: str, result: TrainResult, evaluation: dict, n_params: int,
            flops_per_token: float, ckpt_root: Path) -> dict:
    """What a pretraining stage leaves besides its model and its curves (``dvclive/<name>/``,
    written as it trained), once it has finished: ``metrics/<name>.json`` (``evaluation`` + run
    totals: the same bytes on every run) and its compute-ledger entry (with the timings, which
    differ run to run: among them the held-out curve against training seconds,
    ``heldout_curve``, for time-to-perplexity comparisons); its checkpoints go. ``ctx`` is the
    stage's :class:`ctxrep.stage.StageContext`."""
    metrics = {**evaluation, "train_tokens": result.train_tokens, "steps": result.steps,
               "params": n_params, "train_flops": float(flops_per_token) * result.train_tokens}
    ctx.write_metrics(f"metrics/{name}.json", metrics)
    ctx.compute(amount=result.train_tokens, unit="tokens", params=n_params,
                flops=metrics["train_flops"], train_s=round(result.train_seconds, 1),
                tokens_per_s=round(result.train_tokens / max(result.train_seconds, 1e-9), 1),
                heldout_curve=heldout_curve(result))
    Checkpoints(ckpt_root).clear()
    return metrics
