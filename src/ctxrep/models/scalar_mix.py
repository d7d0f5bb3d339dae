"""ScalarMix: the task-specific weighting of biLM (or BERT) layers from ELMo, eq. (1) of Peters et al. 2018."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ScalarMix(nn.Module):
    """Collapse N layers of the same shape into one:

        mix = gamma * sum_j softmax(s)_j * h_j

    with N trainable scalars ``s`` (start at 0: an equal mix, or at ``initial_scalars``) and a
    trainable scale ``gamma`` (starts at 1).

    With ``do_layer_norm=True`` each layer is first normalised, h_j <- (h_j - mu_j) / sigma_j, with
    mean and variance taken over all non-masked positions and all features *of one sequence*.
    (AllenNLP pools these statistics over the whole batch; pooling per sequence keeps an
    example's output independent of the other examples in its batch.) Padding positions never
    enter the statistics.

    Regularisation, ``penalty(coef)``: coef * ||s - mean(s)||^2. The paper and bilm-tf add
    lambda * ||s||^2 on the unnormalised scalars, which pulls toward s = 0, i.e. an equal mix. The
    softmax ignores the mean of s, so the part of that penalty that changes the mix is exactly
    ||s - mean(s)||^2; this form is zero at every equal mix and positive otherwise.
    """

    def __init__(
        self,
        num_layers: int,
        do_layer_norm: bool = False,
        initial_scalars: Sequence[float] | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        if initial_scalars is None:
            initial_scalars = [0.0] * num_layers
        if len(initial_scalars) != num_layers:
            raise ValueError(f"initial_scalars has {len(initial_scalars)} values for num_layers={num_layers}")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.scalars = nn.Parameter(torch.tensor(list(initial_scalars), dtype=torch.float), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(1.0), requires_grad=trainable)

    def forward(
        self, layers: Sequence[torch.Tensor] | torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Mix ``layers``: N tensors of shape (B, T, D), or one tensor (B, N, T, D) as ``Elmo`` returns.

        ``mask`` (B, T) marks real positions; it is needed only for layer norm.
        """
        if isinstance(layers, torch.Tensor):
            layers = layers.unbind(dim=1)
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix built for {self.num_layers} layers got {len(layers)}")
        if self.do_layer_norm:
            if mask is None:
                mask = torch.ones(layers[0].shape[:-1], dtype=torch.bool, device=layers[0].device)
            layers = [masked_layer_norm(h, mask) for h in layers]
        weights = torch.softmax(self.scalars, dim=0)
        mixed = sum(w * h for w, h in zip(weights, layers))
        return self.gamma * mixed

    def penalty(self, coef: float = 1.0) -> torch.Tensor:
        """coef * ||s - mean(s)||^2: zero exactly when the mix is equal (see class docstring)."""
        return coef * (self.scalars - self.scalars.mean()).pow(2).sum()

    def weights(self) -> torch.Tensor:
        """The normalised layer weights softmax(s), detached, for logging."""
        return torch.softmax(self.scalars.detach(), dim=0)


def masked_layer_norm(h: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """(h - mu) / sqrt(var + eps) with mu, var over the real positions and all features of each sequence.

    h: (B, T, D), mask: (B, T). Padding positions are normalised with their sequence's statistics
    but do not contribute to them.
    """
    m = mask.unsqueeze(-1).to(h.dtype)
    count = m.sum(dim=(1, 2), keepdim=True).clamp_min(1) * h.shape[-1]
    mean = (h * m).sum(dim=(1, 2), keepdim=True) / count
    var = (((h - mean) * m) ** 2).sum(dim=(1, 2), keepdim=True) / count
    return (h - mean) / torch.sqrt(var + eps)
