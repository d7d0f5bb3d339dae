"""The biLM's CPU LSTM kernel (ctxrep.models.lstmp_cpu): the same function as torch.nn.LSTM with a
projection, values and every gradient, and a working fallback where it cannot be built."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from ctxrep.models import lstmp_cpu
from ctxrep.models.bilm import LstmWithProjection


def layer_and_input(batch=3, steps=7, seed=0):
    torch.manual_seed(seed)
    layer = LstmWithProjection(6, 12, 4)
    x = torch.randn(batch, steps, 6, requires_grad=True)
    return layer, x


def values_and_gradients(layer, x, run):
    out = run(x)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return out, torch.autograd.grad((out * weights).sum(), [x, *layer.lstm.parameters()])


def test_the_kernel_builds_here():
    # Every other test of this file compares the kernel with torch: on a machine where it did not
    # build they would compare torch with itself. CI has g++ and ninja, so this must hold there.
    assert lstmp_cpu.kernel() is not None


@pytest.mark.parametrize("batch,steps", [(3, 7), (1, 1), (16, 25)])
def test_kernel_matches_torch_lstm_values_and_gradients(batch, steps):
    layer, x = layer_and_input(batch, steps)
    assert lstmp_cpu.applies(x)
    out, grads = values_and_gradients(layer, x, layer)  # the kernel
    ref_out, ref_grads = values_and_gradients(layer, x, lambda v: layer.lstm(v)[0])
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    names = ["x"] + [name for name, _ in layer.lstm.named_parameters()]
    for name, got, want in zip(names, grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4, msg=lambda m, n=name: f"d/d{n}: {m}")


def test_kernel_is_causal_and_deterministic():
    layer, x = layer_and_input()
    with torch.no_grad():
        out = layer(x)
        changed = x.clone()
        changed[:, 4] += 1.0
        moved = layer(changed)
        assert torch.equal(out, layer(x))  # bitwise the same on a second call
    assert torch.equal(out[:, :4], moved[:, :4])  # steps before the change do not see it
    assert not torch.allclose(out[:, 4:], moved[:, 4:])


def test_the_two_bias_gradients_are_separate_tensors():
    layer, x = layer_and_input()
    layer(x).sum().backward()
    b_ih, b_hh = layer.lstm.bias_ih_l0.grad, layer.lstm.bias_hh_l0.grad
    assert torch.equal(b_ih, b_hh) and b_ih.data_ptr() != b_hh.data_ptr()


def test_outside_fp32_cpu_the_layer_runs_torch_lstm():
    layer, x = layer_and_input()
    assert not lstmp_cpu.applies(x.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not lstmp_cpu.applies(x)
    layer.double()
    torch.testing.assert_close(layer(x.double()), layer.lstm(x.double())[0], atol=0, rtol=0)


def test_a_failed_build_warns_once_and_falls_back_to_torch(monkeypatch):
    from torch.utils import cpp_extension

    def no_compiler(*args, **kwargs):
        raise RuntimeError("compiler not found\nError building extension 'ctxrep_lstmp_cpu'")

    monkeypatch.setattr(cpp_extension, "load", no_compiler)
    lstmp_cpu.kernel.cache_clear()
    try:
        layer, x = layer_and_input()
        with pytest.warns(UserWarning, match="could not be built .*Error building extension.*torch.nn.LSTM"):
            assert not lstmp_cpu.applies(x)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once, not at every call
            torch.testing.assert_close(layer(x), layer.lstm(x)[0], atol=0, rtol=0)
    finally:
        lstmp_cpu.kernel.cache_clear()  # the next caller builds (loads the cached build) again


def test_two_layers_at_once_match_torch_lstm_each():
    # The biLM runs layer l of both directions in one call, each on its own thread: the path
    # where autograd's per-thread state and the threads' own matmuls could differ from one layer.
    (first, x), (second, y) = layer_and_input(16, 25, seed=0), layer_and_input(16, 25, seed=1)
    outputs = LstmWithProjection.run_together([first, second], [x, y])
    weights = [torch.randn(out.shape, generator=torch.Generator().manual_seed(k)) for k, out in enumerate(outputs)]
    inputs = [x, *first.lstm.parameters(), y, *second.lstm.parameters()]
    grads = torch.autograd.grad(sum((out * w).sum() for out, w in zip(outputs, weights)), inputs)
    ref_outputs = [first.lstm(x)[0], second.lstm(y)[0]]
    ref_grads = torch.autograd.grad(sum((out * w).sum() for out, w in zip(ref_outputs, weights)), inputs)
    for got, want in zip(outputs, ref_outputs):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("scale", [100.0, 1e4])
def test_saturated_gates_saturate_instead_of_turning_nan(scale):
    # Pre-activations beyond ~88 overflow exp(-x); the vectorised cell loop must still give the
    # limits (0 or 1) as torch does: a biLM in training hit exactly this (NaN at step 451).
    layer, x = layer_and_input(4, 9)
    x = (x.detach() * scale).requires_grad_()
    out, grads = values_and_gradients(layer, x, layer)
    ref_out, ref_grads = values_and_gradients(layer, x, lambda v: layer.lstm(v)[0])
    assert torch.isfinite(out).all() and all(torch.isfinite(g).all() for g in grads)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5 * scale, rtol=1e-4)


def test_backward_leaves_the_incoming_gradient_as_it_was():
    # The time loop accumulates into its gradient buffer in place; a gradient that arrives already
    # step-major in memory must be copied, not written over (autograd may hand it elsewhere too).
    layer, x = layer_and_input()
    out = layer(x)
    incoming = torch.randn(out.shape[1], out.shape[0], out.shape[2]).transpose(0, 1)
    before = incoming.clone()
    (kernel_grad,) = torch.autograd.grad(out, x, grad_outputs=incoming)
    assert torch.equal(incoming, before)
    (torch_grad,) = torch.autograd.grad(layer.lstm(x)[0], x, grad_outputs=incoming)
    torch.testing.assert_close(kernel_grad, torch_grad, atol=1e-5, rtol=1e-4)


def test_a_lock_left_by_a_killed_build_is_gone_before_the_next_build_runs(tmp_path, monkeypatch,
                                                                          caplog):
    """torch's builder waits forever on a `lock` file a killed build left in its folder; the
    next build (holding ctxrep's OS lock, which no dead process can hold) removes it before
    torch's builder starts. (torch's builder itself is stubbed: a real build in another
    folder recompiles the kernel, ~30 s, and its waiting on the file is torch's behaviour.)"""
    import logging

    from torch.utils import cpp_extension

    builds = []

    def builder(*, build_directory, **kwargs):
        builds.append((Path(build_directory), (Path(build_directory) / "lock").exists()))

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpp_extension, "load", builder)
    lstmp_cpu.kernel.cache_clear()
    try:
        lstmp_cpu.kernel()  # learns the build folder
        folder = builds[0][0]
        (folder / "lock").write_text("")  # what `kill -9` of a build leaves
        lstmp_cpu.kernel.cache_clear()
        with caplog.at_level(logging.WARNING, logger="ctxrep.models.lstmp_cpu"):
            lstmp_cpu.kernel()
    finally:
        lstmp_cpu.kernel.cache_clear()  # the next caller loads the real build again
    assert builds[1] == (folder, False) and folder.parent == tmp_path
    assert "left by a kernel build that was killed" in caplog.text
