import math

import pytest
import torch

from ctxrep.models.scalar_mix import ScalarMix


def one_hot_layers():
    return [torch.tensor([[[1.0, 0.0, 0.0]]]), torch.tensor([[[0.0, 1.0, 0.0]]]), torch.tensor([[[0.0, 0.0, 1.0]]])]


def test_worked_example():
    mix = ScalarMix(3, initial_scalars=[math.log(0.2), math.log(0.3), math.log(0.5)])
    with torch.no_grad():
        mix.gamma.fill_(2.0)
    torch.testing.assert_close(mix.weights(), torch.tensor([0.2, 0.3, 0.5]))
    torch.testing.assert_close(mix(one_hot_layers()), torch.tensor([[[0.4, 0.6, 1.0]]]))


def test_stacked_input_like_elmo_output():
    mix = ScalarMix(3, initial_scalars=[0.1, -0.4, 0.7])
    layers = torch.randn(2, 3, 5, 4)  # (B, layers, T, D)
    torch.testing.assert_close(mix(layers), mix(list(layers.unbind(1))))
    with pytest.raises(ValueError, match="3 layers got 2"):
        mix(layers[:, :2])


def test_default_is_equal_mix_and_gradients_reach_scalars_and_gamma():
    mix = ScalarMix(2)
    h0, h1 = torch.randn(1, 4, 3), torch.randn(1, 4, 3)
    torch.testing.assert_close(mix([h0, h1]), (h0 + h1) / 2)
    mix([h0, h1]).pow(2).sum().backward()
    assert mix.scalars.grad is not None and mix.scalars.grad.abs().sum() > 0
    assert mix.gamma.grad is not None
    frozen = ScalarMix(2, trainable=False)
    assert not any(p.requires_grad for p in frozen.parameters())


def test_layer_norm_ignores_padding():
    torch.manual_seed(0)
    mix = ScalarMix(2, do_layer_norm=True, initial_scalars=[0.3, -0.2])
    real = [torch.randn(1, 3, 4) * 5 + 2, torch.randn(1, 3, 4)]
    # same sequence, padded with 2 positions of huge garbage
    padded = [torch.cat([h, torch.full((1, 2, 4), 1e3)], dim=1) for h in real]
    mask = torch.tensor([[True, True, True, False, False]])
    alone = mix(real, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(mix(padded, mask)[:, :3], alone)
    # normalised: each layer has mean 0, variance 1 over the real positions
    normed = ScalarMix(1, do_layer_norm=True)([padded[0]], mask)[:, :3]
    torch.testing.assert_close(normed.mean(), torch.tensor(0.0), atol=1e-5, rtol=0)
    torch.testing.assert_close(normed.var(unbiased=False), torch.tensor(1.0), atol=1e-4, rtol=0)
    # and without the mask the garbage would change the result
    assert not torch.allclose(mix(padded)[:, :3], alone)


def test_layer_norm_is_per_sequence():
    torch.manual_seed(1)
    mix = ScalarMix(2, do_layer_norm=True)
    layers = [torch.randn(2, 4, 3), torch.randn(2, 4, 3)]
    mask = torch.ones(2, 4, dtype=torch.bool)
    torch.testing.assert_close(mix(layers, mask)[:1], mix([h[:1] for h in layers], mask[:1]))


def test_penalty_is_zero_only_at_an_equal_mix():
    assert ScalarMix(3).penalty().item() == 0.0
    assert ScalarMix(3, initial_scalars=[2.0, 2.0, 2.0]).penalty(0.1).item() == 0.0  # still an equal mix
    skewed = ScalarMix(3, initial_scalars=[1.0, 0.0, -1.0])
    assert skewed.penalty().item() == pytest.approx(2.0)
    assert skewed.penalty(0.01).item() == pytest.approx(0.02)
    skewed.penalty().backward()
    assert skewed.scalars.grad.tolist() == pytest.approx([2.0, 0.0, -2.0])  # gradient descent moves toward equal
