"""Tests for gradflow_ref.checkpointing, held against torch's non-reentrant checkpoint."""

import gc
import inspect
import weakref

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as torch_checkpoint
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import (
    CheckpointStats,
    SavedTensorMeter,
    checkpoint,
    checkpoint_sequential,
    count_forwards,
    measure,
    mlp,
    segment_model,
)

EXACT = {"rtol": 0.0, "atol": 0.0}  # same operations in the same order: bitwise equal


def _dropout_net(device="cpu"):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 16), nn.Dropout(0.5), nn.GELU(), nn.Linear(16, 8), nn.Dropout(0.3)
    ).to(device=device, dtype=torch.float64)


def _grads(net, x, run, seed=1):
    """Seed, run forward, backprop a squared loss; return output, input grad and param grads."""
    net.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    torch.manual_seed(seed)
    out = run(x)
    out.pow(2).sum().backward()
    return [out.detach(), x.grad] + [p.grad for p in net.parameters()]


def test_checkpoint_matches_torch_gradients():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64)
    plain = _grads(net, x, net)
    ours = _grads(net, x, lambda x: checkpoint(net, x))
    ref = _grads(net, x, lambda x: torch_checkpoint(net, x, use_reentrant=False))
    for a, b, c in zip(plain, ours, ref):
        torch.testing.assert_close(b, a, **EXACT)
        torch.testing.assert_close(b, c, **EXACT)


def test_checkpoint_without_rng_preservation_draws_new_dropout_mask():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64)
    plain = _grads(net, x, net)
    ours = _grads(net, x, lambda x: checkpoint(net, x, preserve_rng_state=False))
    assert not torch.equal(ours[2], plain[2])  # recomputed mask differs: wrong weight gradient


def test_checkpoint_leaves_global_rng_as_without_checkpointing():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64)
    _grads(net, x, net)
    after_plain = torch.get_rng_state()
    _grads(net, x, lambda x: checkpoint(net, x))
    torch.testing.assert_close(torch.get_rng_state(), after_plain, **EXACT)


def test_checkpoint_recomputes_once_in_backward():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    with count_forwards([net]) as counter:
        out = checkpoint(net, x)
        assert counter.count == 1
        out.sum().backward()
    assert counter.count == 2


def test_checkpoint_saved_bytes_match_torch():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    with SavedTensorMeter() as ours:
        checkpoint(net, x)
    with SavedTensorMeter() as ref:
        torch_checkpoint(net, x, use_reentrant=False)
    with SavedTensorMeter() as plain:
        net(x)
    assert ours.bytes == ref.bytes == x.numel() * 8  # only the input is kept
    assert plain.bytes > 4 * ours.bytes


def test_checkpoint_accepts_keyword_and_non_tensor_arguments():
    def f(a, power, *, scale, shift=None):
        return (a.sin() * scale + shift.cos()) ** power

    a0, b0 = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    results = []
    for run in (checkpoint, lambda *a, **k: torch_checkpoint(*a, use_reentrant=False, **k)):
        a, b = a0.clone().requires_grad_(True), b0.clone().requires_grad_(True)
        run(f, a, 3, scale=2.0, shift=b).sum().backward()
        results.append((a.grad, b.grad))
    torch.testing.assert_close(results[0], results[1], **EXACT)


def test_checkpoint_supports_tuple_outputs_and_autograd_grad():
    def f(a, b):
        return a * b.exp(), (a - b).tanh()

    a = torch.randn(6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    u, v = checkpoint(f, a, b)
    ours = torch.autograd.grad((u * v).sum(), (a, b))
    u, v = f(a, b)
    ref = torch.autograd.grad((u * v).sum(), (a, b))
    torch.testing.assert_close(ours, ref, **EXACT)


def test_checkpoint_supports_two_backwards_with_retain_graph():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    loss = checkpoint(net, x).pow(2).sum()
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * first, rtol=1e-12, atol=0.0)


def test_checkpoint_matches_torch_under_bf16_autocast():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64)
    net = net.float()
    runs = (lambda x: checkpoint(net, x), lambda x: torch_checkpoint(net, x, use_reentrant=False))
    results = []
    for run in runs:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            results.append(_grads(net, x.float(), run))
    assert results[0][0].dtype == torch.bfloat16
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **EXACT)


def test_checkpoint_under_no_grad_runs_plain():
    net, x = _dropout_net(), torch.randn(4, 8, dtype=torch.float64)
    with torch.no_grad(), count_forwards([net]) as counter:
        out = checkpoint(net, x)
    assert counter.count == 1 and out.grad_fn is None


def test_checkpoint_detects_in_place_input_change():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    y = x * 2
    out = checkpoint(torch.sin, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified (in place|by an inplace)"):
        out.sum().backward()


@pytest.mark.parametrize(
    ("second", "message"),
    [(lambda a: a.exp(), "saved 1 tensors"), (lambda a: a[:2].exp().exp(), "shape, dtype")],
)
def test_checkpoint_detects_nondeterministic_function(second, message):
    calls = []

    def f(a):
        calls.append(1)
        return a.exp().exp() if len(calls) == 1 else second(a)  # recomputation differs

    a = torch.randn(3, dtype=torch.float64, requires_grad=True)
    out = checkpoint(f, a)
    with pytest.raises(RuntimeError, match=message):
        out.sum().backward()


def test_checkpoint_rejects_reentrant():
    with pytest.raises(NotImplementedError, match="checkpoint: .*pass use_reentrant=False"):
        checkpoint(torch.sin, torch.randn(3), use_reentrant=True)


def test_checkpoint_sequential_rejects_reentrant():
    with pytest.raises(NotImplementedError, match="checkpoint_sequential: .*use_reentrant=False"):
        checkpoint_sequential(mlp(4, 4), 2, torch.randn(2, 4), use_reentrant=True)


@pytest.mark.parametrize("segments", [1, 2, 3, 4, 7, 10])
def test_checkpoint_sequential_matches_torch(segments):
    net = mlp(10, 6, dtype=torch.float64)
    x = torch.randn(3, 6, dtype=torch.float64)
    ours = _grads(net, x, lambda x: checkpoint_sequential(net, segments, x))
    ref = _grads(
        net, x, lambda x: torch_checkpoint_sequential(net, segments, x, use_reentrant=False)
    )
    plain = _grads(net, x, net)
    for a, b, c in zip(ours, ref, plain):
        torch.testing.assert_close(a, b, **EXACT)
        torch.testing.assert_close(a, c, **EXACT)


@pytest.mark.parametrize("segments", [1, 2, 3, 4, 7, 10])
def test_checkpoint_sequential_saves_and_recomputes_like_torch(segments):
    net = mlp(10, 6)
    x = torch.randn(3, 6)
    ours = measure(lambda: checkpoint_sequential(net, segments, x), net)
    ref = measure(lambda: torch_checkpoint_sequential(net, segments, x, use_reentrant=False), net)
    last = 10 - (10 // segments) * (segments - 1)  # the unchecked last segment
    assert (ours.saved_bytes, ours.recomputed) == (ref.saved_bytes, ref.recomputed)
    assert ours.recomputed == 10 - last  # one extra forward per checkpointed layer
    assert ours.forwards == 10


def test_checkpoint_sequential_accepts_module_list_and_list():
    net = mlp(6, 4, dtype=torch.float64)
    x = torch.randn(2, 4, dtype=torch.float64)
    want = net(x)
    for layers in (nn.ModuleList(net), list(net), tuple(net)):
        torch.testing.assert_close(checkpoint_sequential(layers, 3, x), want, **EXACT)


@pytest.mark.parametrize("segments", [0, -1, 7])
def test_checkpoint_sequential_rejects_segments_out_of_range(segments):
    with pytest.raises(ValueError, match="between 1 and the number of layers"):
        checkpoint_sequential(mlp(6, 4), segments, torch.randn(2, 4))


@pytest.mark.parametrize("segments", [2.0, True, "2"])
def test_checkpoint_sequential_rejects_non_int_segments(segments):
    with pytest.raises(TypeError, match="`segments` must be an int"):
        checkpoint_sequential(mlp(6, 4), segments, torch.randn(2, 4))


@pytest.mark.parametrize("functions", [nn.Linear(4, 4), {"a": nn.Linear(4, 4)}])
def test_checkpoint_sequential_rejects_non_sequential_functions(functions):
    with pytest.raises(
        TypeError, match="`functions` must be a Sequential or ModuleList or list or tuple"
    ):
        checkpoint_sequential(functions, 1, torch.randn(2, 4))


def test_checkpoint_sequential_rejects_non_tensor_input():
    with pytest.raises(TypeError, match="`input` must be a Tensor"):
        checkpoint_sequential(mlp(4, 4), 2, (torch.randn(2, 4), torch.randn(2, 4)))


def test_checkpoint_sequential_rejects_unknown_keyword():
    with pytest.raises(ValueError, match="preserve_rng_state"):
        checkpoint_sequential(mlp(4, 4), 2, torch.randn(2, 4), early_stop=False)


def test_saved_tensor_meter_counts_shared_storage_once():
    x = torch.randn(10, 4, requires_grad=True)
    with SavedTensorMeter() as meter:
        y = x * 1.0  # saves nothing (scalar factor)
        y * y  # saves y twice
        y[:2].exp()  # saves its output: a fresh storage
        y[:5] * y[5:]  # saves two views of y's storage
    assert meter.tensors == 2
    assert meter.bytes == 40 * 4 + 8 * 4


def test_saved_tensor_meter_excludes_parameters():
    lin = nn.Linear(4, 3)
    x = torch.randn(2, 4, requires_grad=True)
    with SavedTensorMeter() as meter:
        lin(x)
    assert meter.bytes == x.numel() * 4  # the input; the weight counts as a parameter
    assert meter.parameter_bytes == lin.weight.numel() * 4


def test_measure_reports_3x_saving_at_sqrt_n_for_64_layers():
    net = mlp(64, 8)
    x = torch.randn(4, 8)
    plain = measure(lambda: net(x), net)
    segmented = measure(lambda: checkpoint_sequential(net, 8, x), net)
    assert plain.saved_bytes >= 3 * segmented.saved_bytes
    assert segmented.recomputed == 64 - 8


def test_segment_model_is_smallest_at_sqrt_n():
    ks = range(1, 65)
    assert min(ks, key=lambda k: segment_model(64, k)) == 8
    assert segment_model(64, 8) == 16.0


def test_mlp_is_seeded():
    a, b = mlp(3, 5, seed=4), mlp(3, 5, seed=4)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, **EXACT)


@pytest.mark.cuda
def test_checkpoint_preserves_cuda_dropout_rng():
    net, x = _dropout_net("cuda"), torch.randn(4, 8, dtype=torch.float64, device="cuda")
    plain = _grads(net, x, net)
    ours = _grads(net, x, lambda x: checkpoint(net, x))
    ref = _grads(net, x, lambda x: torch_checkpoint(net, x, use_reentrant=False))
    for a, b, c in zip(plain, ours, ref):
        torch.testing.assert_close(b, a, **EXACT)
        torch.testing.assert_close(b, c, **EXACT)


@pytest.mark.cuda
def test_measure_reports_cuda_peak_memory():
    net = mlp(16, 256, device="cuda")
    x = torch.randn(64, 256, device="cuda")
    plain = measure(lambda: net(x), net)
    segmented = measure(lambda: checkpoint_sequential(net, 4, x), net)
    assert plain.peak_bytes is not None and segmented.peak_bytes < plain.peak_bytes


def test_checkpoint_detects_in_place_input_change_under_outer_hooks():
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    with SavedTensorMeter():  # outer hooks switch off autograd's own version check
        y = x * 2
        out = checkpoint(torch.sin, y)
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified in place"):
        out.sum().backward()


def test_checkpoint_frees_its_inputs_after_backward():
    gc.disable()  # reference counting alone must free them: no cycles
    try:
        x = torch.randn(5, requires_grad=True)
        y = x * 2
        ref = weakref.ref(y)
        out = checkpoint(torch.sin, y)
        del y
        assert ref() is not None  # held for backward
        out.sum().backward()
        del out
        assert ref() is None
    finally:
        gc.enable()


def _live_tensors() -> int:
    gc.collect()
    return sum(type(o) in (torch.Tensor, nn.Parameter) for o in gc.get_objects())


def test_checkpoint_sequential_leaves_no_tensor_alive_after_backward():
    # ReLU saves its own output: a recomputation that kept it would hold a cycle through C++
    # that gc cannot free (64 MLP layers on a GPU leaked 22 GB that way)
    net, x = mlp(8, 16), torch.randn(4, 16)
    checkpoint_sequential(net, 4, x).sum().backward()  # the .grad tensors exist from here on
    before = _live_tensors()
    for _ in range(3):
        checkpoint_sequential(net, 4, x).sum().backward()
    assert _live_tensors() == before


def _leaf():
    return torch.ones(2, requires_grad=True)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: checkpoint(None, _leaf()), TypeError, "checkpoint: `function` must be callable"),
        (lambda: checkpoint(torch.sin, _leaf(), use_reentrant=None), TypeError, "use_reentrant"),
        (
            lambda: checkpoint(torch.sin, _leaf(), preserve_rng_state="no"),
            TypeError,
            "checkpoint: `preserve_rng_state` must be True or False",
        ),
        (
            lambda: checkpoint_sequential([], 1, torch.ones(1, 2)),
            ValueError,
            "checkpoint_sequential: `functions` must hold at least one layer",
        ),
        (
            lambda: checkpoint_sequential(
                nn.Sequential(nn.Linear(2, 2)), 1, torch.ones(1, 2), preserve_rng_state="x"
            ),
            TypeError,
            "`preserve_rng_state` must be True or False",
        ),
        (lambda: measure(None, []), TypeError, "measure: `forward` must be callable"),
        (
            lambda: measure(lambda: 3, [nn.ReLU()]),
            TypeError,
            r"measure: `forward\(\)` must be a Tensor",
        ),
        (lambda: measure(lambda: torch.ones(2), [nn.ReLU()]), ValueError, "needs no gradient"),
        (lambda: measure(lambda: _leaf() * 2, [3]), TypeError, r"measure: `layers\[0\]`"),
        (lambda: mlp(2, 4, seed="x"), TypeError, "mlp: `seed` must be an int"),
        (lambda: mlp(2, 4, dtype=torch.int64), ValueError, "mlp: `dtype`"),
        (lambda: mlp(2, 4, device="nodev"), ValueError, "mlp: `device` must name"),
        (
            lambda: SavedTensorMeter().__exit__(None, None, None),
            RuntimeError,
            "SavedTensorMeter.__exit__: the meter is not active",
        ),
        (lambda: CheckpointStats(None, 1, 1, 1, 0.1), TypeError, "CheckpointStats: `saved_bytes`"),
        (lambda: CheckpointStats(1, 1, 1, 1, -5.0), ValueError, "CheckpointStats: `seconds`"),
    ],
)
def test_checkpointing_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_checkpointing_opens_with_its_public_entry_point():
    import gradflow_ref.checkpointing as module

    source = inspect.getsource(module)
    assert source.index("def checkpoint(") < source.index("class _")
