"""gradflow_ref.diagnosis.Monitor held against direct computations with torch.

Norms are sums of float32 squares taken in a different order than torch's, so they agree to
rtol 1e-5; weights that did not move compare exactly.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradflow_ref.diagnosis as ref


def make(seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    return model, torch.randn(16, 4), torch.randn(16, 2)


def one_step(model, x, y, mon, opt, max_norm=None):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    mon.grads(loss)
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    opt.step()
    return loss


def test_monitor_grad_norm_matches_get_total_norm():
    model, x, y = make()
    mon = ref.Monitor(model)
    F.mse_loss(model(x), y).backward()
    mon.grads(torch.tensor(0.0))
    expected = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    assert mon._grad_norm == pytest.approx(expected.item(), rel=1e-5)


def test_monitor_layer_norms_match_param_grad_norm():
    model, x, y = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = ref.Monitor(model)
    one_step(model, x, y, mon, opt)
    record = mon.step()
    for name in ("0", "2"):
        layer = model.get_submodule(name)
        expected = math.sqrt(layer.weight.grad.norm() ** 2 + layer.bias.grad.norm() ** 2)
        assert record.layer_norms[name] == pytest.approx(expected, rel=1e-5)


def test_monitor_layer_norms_see_accumulated_gradients():
    model, x, y = make()
    mon = ref.Monitor(model)
    F.mse_loss(model(x[:8]), y[:8]).backward()
    F.mse_loss(model(x[8:]), y[8:]).backward()
    mon.grads(torch.tensor(0.0))
    assert mon._layer_norms["2"] == pytest.approx(
        math.sqrt(model[2].weight.grad.norm() ** 2 + model[2].bias.grad.norm() ** 2), rel=1e-5
    )


def test_monitor_update_ratio_matches_manual_before_after():
    model, x, y = make()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mon = ref.Monitor(model)
    before = [p.detach().clone() for p in model[0].parameters()]
    one_step(model, x, y, mon, opt)
    record = mon.step()
    moved = sum((p.detach() - b).square().sum() for p, b in zip(model[0].parameters(), before))
    expected = (moved / sum(b.square().sum() for b in before)).sqrt().item()
    assert record.update_ratio["0"] == pytest.approx(expected, rel=1e-5)
    assert not record.skipped


def test_monitor_counts_a_clipped_step():
    model, x, y = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = ref.Monitor(model, max_norm=1e-3)
    one_step(model, x, y, mon, opt, max_norm=1e-3)
    assert mon.step().clipped
    mon.max_norm = 1e3
    one_step(model, x, y, mon, opt, max_norm=1e3)
    assert not mon.step().clipped


def test_monitor_step_before_grads_raises():
    model, _, _ = make()
    with pytest.raises(RuntimeError, match=r"call grads\(loss\) after backward\(\)"):
        ref.Monitor(model).step()


def test_monitor_grads_twice_raises():
    model, x, y = make()
    mon = ref.Monitor(model)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    mon.grads(loss)
    with pytest.raises(RuntimeError, match=r"already called since the last step\(\)"):
        mon.grads(loss)


def test_monitor_grads_without_backward_raises():
    model, x, y = make()
    with pytest.raises(RuntimeError, match=r"call loss.backward\(\) before grads"):
        ref.Monitor(model).grads(F.mse_loss(model(x), y))


def test_monitor_rejects_a_scaler_of_the_wrong_type():
    model, _, _ = make()
    with pytest.raises(TypeError, match="`scaler` must be a torch.amp.GradScaler"):
        ref.Monitor(model, scaler=object())


def test_monitor_rejects_negative_max_norm():
    model, _, _ = make()
    with pytest.raises(ValueError, match="max_norm"):
        ref.Monitor(model, max_norm=-1.0)


def test_monitor_names_the_first_module_with_a_nonfinite_output():
    model, x, y = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = ref.Monitor(model)
    with torch.no_grad():
        model[2].bias[0] = float("inf")
    one_step(model, x, y, mon, opt)
    record = mon.step()
    assert record.nonfinite_forward == "2"
    assert record.nonfinite_grad is None or record.nonfinite_grad in ("0", "2")


def test_monitor_names_the_first_layer_with_a_nonfinite_gradient():
    model, x, y = make()
    mon = ref.Monitor(model)
    (F.mse_loss(model(x), y) * float("inf")).backward()
    mon.grads(torch.tensor(0.0))
    assert mon._nonfinite_grad == "2"  # backward reaches the last layer first


def test_monitor_divides_out_the_gradscaler_scale():
    model, x, y = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    mon = ref.Monitor(model, scaler=scaler)
    loss = F.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    mon.grads(loss)
    expected = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    scaler.step(opt)
    scaler.update()
    record = mon.step()
    assert record.grad_norm == pytest.approx(expected.item(), rel=1e-5)
    assert record.loss_scale == 1024.0


def test_monitor_records_a_step_the_gradscaler_skipped():
    model, x, y = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    mon = ref.Monitor(model, scaler=scaler)
    before = [p.detach().clone() for p in model.parameters()]
    loss = F.mse_loss(model(x), y) * float("inf")
    scaler.scale(loss).backward()
    mon.grads(loss)
    scaler.step(opt)
    scaler.update()
    record = mon.step()
    assert record.skipped
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b)
    assert scaler.get_scale() == 512.0


def test_monitor_remove_detaches_every_hook():
    model, x, y = make()
    mon = ref.Monitor(model)
    mon.remove()
    F.mse_loss(model(x), y).backward()
    assert mon._grad_sq == {}
