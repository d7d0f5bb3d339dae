"""Highway layers (Srivastava et al. 2015), as used on top of the ELMo char-CNN."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F


class Highway(nn.Module):
    """A stack of ``num_layers`` highway layers, each mapping x in R^d to y in R^d:

        g = sigmoid(B x + b)                       (carry gate, per dimension)
        y = g * x + (1 - g) * f(A x + a)

    ``f`` is the nonlinearity (ReLU in ELMo). The gate bias ``b`` starts at ``carry_bias`` > 0
    so each layer starts close to the identity (it carries x) and learns how much to transform;
    2.0 (sigma(2) ~ 0.88 carried) is bilm-tf's ELMo choice, AllenNLP uses 1.0.
    A and B are computed with one (2d x d) matmul per layer.
    """

    def __init__(
        self,
        dim: int,
        num_layers: int = 1,
        activation: Callable[[torch.Tensor], torch.Tensor] = F.relu,
        carry_bias: float = 2.0,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.activation = activation
        self.carry_bias = carry_bias
        self.layers = nn.ModuleList(nn.Linear(dim, 2 * dim) for _ in range(num_layers))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for layer in self.layers:
            nn.init.normal_(layer.weight, std=(1.0 / self.dim) ** 0.5)
            nn.init.zeros_(layer.bias[: self.dim])
            nn.init.constant_(layer.bias[self.dim :], self.carry_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            transform, gate = layer(x).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            x = gate * x + (1 - gate) * self.activation(transform)
        return x
