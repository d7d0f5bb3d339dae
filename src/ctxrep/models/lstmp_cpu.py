"""The LSTMP layer's time loop as a C++ kernel for CPU training (``lstmp_cpu.cpp`` beside this file).

Same math as ``torch.nn.LSTM(proj_size=P)`` (see ``LstmWithProjection``), split where it is
sequential and where it is not:

    forward:   X_gates = X W_ih^T + b_ih + b_hh          one matmul over all T steps
               for t: a_t, c_t, h_t                       the C++ loop (2 matmuls, 4 activations)
    backward:  for t (reversed): dA_t, dH_total_t         the C++ loop
               dX = dA W_ih,  dW_ih = dA^T X,  dW_hh = dA^T H_{t-1},  dW_hr = dH_total^T M,
               db = sum dA                                one matmul each, over all T steps

torch's CPU LSTM with a projection runs each step as a chain of small ATen calls and, in backward,
accumulates the weight gradients one step at a time through autograd; at the default biLM's
batch of 16 that overhead outweighs the matmuls (``bench/bench_bilm.py`` prints both).

The kernel is compiled once per machine with torch's extension builder (g++ and ninja, ~1 min;
cached under ``~/.cache/torch_extensions``). Where it cannot be built, :func:`kernel` returns
None, says why once, and the layer runs ``torch.nn.LSTM``: the same function, different rounding.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import torch
from torch import nn

SOURCE = Path(__file__).with_suffix(".cpp")


@functools.cache
def kernel():
    """The compiled extension module, or None (with one warning) where it cannot be built."""
    try:
        import ninja  # the build tool torch's extension builder runs, from the package index

        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        from torch.utils import cpp_extension

        return cpp_extension.load(name="ctxrep_lstmp_cpu", sources=[str(SOURCE)], extra_cflags=["-O3"])
    except Exception as error:  # no compiler, no ninja, a failed build: the slower path still works
        last_line = (str(error).strip().splitlines() or [""])[-1]
        warnings.warn(f"ctxrep: the CPU LSTMP kernel could not be built ({type(error).__name__}: {last_line}); "
                      "LSTM layers run torch.nn.LSTM instead (same math, slower)", stacklevel=2)
        return None


def applies(x: torch.Tensor) -> bool:
    """Whether ``x`` goes through the kernel: fp32 on CPU, outside autocast (bf16 runs torch's LSTM)."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
            and kernel() is not None)


class LstmpFunction(torch.autograd.Function):
    """(B, T, I) inputs and one layer's weights -> (B, T, P) projected states."""

    @staticmethod
    def forward(ctx, x, w_ih, w_hh, w_hr, b_ih, b_hh):
        B, T, _ = x.shape
        x_steps = x.transpose(0, 1).contiguous()  # (T, B, I): each step's rows contiguous
        x_gates = torch.addmm(b_ih + b_hh, x_steps.view(T * B, -1), w_ih.t()).view(T, B, -1)
        H, A, Cs, M = kernel().forward(x_gates, w_hh.contiguous(), w_hr.contiguous())
        ctx.save_for_backward(x_steps, w_ih, w_hh, w_hr, H, A, Cs, M)
        return H.transpose(0, 1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dH):
        x_steps, w_ih, w_hh, w_hr, H, A, Cs, M = ctx.saved_tensors
        T, B, _ = x_steps.shape
        dA, dH_total = kernel().backward(dH.transpose(0, 1).contiguous(), A, Cs, w_hh.contiguous(),
                                         w_hr.contiguous())
        dA = dA.view(T * B, -1)
        h_prev = torch.cat([H.new_zeros(1, B, H.shape[2]), H[:-1]]).view(T * B, -1)
        needs = ctx.needs_input_grad
        dx = (dA @ w_ih).view(T, B, -1).transpose(0, 1) if needs[0] else None
        dw_ih = dA.t() @ x_steps.view(T * B, -1) if needs[1] else None
        dw_hh = dA.t() @ h_prev if needs[2] else None
        dw_hr = dH_total.view(T * B, -1).t() @ M.view(T * B, -1) if needs[3] else None
        db = dA.sum(0) if needs[4] or needs[5] else None
        # the two bias vectors get the same gradient, as separate tensors (a clip or an
        # accumulation in place must not touch both)
        return dx, dw_ih, dw_hh, dw_hr, db, None if db is None else db.clone()


def lstmp(x: torch.Tensor, lstm: nn.LSTM) -> torch.Tensor:
    """``lstm(x)[0]`` for a one-layer, batch-first ``nn.LSTM(proj_size=P)``, through the kernel."""
    return LstmpFunction.apply(x, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.weight_hr_l0,
                               lstm.bias_ih_l0, lstm.bias_hh_l0)
