"""The optimizer and the learning-rate schedule of every training run (pretraining and transfer).

One rule for the optimizer: AdamW with weight decay on the matrices only (exactly the parameters
with ``ndim >= 2``: linear weights, embeddings; biases and LayerNorm gains are exempt, as in
BERT's AdamWeightDecayOptimizer), or Adagrad as in ELMo. The schedule: linear warm-up, then
linear decay to 0 or constant.
"""

from __future__ import annotations

import torch
from torch import nn

# AdamW's (beta1, beta2): torch's defaults, BERT's values. A rule of the training loop, not a
# param: no profile varies them.
ADAMW_BETAS = (0.9, 0.999)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups of ``model``'s trainable parameters: ``[decayed matrices,
    undecayed vectors]``, each in ``model.parameters()`` order (the order is part of the
    optimizer's state, and so of a checkpoint)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, optimizer: str, lr: float,
                   weight_decay: float) -> torch.optim.Optimizer:
    """``optimizer`` (adamw | adagrad) over ``model``'s trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adagrad":
        # ELMo's setting (TF Adagrad): accumulators start at 1.0.
        return torch.optim.Adagrad(params, lr=lr, initial_accumulator_value=1.0)
    # torch's fused kernel (one pass over each tensor) where it has one: ~5x faster than the
    # per-tensor loop on CPU (5M parameters: 6 ms against 31), the same update up to rounding.
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr, betas=ADAMW_BETAS,
                             fused=fused or None)


def lr_factor(step: int, steps: int, warmup_fraction: float, schedule: str) -> float:
    """The learning rate of optimizer step ``step`` (of ``steps``) as a fraction of the peak:
    linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0 (``linear``) or
    the peak (``constant``)."""
    warmup = max(1, round(warmup_fraction * steps)) if warmup_fraction > 0 else 0
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    return max(0.0, (steps - step) / max(1, steps - warmup))
