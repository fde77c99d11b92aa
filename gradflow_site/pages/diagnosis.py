"""Build side of docs/diagnosis.md: the gallery of induced failures, its table, figure and widget.

Every run of the gallery trains gradflow_ref.transformer's small GPT from scratch. To fit the
page's compute budget, the FP32 runs of one architecture train side by side: torch.func.vmap over
their stacked weights, one shared batch per step, and AdamW written out per run (each run has its
own learning rate, skip rule and rollback). `train_runs` with one setting and one seed computes
what a plain loop with torch.optim.AdamW computes (tests/test_pages_diagnosis.py). torch.autocast
does not reach the kernels inside vmap, so the FP16 runs train one by one in a plain loop
(`fp16_runs`: torch.autocast, torch.optim.AdamW, torch.amp.GradScaler).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare

__all__ = [
    "Setting",
    "FAILURES",
    "SIGNALS",
    "train_runs",
    "fp16_runs",
    "gallery",
    "summary",
    "table",
    "static_table",
    "widget",
]

BETAS, EPS, WEIGHT_DECAY, MAX_NORM = (0.9, 0.95), 1e-8, 0.1, 1.0
CHECKPOINT_EVERY = 5  # steps between the copies of weights and optimizer state a rollback reloads


@dataclass(frozen=True)
class Setting:
    lr: float = 1e-2  # peak learning rate of AdamW
    warmup: int = 5  # steps of linear warmup from lr / warmup to lr
    corrupt: tuple[int, ...] = ()  # steps whose targets are all one byte (a corrupt shard)
    skip_over: float = 0.0  # skip a step whose grad norm exceeds this times the recent median
    loss_mult: float = 1.0  # 4.0: four micro-batch losses summed, the divisor forgotten
    rollback: bool = False  # on a loss 1.5x the best so far: reload the last checkpoint, lr / 10
    loss_scale: float = 1.0  # FP16 autocast with the loss multiplied by this
    dynamic: bool = False  # a torch.amp.GradScaler: on inf/NaN skip the step, halve the scale
    qk_norm: bool = False  # LayerNorm on queries and keys (TransformerConfig.qk_norm)
    fp16: bool = False  # forward under torch.autocast(dtype=torch.float16)


BASE = Setting()
# failure -> (the failing setting, the remedy's setting)
FAILURES = {
    "corrupted batch": (
        Setting(corrupt=(5, 6, 7)),
        Setting(corrupt=(5, 6, 7), skip_over=3.0),
    ),
    "learning rate too high": (Setting(lr=1.0, warmup=8), Setting(lr=1.0, warmup=8, rollback=True)),
    "missing warmup": (Setting(lr=0.3, warmup=0), Setting(lr=0.3, warmup=8)),
    "missing accumulation divisor": (Setting(loss_mult=4.0), BASE),
    "FP16 overflow": (
        Setting(fp16=True, loss_scale=2.0**18),
        Setting(fp16=True, loss_scale=2.0**18, dynamic=True),
    ),
    "attention-logit growth": (Setting(lr=0.3, warmup=8), Setting(lr=0.3, warmup=8, qk_norm=True)),
}
REMEDIES = {
    "corrupted batch": "skip the step",
    "learning rate too high": "roll back, lr / 10",
    "missing warmup": "warmup",
    "missing accumulation divisor": "the divisor",
    "FP16 overflow": "GradScaler",
    "attention-logit growth": "QK-norm",
}
# signal -> (axis label, log scale)
SIGNALS = {
    "loss": ("training loss", False),
    "norm": ("gradient norm (before clipping)", True),
    "logit": ("largest attention logit", True),
    "ratio": ("update / weight (RMS ratio)", True),
    "scale": ("loss scale", True),
}
# signal -> its name in the table shown without JavaScript
SHORT = {
    "loss": "loss",
    "norm": "grad norm",
    "logit": "largest logit",
    "ratio": "ratio",
    "scale": "scale",
}


def train_runs(settings, seeds, steps: int, cfg: TransformerConfig, batch: int = 8, data_seed=0):
    """Train one FP32 model per (setting, seed), side by side; return per-step logs (runs, steps).

    All settings must share `qk_norm` (one architecture per call); FP16 settings go to fp16_runs.
    Runs see the same batches; a seed sets the initial weights.

    Returns:
        (runs, log): runs lists (setting, seed) in order; log maps each key of SIGNALS and
        "skipped", "clipped", "lr", "rolled_back" to a (runs, steps) tensor.

    Raises:
        ValueError: the settings mix architectures, one is FP16, or `steps` is not positive.
    """
    settings = list(settings)
    if len({s.qk_norm for s in settings}) != 1:
        raise ValueError("train_runs: `settings` must share qk_norm; call once per kind.")
    if any(s.fp16 for s in settings):
        raise ValueError("train_runs: FP16 settings train in fp16_runs(); pass FP32 ones here.")
    if steps < 1:
        raise ValueError(f"train_runs: `steps` must be a positive integer, got {steps}.")
    cfg = TransformerConfig(**{**cfg.__dict__, "qk_norm": settings[0].qk_norm})
    runs = [(s, seed) for s in settings for seed in seeds]
    models = {}  # one model per seed: every setting of a seed starts from the same weights
    for seed in seeds:
        torch.manual_seed(seed)
        models[seed] = Transformer(cfg)
    stacked, _ = stack_module_state([models[seed] for _, seed in runs])
    base, R = models[seeds[0]], len(runs)
    # every run's weights as one row of a (runs, weights) leaf; the model sees views of it
    flat = torch.cat([p.detach().flatten(1) for p in stacked.values()], 1).requires_grad_()
    shapes = [(name, p.shape[1:], p[0].numel()) for name, p in stacked.items()]
    m, v = torch.zeros_like(flat), torch.zeros_like(flat)
    col = lambda key: torch.tensor([float(getattr(s, key)) for s, _ in runs])  # noqa: E731
    lr_peak, warm, mult, skip_over = col("lr"), col("warmup"), col("loss_mult"), col("skip_over")
    scale, rollback = torch.ones(R), col("rollback").bool()
    t, lr_cut = torch.zeros(R, 1), torch.ones(R)

    def forward(p, x):
        out = functional_call(base, (p,), (x,))
        return out, torch.stack([b.attn.max_logit for b in base.blocks]).amax()

    data, gen = shakespeare(), torch.Generator().manual_seed(data_seed)
    keys = ("loss", "norm", "logit", "ratio", "scale", "skipped", "clipped", "lr", "rolled_back")
    log = {k: [] for k in keys}
    ckpt, best, recent = None, torch.full((len(runs),), float("inf")), []
    for step in range(steps):
        if step % CHECKPOINT_EVERY == 0:  # before the step, as the page's guarded_run saves
            ckpt = (flat.detach().clone(), m.clone(), v.clone(), t.clone())
        x, y = get_batch(data, batch, cfg.seq_len, gen)
        bad = torch.tensor([step in s.corrupt for s, _ in runs])
        # the runs that see the corrupt batch get targets of one repeated byte (null)
        ys = torch.where(bad[:, None, None], torch.zeros_like(y), y).expand(len(runs), *y.shape)
        params, start = {}, 0
        for name, shape, n in shapes:
            params[name], start = flat[:, start : start + n].view(R, *shape), start + n
        out, logit = vmap(forward, in_dims=(0, None))(params, x)  # (runs, batch, tokens, vocab)
        loss = F.cross_entropy(out.flatten(0, 2), ys.flatten(), reduction="none")
        loss = loss.view(len(runs), -1).mean(1)
        flat.grad = None
        (loss * mult).sum().backward()
        with torch.no_grad():
            g = flat.grad
            norm = torch.linalg.vector_norm(g, dim=1)
            finite = torch.isfinite(norm)
            median = torch.stack(recent[-10:]).median(0).values if recent else norm
            skip = (skip_over > 0) & (norm > skip_over * median)
            recent.append(torch.where(skip, median, norm))
            coef = (MAX_NORM / (norm + 1e-6)).clamp(max=1.0)
            lr = lr_peak * lr_cut * ((step + 1) / warm.clamp(min=1)).clamp(max=1.0)
            go = (~skip)[:, None]
            t = t + go.float()
            g = g * coef[:, None]  # AdamW as torch.optim.AdamW computes it, one row per run
            m.copy_(torch.where(go, BETAS[0] * m + (1 - BETAS[0]) * g, m))
            v.copy_(torch.where(go, BETAS[1] * v + (1 - BETAS[1]) * g * g, v))
            bc1, bc2 = 1 - BETAS[0] ** t.clamp(min=1), (1 - BETAS[1] ** t.clamp(min=1)).sqrt()
            upd = lr[:, None] * (WEIGHT_DECAY * flat + (m / bc1) / (v.sqrt() / bc2 + EPS))
            upd = torch.where(go, upd, torch.zeros_like(upd))
            ratio = torch.linalg.vector_norm(upd, dim=1) / torch.linalg.vector_norm(flat, dim=1)
            flat.sub_(upd)
            loss = loss.detach()
            spike = rollback & (~torch.isfinite(loss) | (loss > 1.5 * best))
            for key, value in zip(
                keys,
                (
                    loss,
                    norm,
                    logit.detach(),
                    ratio.float(),
                    scale.clone(),
                    skip,
                    finite & (norm > MAX_NORM),
                    lr,
                    spike,
                ),
            ):
                log[key].append(value.float())
            if spike.any():  # reload weights, AdamW's moments and step count; lower the lr
                for now, saved in zip((flat, m, v), ckpt):
                    now.copy_(torch.where(spike[:, None], saved, now))
                t = torch.where(spike[:, None], ckpt[3], t)
                lr_cut = torch.where(spike, lr_cut / 10, lr_cut)
            best = torch.minimum(best, torch.where(torch.isfinite(loss), loss, best))
    return runs, {k: torch.stack(vs).T for k, vs in log.items()}


def fp16_runs(settings, seeds, steps: int, cfg: TransformerConfig, batch: int = 8, data_seed=0):
    """Train one FP16 model per (setting, seed) in a plain loop; return logs as train_runs does.

    The loop is the page's: torch.autocast(float16), the loss multiplied by `loss_scale` (fixed)
    or a torch.amp.GradScaler starting there (`dynamic`), clip_grad_norm_, torch.optim.AdamW.
    It reads `lr`, `warmup`, `loss_scale`, `dynamic` and `qk_norm` of each setting.

    Raises:
        ValueError: a setting is not FP16, or `steps` is not positive.
    """
    settings = list(settings)
    if not all(s.fp16 for s in settings):
        raise ValueError(
            "fp16_runs: every setting must have fp16=True; FP32 ones go to train_runs."
        )
    if steps < 1:
        raise ValueError(f"fp16_runs: `steps` must be a positive integer, got {steps}.")
    keys = ("loss", "norm", "logit", "ratio", "scale", "skipped", "clipped", "lr", "rolled_back")
    runs, rows = [(s, seed) for s in settings for seed in seeds], []
    for s, seed in runs:
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig(**{**cfg.__dict__, "qk_norm": s.qk_norm}))
        opt = torch.optim.AdamW(
            model.parameters(), lr=s.lr, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY
        )
        scaler = torch.amp.GradScaler("cpu", init_scale=s.loss_scale) if s.dynamic else None
        data, gen, row = shakespeare(), torch.Generator().manual_seed(data_seed), []
        for step in range(steps):
            lr = s.lr * min(1.0, (step + 1) / max(s.warmup, 1))
            opt.param_groups[0]["lr"] = lr
            x, y = get_batch(data, batch, cfg.seq_len, gen)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
            logit = max(float(b.attn.max_logit) for b in model.blocks)
            scale = scaler.get_scale() if scaler else s.loss_scale
            opt.zero_grad(set_to_none=True)
            (scaler.scale(loss) if scaler else loss * scale).backward()
            with torch.no_grad():
                if scaler:
                    scaler.unscale_(opt)
                else:
                    for p in model.parameters():
                        p.grad /= scale
                norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM))
                before = [p.detach().clone() for p in model.parameters()]
                if scaler:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
                moved = sum(
                    float((p - b).square().sum()) for p, b in zip(model.parameters(), before)
                )
                size = sum(float(b.square().sum()) for b in before)
            skipped = bool(scaler) and scaler.get_scale() < scale
            clipped = math.isfinite(norm) and norm > MAX_NORM
            row.append(
                (
                    loss.item(),
                    norm,
                    logit,
                    math.sqrt(moved / size),
                    scale,
                    skipped,
                    clipped,
                    lr,
                    0.0,
                )
            )
        rows.append(row)
    log = torch.tensor(rows, dtype=torch.float32)  # (runs, steps, keys)
    return runs, {k: log[:, :, i] for i, k in enumerate(keys)}


def gallery(seeds=(0, 1, 2), steps: int = 12, fp16_steps: int = 4, seq_len: int = 16):
    """Run every failure of FAILURES and its remedy for each seed; return {failure: {...}}.

    Each failure maps to {"fail": log, "fix": log}, a log mapping signals to (seeds, steps).
    Settings shared by two failures (the base run, lr 0.3 with warmup) are trained once.
    """
    cfg = TransformerConfig(seq_len=seq_len)
    wanted = list(dict.fromkeys(s for pair in FAILURES.values() for s in pair))
    logs = {}
    for kind in dict.fromkeys((s.qk_norm, s.fp16) for s in wanted):
        group = [s for s in wanted if (s.qk_norm, s.fp16) == kind]
        train = fp16_runs if kind[1] else train_runs
        runs, log = train(group, seeds, fp16_steps if kind[1] else steps, cfg)
        for i, s in enumerate(group):
            rows = slice(i * len(seeds), (i + 1) * len(seeds))
            logs[s] = {k: val[rows] for k, val in log.items()}
    return {name: {"fail": logs[a], "fix": logs[b]} for name, (a, b) in FAILURES.items()}


def _ends(log) -> torch.Tensor:  # per seed: mean training loss of the last three steps
    return log["loss"][:, -3:].mean(1)


# failure -> (what the signature measures, its signal, how a run's steps reduce to one number)
SIGNATURES = {
    "corrupted batch": ("largest grad norm", "norm", lambda x: x.nan_to_num(0).amax(1)),
    "learning rate too high": ("largest loss", "loss", lambda x: x.nan_to_num(0).amax(1)),
    "missing warmup": ("largest loss", "loss", lambda x: x.nan_to_num(0).amax(1)),
    "missing accumulation divisor": ("median grad norm", "norm", lambda x: x.median(1).values),
    "FP16 overflow": ("steps with a NaN loss", "loss", lambda x: (~x.isfinite()).sum(1).float()),
    "attention-logit growth": ("largest attention logit", "logit", lambda x: x.amax(1)),
}


def _after(x: torch.Tensor, step: int) -> torch.Tensor:
    """Per seed, the largest value after `step` (inf where inf/NaN; NaN when no step is left)."""
    rest = x[:, step + 1 :]
    if rest.shape[1] == 0:
        return torch.full((x.shape[0],), float("nan"))
    return rest.nan_to_num(float("inf")).amax(1)


def _first_nonfinite(x: torch.Tensor) -> torch.Tensor:
    """Per seed, the first step whose value is inf/NaN, or the number of steps if none is."""
    bad = ~x.isfinite()
    return torch.where(bad.any(1), bad.float().argmax(1), x.shape[1]).float()


def summary(runs: dict) -> dict[str, dict[str, torch.Tensor]]:
    """Reduce gallery(...)'s runs to per-seed numbers for each failure.

    Returns:
        failure -> {"sign_fail", "sign_fix": the signature (SIGNATURES) per seed; "end_fail",
        "end_fix": mean loss of the last three steps per seed; "clipped_fail", "clipped_fix":
        fraction of clipped steps; "skipped_fix", "rolled_back_fix": counts per seed;
        "norm_after_fail", "first_nonfinite_fail": see below}.

    Raises:
        ValueError: a failure of FAILURES is missing from `runs`.
    """
    missing = [name for name in FAILURES if name not in runs]
    if missing:
        raise ValueError(f"summary: `runs` has no {missing}; pass what gallery() returns.")
    out = {}
    for name, (_, key, reduce) in SIGNATURES.items():
        fail, fix = runs[name]["fail"], runs[name]["fix"]
        out[name] = {
            "sign_fail": reduce(fail[key]),
            "sign_fix": reduce(fix[key]),
            "end_fail": _ends(fail),
            "end_fix": _ends(fix),
            "clipped_fail": fail["clipped"].mean(1),
            "clipped_fix": fix["clipped"].mean(1),
            "skipped_fix": fix["skipped"].sum(1),
            "rolled_back_fix": fix["rolled_back"].sum(1),
            # the largest grad norm after the last corrupt step (the failing run); NaN if none
            "norm_after_fail": _after(fail["norm"], max(FAILURES[name][0].corrupt, default=-1)),
            # the first step (from 0) whose grad norm is inf/NaN in the failing run; steps if none
            "first_nonfinite_fail": _first_nonfinite(fail["norm"]),
        }
    return out


def spread(values: torch.Tensor, digits: int = 3) -> str:
    """Return 'median (lowest–highest)' of per-seed `values`; 'NaN' parts where a value is NaN."""

    def f(x: float) -> str:
        return "NaN" if x != x else f"{x:.{digits}g}"

    v = values.double()
    if v.isnan().any():
        return f"NaN in {int(v.isnan().sum())} of {len(v)}"
    return f"{f(v.median().item())} ({f(v.min().item())}–{f(v.max().item())})"


def table(runs: dict) -> str:
    """Return the gallery's Markdown table: per failure its signature and final loss, both runs."""
    s = summary(runs)
    rows = [
        "| Failure | Signature | Failure run | Remedy | Remedy run | Final loss, failure "
        "| Final loss, remedy |",
        "|:--|:--|--:|:--|--:|--:|--:|",
    ]
    for name, (label, _, _) in SIGNATURES.items():
        r = s[name]
        rows.append(
            f"| {name} | {label} | {spread(r['sign_fail'])} | {REMEDIES[name]} "
            f"| {spread(r['sign_fix'])} | {spread(r['end_fail'])} | {spread(r['end_fix'])} |"
        )
    return "\n".join(rows)


def static_table(runs: dict) -> str:
    """Return the HTML table a reader without JavaScript sees: for each failure, its signature
    signal at every step (columns), the median of the seeds, in a row for the failing run and one
    for the remedy ('inf/NaN' where a seed's value was not finite)."""
    import markdown

    steps = max(r["fail"]["loss"].shape[1] for r in runs.values())
    rows = [
        "| Failure (signal) | Run | step 1 | "
        + " | ".join(str(i + 1) for i in range(1, steps))
        + " |",
        "|:--|:--|" + "--:|" * steps,
    ]
    for name in FAILURES:
        key = SIGNATURES[name][1]
        for which, label in (("fail", "failure"), ("fix", REMEDIES[name])):
            what = f"{name} ({SHORT[key]})" if which == "fail" else ""
            x = runs[name][which][key]
            cells = [
                f"{x[:, i].median().item():.3g}" if x[:, i].isfinite().all() else "inf/NaN"
                for i in range(x.shape[1])
            ]
            cells += [""] * (steps - len(cells))
            rows.append(f"| {what} | {label} | " + " | ".join(cells) + " |")
    return markdown.markdown("\n".join(rows), extensions=["tables"])


def _series(x: torch.Tensor) -> list[list[float | None]]:
    """Per-seed lists of floats, None where inf/NaN (JSON has neither)."""
    return [[v if v == v and abs(v) != float("inf") else None for v in row] for row in x.tolist()]


def widget_data(runs: dict) -> dict:
    """Return the diagnosis widget's data: for each failure, every signal of both runs per seed."""
    from gradflow_site.widgets import rounded

    failures = []
    for name in FAILURES:
        fail, fix = runs[name]["fail"], runs[name]["fix"]
        failures.append(
            {
                "name": name,
                "remedy": REMEDIES[name],
                "signature": SIGNATURES[name][1],
                "steps": fail["loss"].shape[1],
                "fail": {key: rounded(_series(fail[key])) for key in SIGNALS},
                "fix": {key: rounded(_series(fix[key])) for key in SIGNALS},
                "skipped": fix["skipped"].sum(1).int().tolist(),
                "rolled_back": fix["rolled_back"].sum(1).int().tolist(),
            }
        )
    return {"failures": failures, "signals": {k: [lab, log] for k, (lab, log) in SIGNALS.items()}}


def widget(runs: dict) -> str:
    """Return the diagnosis widget (pick a failure, a signal, see both runs); static_table() is
    what a reader without JavaScript sees."""
    from gradflow_site.widgets import widget as make_widget

    return make_widget("diagnosis", widget_data(runs), static=static_table(runs))


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(a.max() >= b.min() and b.max() >= a.min())


def check_claims(found: dict) -> None:
    """Raise if a pattern that docs/diagnosis.md states in words does not hold in `found`.

    Raises:
        ValueError: naming the failure and the pattern that no longer holds.
    """
    f = found
    claims = {
        "corrupted batch: every run that skipped ends above every run that did not": bool(
            f["corrupted batch"]["end_fix"].min() > f["corrupted batch"]["end_fail"].max()
        ),
        "corrupted batch: the norm falls back below 1.5x the base median after the shard": bool(
            (
                f["corrupted batch"]["norm_after_fail"]
                < 1.5 * f["missing accumulation divisor"]["sign_fix"].max()
            ).all()
        ),
        "learning rate too high: every rolled-back run ends below every failing run": bool(
            f["learning rate too high"]["end_fix"].max()
            < f["learning rate too high"]["end_fail"].min()
        ),
        "learning rate too high: every step of every failing run clipped": bool(
            (f["learning rate too high"]["clipped_fail"] == 1).all()
        ),
        "learning rate too high: every rolled-back run ends above every base run": bool(
            f["learning rate too high"]["end_fix"].min()
            > f["missing accumulation divisor"]["end_fix"].max()
        ),
        "missing warmup: every failing run peaks above every warmed-up run": bool(
            f["missing warmup"]["sign_fix"].max() < f["missing warmup"]["sign_fail"].min()
        ),
        "missing warmup: every failing run still ends above every warmed-up run": bool(
            f["missing warmup"]["end_fix"].max() < f["missing warmup"]["end_fail"].min()
        ),
        "missing accumulation divisor: every step clipped": bool(
            (f["missing accumulation divisor"]["clipped_fail"] == 1).all()
        ),
        "missing accumulation divisor: final losses overlap": _overlap(
            f["missing accumulation divisor"]["end_fail"],
            f["missing accumulation divisor"]["end_fix"],
        ),
        "FP16 overflow: every fixed-scale run overflows on its first step": bool(
            (f["FP16 overflow"]["first_nonfinite_fail"] == 0).all()
        ),
        "FP16 overflow: every fixed-scale run ends NaN, no GradScaler run does": bool(
            f["FP16 overflow"]["end_fail"].isnan().all()
            and f["FP16 overflow"]["end_fix"].isfinite().all()
        ),
        "attention-logit growth: QK-norm logits 10x below every failing run": bool(
            10 * f["attention-logit growth"]["sign_fix"].max()
            < f["attention-logit growth"]["sign_fail"].min()
        ),
        "attention-logit growth: final losses overlap": _overlap(
            f["attention-logit growth"]["end_fail"], f["attention-logit growth"]["end_fix"]
        ),
    }
    broken = [claim for claim, holds in claims.items() if not holds]
    if broken:
        raise ValueError(f"check_claims: the page says {broken}, which the runs no longer show.")
