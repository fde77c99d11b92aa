"""gradflow_ref.flow: hooks read exactly what torch's autograd computes."""

import pytest
import torch
from torch import nn

from gradflow_ref.flow import MLPConfig, build_mlp, gradient_norms, layer_factors


def _reference_norms(net: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    inputs, h = [], x.detach().requires_grad_(True)
    for module in net:
        if isinstance(module, nn.Linear):
            inputs.append(h)
        h = module(h)
    return torch.stack([g.norm() for g in torch.autograd.grad(h.sum(), inputs)]).double()


@pytest.mark.parametrize("activation", ["sigmoid", "tanh", "relu", "identity"])
@pytest.mark.parametrize("init", ["unit", "xavier", "he", "orthogonal"])
def test_gradient_norms_match_torch_autograd_grad(activation, init):
    net = build_mlp(
        MLPConfig(depth=5, width=12, activation=activation, init=init, seed=1), dtype=torch.float64
    )
    x = torch.randn(7, 12, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(gradient_norms(net, x), _reference_norms(net, x), rtol=1e-12, atol=0)


def test_gradient_norms_match_module_full_backward_hooks():
    # what docs/flow.md shows first: grad_input[0] of a full backward hook on every Linear
    net = build_mlp(MLPConfig(depth=4, width=8, activation="relu", init="he"), dtype=torch.float64)
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    linears = [m for m in net if isinstance(m, nn.Linear)]
    seen = {}
    for layer in linears:
        layer.register_full_backward_hook(
            lambda module, grad_input, grad_output: seen.update({module: grad_input[0].norm()})
        )
    net(x.clone().requires_grad_()).sum().backward()
    hooked = torch.stack([seen[m] for m in linears])
    torch.testing.assert_close(gradient_norms(net, x), hooked, rtol=1e-12, atol=0)


def test_gradient_norms_leaves_no_hooks_behind():
    net = build_mlp(MLPConfig(depth=3, width=4))
    gradient_norms(net, torch.randn(2, 4))
    assert all(not m._forward_pre_hooks for m in net)


def test_layer_factors_multiply_to_the_whole_network_gain():
    net = build_mlp(
        MLPConfig(depth=8, width=16, activation="tanh", init="xavier"), dtype=torch.float64
    )
    x = torch.randn(5, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norms = gradient_norms(net, x)
    out_norm = (5 * 16) ** 0.5
    torch.testing.assert_close(
        layer_factors(net, x).prod(), norms[0] / out_norm, rtol=1e-12, atol=0
    )


def test_build_mlp_is_deterministic_for_a_seed():
    a = build_mlp(MLPConfig(depth=2, width=3, seed=5))
    b = build_mlp(MLPConfig(depth=2, width=3, seed=5))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("depth", 0, "`depth` must be an integer from 1 to 10000"),
        ("width", -2, "`width` must be an integer from 1 to 65536"),
        ("activation", "gelu", "`activation` must be one of 'sigmoid', 'tanh', 'relu', 'identity'"),
        ("init", "kaiming", "`init` must be one of 'unit', 'xavier', 'he', 'orthogonal'"),
        ("scale", float("inf"), "`scale` must be positive and finite"),
    ],
)
def test_mlp_config_rejects_bad_fields(field, value, message):
    with pytest.raises(ValueError, match=message):
        build_mlp(MLPConfig(**{field: value}))


def test_gradient_norms_rejects_a_model_without_linear_layers():
    with pytest.raises(ValueError, match="at least one nn.Linear"):
        gradient_norms(nn.Sequential(nn.ReLU()), torch.randn(2, 3))


def _net():
    return build_mlp(MLPConfig(3, 4))


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: MLPConfig(depth=-1), ValueError, "MLPConfig: `depth`"),
        (lambda: MLPConfig(activation=None), ValueError, "MLPConfig: `activation` must be one"),
        (lambda: MLPConfig(scale=float("inf")), ValueError, "MLPConfig: `scale`"),
        (lambda: build_mlp(None), TypeError, "build_mlp: `cfg`"),
        (lambda: build_mlp(MLPConfig(2, 4), dtype=torch.int64), ValueError, "`dtype` must be a"),
        (lambda: build_mlp(MLPConfig(2, 4), dtype="float32"), TypeError, "build_mlp: `dtype`"),
        (lambda: build_mlp(MLPConfig(2, 4), device="nodevice"), ValueError, "`device` must name"),
        (lambda: gradient_norms(_net(), None), TypeError, "gradient_norms: `x`"),
        (lambda: gradient_norms(_net(), torch.ones(2, 4).double()), ValueError, "torch.float32"),
        (lambda: gradient_norms(_net(), torch.ones(2, 4), loss="sum"), TypeError, "`loss` must"),
        (lambda: gradient_norms(_net(), torch.ones(4)), ValueError, "`x` must have 2 dimensions"),
        (lambda: layer_factors(_net(), torch.ones(4)), ValueError, "`x` must have 2 dimensions"),
        (lambda: layer_factors(_net(), torch.ones(2, 2, 4)), ValueError, "`x` must have 2"),
    ],
)
def test_flow_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
