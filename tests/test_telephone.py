"""gradflow_ref.telephone against closed forms and torch's own autograd."""

import math

import pytest
import torch

from gradflow_ref.telephone import chain_gradients, network_gradients


@pytest.mark.parametrize("factor", [0.5, 0.9, 0.95, 1.0, 1.1])
def test_chain_gradients_equal_powers_of_the_factor(factor):
    depth = 50
    expected = torch.tensor([factor ** (depth - k) for k in range(depth)], dtype=torch.float64)
    # float64 powers and autograd products round differently only in the last bits
    torch.testing.assert_close(chain_gradients(factor, depth), expected, rtol=1e-13, atol=0)


def test_chain_gradients_match_torch_autograd_grad():
    x = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    y = x
    for _ in range(30):
        y = y * 0.8
    (expected,) = torch.autograd.grad(y, x)
    assert chain_gradients(0.8, depth=30)[0].item() == expected.item()


def test_chain_gradients_underflow_to_exact_zero_in_float16():
    g = chain_gradients(0.5, depth=30, dtype=torch.float16)
    # 2**-24 is float16's smallest subnormal; 2**-25 rounds (to even) to zero
    assert g[-24].item() == 2.0**-24
    assert g[-25].item() == 0.0


@pytest.mark.parametrize("factor", [0.9, 1.0, 1.1])
def test_network_gradients_orthogonal_gain_is_exact(factor):
    g = network_gradients(factor, depth=20, width=16)
    expected = torch.tensor([factor ** (20 - k) for k in range(20)], dtype=torch.float64)
    torch.testing.assert_close(g, expected, rtol=1e-10, atol=0)


def test_network_gradients_match_a_hand_written_backward_pass():
    depth, width, batch = 6, 8, 4
    g = network_gradients(0.7, depth=depth, width=width, batch=batch, init="xavier", seed=3)
    # the same network, built and differentiated without gradflow_ref's hooks
    from gradflow_ref.flow import MLPConfig, build_mlp

    net = build_mlp(
        MLPConfig(
            depth=depth, width=width, activation="identity", init="xavier", scale=0.7, seed=3
        ),
        dtype=torch.float64,
    )
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    acts = [x.requires_grad_(True)]
    for layer in net:
        acts.append(layer(acts[-1]))
    grads = torch.autograd.grad(acts[-1].sum(), acts[0:-1:2])
    expected = torch.stack([gr.norm() for gr in grads]) / math.sqrt(batch * width)
    torch.testing.assert_close(g, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_chain_gradients_rejects_bad_factor(factor):
    with pytest.raises(ValueError, match="`factor` must be positive and finite"):
        chain_gradients(factor)


def test_chain_gradients_rejects_zero_depth():
    with pytest.raises(ValueError, match="`depth` must be an integer from 1 to 10000, got 0"):
        chain_gradients(0.9, depth=0)


def test_network_gradients_rejects_unknown_init():
    with pytest.raises(ValueError, match="`init` must be 'orthogonal' or 'xavier'"):
        network_gradients(0.9, init="he")
