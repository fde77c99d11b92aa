"""Tests for gradflow_ref.pipeline: the step against a hand-written torch loop, and its trace."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

import gradflow_ref.pipeline
from gradflow_ref.checkpointing import count_forwards
from gradflow_ref.pipeline import (
    STEP_PHASES,
    PipelineConfig,
    StepPhase,
    StepReport,
    Trainer,
    WarmupCosine,
    trace_step,
    warmup_cosine,
)

SCHEDULE_RTOL = 1e-12  # torch's cosine is recursive, ours closed-form: equal to rounding
CFG = PipelineConfig(lr=1e-2, min_lr=1e-3, warmup_steps=2, total_steps=6, max_norm=0.1, segments=2)


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3)
    )


def _steps(n_steps=3, n_micro=3, seed=1, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return [
        [
            (scale * torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen))
            for _ in range(n_micro)
        ]
        for _ in range(n_steps)
    ]


def _torch_schedule(opt, cfg):
    warm = LinearLR(opt, start_factor=1 / cfg.warmup_steps, total_iters=cfg.warmup_steps - 1)
    cos = CosineAnnealingLR(opt, T_max=cfg.total_steps - cfg.warmup_steps, eta_min=cfg.min_lr)
    return SequentialLR(opt, [warm, cos], milestones=[cfg.warmup_steps])


def _reference(model, steps, cfg, device="cpu"):
    """The correct order, written with torch's own pieces; returns FP32 masters and lrs."""
    model = copy.deepcopy(model).to(device)
    masters = [p.detach().float().clone().requires_grad_(True) for p in model.parameters()]
    model.to(cfg.dtype)
    opt = torch.optim.AdamW(
        masters, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay
    )
    schedule = _torch_schedule(opt, cfg)
    scaler = torch.amp.GradScaler(
        device, init_scale=cfg.init_scale, enabled=cfg.dtype == torch.float16
    )
    lrs = []
    for batches in steps:
        lrs.append(opt.param_groups[0]["lr"])
        for x, y in batches:
            x = x.to(device, cfg.dtype)
            logits = torch_checkpoint_sequential(model, cfg.segments, x, use_reentrant=False)
            loss = F.cross_entropy(logits.float(), y.to(device)) / len(batches)
            scaler.scale(loss).backward()
            with torch.no_grad():
                for p, m in zip(model.parameters(), masters):
                    m.grad = p.grad.float() if m.grad is None else m.grad + p.grad.float()
                    p.grad = None
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(masters, cfg.max_norm)
        scale = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        if scaler.get_scale() >= scale:  # the scale only drops on a skipped step
            schedule.step()
        with torch.no_grad():
            for p, m in zip(model.parameters(), masters):
                p.copy_(m)
        opt.zero_grad(set_to_none=True)
    return masters, lrs


def _run(cfg, steps, model=None, device="cpu"):
    trainer = Trainer((model or _model()).to(device), cfg)
    reports = [trainer.step(batches) for batches in steps]
    return trainer, reports


def test_warmup_cosine_matches_torch_sequential_lr():
    cfg = PipelineConfig(lr=1.0, min_lr=0.1, warmup_steps=4, total_steps=12)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    schedule = _torch_schedule(opt, cfg)
    for step in range(cfg.total_steps + 1):
        want = opt.param_groups[0]["lr"]
        got = warmup_cosine(step, cfg.lr, cfg.warmup_steps, cfg.total_steps, cfg.min_lr)
        torch.testing.assert_close(got, want, rtol=SCHEDULE_RTOL, atol=0.0)
        opt.step()
        schedule.step()


def test_warmup_cosine_scheduler_matches_torch_per_param_group():
    groups = [{"params": [nn.Parameter(torch.zeros(1))], "lr": lr} for lr in (1e-3, 5e-2)]
    ours_opt, ref_opt = torch.optim.SGD(copy.deepcopy(groups)), torch.optim.SGD(groups)
    ours = WarmupCosine(ours_opt, warmup_steps=3, total_steps=9, min_lr=1e-4)
    ref = _torch_schedule(ref_opt, PipelineConfig(warmup_steps=3, total_steps=9, min_lr=1e-4))
    for _ in range(9):
        torch.testing.assert_close(
            ours.get_last_lr(), ref.get_last_lr(), rtol=SCHEDULE_RTOL, atol=0.0
        )
        ref_opt.step()
        ours.step()
        ref.step()


def test_warmup_cosine_peaks_then_holds_min_lr():
    lrs = [warmup_cosine(s, 1.0, 4, 10, 0.1) for s in range(15)]
    assert lrs[0] == 0.25 and lrs[3] == lrs[4] == 1.0
    assert lrs[10:] == [pytest.approx(0.1, rel=1e-15)] * 5


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"lr": float("nan")}, ValueError, "`lr` must be positive and finite"),
        ({"lr": float("inf")}, ValueError, "`lr` must be positive and finite"),
        ({"lr": 0.0}, ValueError, "`lr` must be positive and finite"),
        ({"lr": "1e-3"}, TypeError, "`lr` must be a number"),
        ({"min_lr": 2.0}, ValueError, "must not exceed"),
        ({"min_lr": float("nan")}, ValueError, "`min_lr` must be in"),
        ({"warmup_steps": 0}, ValueError, "`warmup_steps` must be an integer >= 1"),
        ({"warmup_steps": -3}, ValueError, "`warmup_steps` must be an integer >= 1"),
        ({"total_steps": 4}, ValueError, "`total_steps` must be an integer >= 5"),
        ({"total_steps": 0}, ValueError, "`total_steps` must be an integer >= 5"),
        ({"step": -1}, ValueError, "`step` must be an integer >= 0"),
    ],
)
def test_warmup_cosine_rejects_bad_input(kwargs, error, message):
    args = {"step": 0, "lr": 1.0, "warmup_steps": 4, "total_steps": 10, "min_lr": 0.0} | kwargs
    with pytest.raises(error, match=message):
        warmup_cosine(**args)


def test_trainer_matches_torch_reference_loop_bf16():
    steps = _steps()
    trainer, reports = _run(CFG, steps)
    masters, lrs = _reference(_model(), steps, CFG)
    torch.testing.assert_close(trainer.master.params, masters, rtol=0.0, atol=0.0)
    assert [r.lr for r in reports] == lrs
    assert any(r.grad_norm > CFG.max_norm for r in reports)  # the clip was active


def test_trainer_matches_torch_reference_loop_fp16_with_skipped_step():
    cfg = PipelineConfig(**(vars(CFG) | {"dtype": torch.float16, "init_scale": 2.0**20}))
    steps = _steps(n_steps=4)
    trainer, reports = _run(cfg, steps)
    masters, lrs = _reference(_model(), steps, cfg)
    torch.testing.assert_close(trainer.master.params, masters, rtol=0.0, atol=0.0)
    assert [r.lr for r in reports] == lrs
    skipped = [r.skipped for r in reports]
    assert skipped[0] and not skipped[-1]
    assert trainer.schedule.last_step == skipped.count(False)


def test_trainer_recomputes_checkpointed_segments():
    trainer = Trainer(_model(), CFG)  # 5 layers in 2 segments: the first 2 are checkpointed
    with count_forwards(list(trainer.model)) as counter:
        trainer.step(_steps(n_steps=1, n_micro=3)[0])
    assert counter.count == 3 * (5 + 2)


def test_trainer_casts_back_and_zeroes_gradients():
    trainer, _ = _run(CFG, _steps(n_steps=1))
    for p, m in zip(trainer.model.parameters(), trainer.master.params):
        assert p.dtype == torch.bfloat16 and m.dtype == torch.float32
        torch.testing.assert_close(p, m.to(torch.bfloat16), rtol=0.0, atol=0.0)
        assert p.grad is None and m.grad is None


def test_trainer_rejects_parameters_on_two_devices():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, device="meta"))
    with pytest.raises(ValueError, match="one device"):
        Trainer(model, CFG)


def test_trainer_rejects_non_sequential_model():
    with pytest.raises(TypeError, match="`model` must be a Sequential"):
        Trainer(nn.Linear(2, 2), CFG)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"segments": 0}, "`cfg.segments` must be an integer >= 1"),
        ({"segments": 6}, "`cfg.segments` must be an int between 1"),
        ({"lr": math.nan}, "`cfg.lr` must be positive and finite"),
        ({"warmup_steps": 0}, "`cfg.warmup_steps` must be an integer >= 1"),
        ({"total_steps": 2}, "`cfg.total_steps` must be an integer >= 3"),
        ({"max_norm": -1.0}, "`cfg.max_norm` must be positive and finite"),
        ({"dtype": torch.float32}, "`cfg.dtype` must be one of torch.bfloat16"),
        ({"betas": (2.0, 0.9)}, "`cfg.betas\\[0\\]` must be in"),
        ({"betas": (0.9, 1.0)}, "`cfg.betas\\[1\\]` must be below 1"),
        ({"eps": -1.0}, "`cfg.eps` must be positive"),
        ({"weight_decay": math.nan}, "`cfg.weight_decay` must be in"),
        ({"init_scale": -1.0}, "`cfg.init_scale` must be positive"),
    ],
)
def test_trainer_rejects_bad_config(change, message):
    # PipelineConfig refuses a bad value at once, naming its field; Trainer refuses a config
    # changed after construction, and segments beyond the model's layers, naming cfg.<field>
    if "between 1 and the number of layers" not in message and "int between 1" not in message:
        own = message.replace("`cfg\\.", "`").replace("`cfg.", "`")
        with pytest.raises(ValueError, match=own):
            PipelineConfig(**(vars(CFG) | change))
    cfg = PipelineConfig(**vars(CFG))
    for field, value in change.items():
        setattr(cfg, field, value)
    with pytest.raises(ValueError, match=message):
        Trainer(_model(), cfg)


def test_trainer_step_rejects_empty_micro_batches():
    with pytest.raises(ValueError, match="at least one"):
        Trainer(_model(), CFG).step([])


def _trace(cfg, n_micro=1, scale=1.0):
    trainer = Trainer(_model(), cfg)
    return trace_step(trainer, _steps(n_steps=1, n_micro=n_micro, scale=scale)[0]), trainer


def _cfg(**change):
    return PipelineConfig(**(vars(CFG) | change))


def test_trace_step_records_the_bf16_stages_in_order():
    (report, stages), _ = _trace(_cfg(segments=1))
    names = ["forward", "loss", "backward", "accumulate", "clip", "step", "schedule"]
    assert [s.name for s in stages] == [*names, "cast_back", "zero"]
    assert [s.micro_batch for s in stages] == [0] * 4 + [None] * 5
    dtypes = {s.name: s.dtype for s in stages}
    assert dtypes["forward"] == dtypes["backward"] == dtypes["cast_back"] == "bfloat16"
    assert dtypes["loss"] == dtypes["accumulate"] == dtypes["clip"] == dtypes["step"] == "float32"
    assert stages[0].count == 5 and not report.skipped


def test_trace_step_adds_the_loss_scaling_stages_in_fp16():
    (_, stages), _ = _trace(_cfg(segments=1, dtype=torch.float16, init_scale=2.0**10))
    names = [s.name for s in stages]
    assert names == [n for n in STEP_PHASES if n != "recompute"]
    assert stages[names.index("backward")].dtype == "float16"


def test_trace_step_repeats_the_micro_batch_stages_and_counts_recomputed_layers():
    trainer = Trainer(_model(), CFG)  # 5 layers in 2 segments: the first 2 are checkpointed
    with count_forwards(list(trainer.model)) as counter:
        _, stages = trace_step(trainer, _steps(n_steps=1, n_micro=3)[0])
    loop = ["forward", "loss", "backward", "recompute", "accumulate"]
    assert [(s.name, s.micro_batch) for s in stages[:15]] == [
        (name, i) for i in range(3) for name in loop
    ]
    assert sum(s.count for s in stages if s.name in ("forward", "recompute")) == counter.count
    assert [s.count for s in stages if s.name == "recompute"] == [2, 2, 2]


def test_trace_step_leaves_the_step_unchanged():
    steps = _steps(n_steps=2)
    plain, _ = _run(CFG, steps)
    traced = Trainer(_model(), CFG)
    trace_step(traced, steps[0])
    traced.step(steps[1])  # untraced again: every wrapper and hook is gone
    torch.testing.assert_close(traced.master.params, plain.master.params, rtol=0.0, atol=0.0)
    assert "loss_fn" in vars(traced) and "step" not in vars(traced.schedule)
    assert gradflow_ref.pipeline.clip_grad_norm_.__name__ == "clip_grad_norm_"
    assert not traced.model[0]._forward_pre_hooks


def test_trace_step_omits_the_optimizer_step_the_scaler_skipped():
    (report, stages), _ = _trace(_cfg(dtype=torch.float16, init_scale=2.0**20), scale=1e3)
    names = [s.name for s in stages]
    assert report.skipped and "step" not in names and "schedule" not in names
    assert names[-4:] == ["clip", "update", "cast_back", "zero"]


@pytest.mark.cuda
def test_trainer_runs_unchanged_on_cuda():
    steps = _steps()
    trainer, _ = _run(CFG, steps, device="cuda")
    masters, _ = _reference(_model(), steps, CFG, device="cuda")
    torch.testing.assert_close(trainer.master.params, masters, rtol=1e-6, atol=1e-7)


def _nan_batch():
    x, y = _steps(n_steps=1, n_micro=1)[0][0]
    x[0, 0] = math.nan
    return x, y


def _bad_targets():
    x, y = _steps(n_steps=1, n_micro=1, seed=2)[0][0]
    return x, torch.full_like(y, 7)  # the model has 3 classes


@pytest.mark.parametrize(
    ("micro_batches", "error", "message"),
    [
        (None, TypeError, "Trainer.step: `micro_batches` must be a list or tuple"),
        ("ab", TypeError, "`micro_batches` must be a list or tuple"),
        ([_nan_batch()], ValueError, r"`micro_batches\[0\]\[0\]` must be finite"),
        (
            [(torch.ones(3, 6, dtype=torch.int64), torch.zeros(3, dtype=torch.long))],
            TypeError,
            "must be a floating-point tensor",
        ),
        ([(torch.ones(3, 6), torch.zeros(2, dtype=torch.long))], ValueError, "one target per"),
        ([(torch.ones(3, 5), torch.zeros(3, dtype=torch.long))], ValueError, "6 features"),
    ],
)
def test_trainer_step_rejects_bad_micro_batches(micro_batches, error, message):
    with pytest.raises(error, match=message):
        Trainer(_model(), CFG).step(micro_batches)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_trainer_step_that_raises_leaves_no_gradient_behind(dtype):
    trainer = Trainer(_model(), _cfg(dtype=dtype))
    good = _steps(n_steps=1, n_micro=1)[0][0]
    message = r"Trainer.step: `micro_batches\[1\]\[1\]` holds class ids from 7 to 7"
    with pytest.raises(ValueError, match=message):
        trainer.step([good, _bad_targets()])
    assert all(m.grad is None for m in trainer.master.params)
    assert all(p.grad is None for p in trainer.model.parameters())
    plain, _ = _run(_cfg(dtype=dtype), [[good]])
    trainer.step([good])  # the same step as a fresh trainer's
    torch.testing.assert_close(trainer.master.params, plain.master.params, rtol=0.0, atol=0.0)


def test_trainer_step_skips_a_bf16_step_whose_gradient_is_not_finite():
    trainer = Trainer(_model(), CFG)
    before = [m.detach().clone() for m in trainer.master.params]
    report = trainer.step([_steps(n_steps=1, n_micro=1, scale=1e38)[0][0]])
    assert report.skipped and not math.isfinite(report.grad_norm)
    assert trainer.schedule.last_step == 0
    torch.testing.assert_close(trainer.master.params, before, rtol=0.0, atol=0.0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: Trainer(None), TypeError, "Trainer: `cfg`|Trainer: `model`"),
        (lambda: Trainer(_model(), cfg=3), TypeError, "Trainer: `cfg` must be a PipelineConfig"),
        (lambda: Trainer(_model(), CFG, loss_fn="mse"), TypeError, "`loss_fn` must be callable"),
        (lambda: trace_step(None, []), TypeError, "trace_step: `trainer`"),
        (lambda: trace_step(Trainer(_model(), CFG), []), ValueError, "trace_step: `micro_batches`"),
        (lambda: trace_step(Trainer(_model(), CFG), None), TypeError, "trace_step: `micro_b"),
        (
            lambda: WarmupCosine(torch.optim.SGD(_model().parameters(), lr=0.1), 0, 10),
            ValueError,
            "WarmupCosine: `warmup_steps`",
        ),
        (
            lambda: WarmupCosine(torch.optim.SGD(_model().parameters(), lr=0.1), 2, 10, math.nan),
            ValueError,
            "WarmupCosine: `min_lr`",
        ),
        (lambda: StepReport(None, 1.0, 1e-3, False, 1.0), TypeError, "StepReport: `loss`"),
        (lambda: StepReport(1.0, 1.0, 1e-3, "no", 1.0), TypeError, "StepReport: `skipped`"),
        (lambda: StepReport(1.0, 1.0, -1.0, False, 1.0), ValueError, "StepReport: `lr`"),
        (lambda: StepPhase("nope", None, None), ValueError, "StepPhase: `name` must be one of"),
        (lambda: StepPhase("forward", None, None, -3), ValueError, "StepPhase: `count`"),
    ],
)
def test_pipeline_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
