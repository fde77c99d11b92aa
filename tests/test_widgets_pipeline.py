"""The traced training step (docs/pipeline.md) and the memory calculator (docs/memory.md) in
chromium, held against gradflow_ref (trace_step, training_memory) computed here."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from torch import nn

from gradflow_ref.memory import MemoryConfig, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer, trace_step
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

PAGE = "pipeline/"
MEMORY_PAGE = "memory/"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _data(page, name):
    return json.loads(page.get_attribute(f'[data-gf-widget="{name}"]', "data-gf-data"))


def _traced(precision, n_micro, segments):
    """Stage names, dtypes and loop flags of one traced step (a 7-layer model, as the page's)."""
    torch.manual_seed(0)
    layers = [nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 3))
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    trainer = Trainer(model, PipelineConfig(dtype=dtype, segments=segments))
    batches = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(n_micro)]
    _, stages = trace_step(trainer, batches)
    kept = [s for s in stages if s.micro_batch in (0, None)]
    return [(s.name, s.dtype or "no tensor", s.micro_batch is not None) for s in kept]


def test_pipeline_widget_shows_the_traced_stages_of_every_switch_combination(browser, server):
    with open_page(browser, server, PAGE) as (page, record):
        data = _data(page, "pipeline")
        fig = page.locator('[data-gf-widget="pipeline"]')
        n_micro, segments = data["combos"]["bf16-1-0"]["micro"], data["segments"]
        for precision, accumulate, checkpointed in itertools.product(
            ("bf16", "fp16"), (False, True), (False, True)
        ):
            fig.get_by_label("Working precision", exact=True).select_option(precision)
            fig.get_by_label(f"Accumulate {n_micro} micro-batches", exact=True).set_checked(
                accumulate
            )
            fig.get_by_label(f"Checkpoint {segments} segments", exact=True).set_checked(
                checkpointed
            )
            shown = fig.locator(".gf-pipe__stage").evaluate_all(
                "els => els.map(e => [e.dataset.stage,"
                " e.querySelector('.gf-pipe__dtype').textContent,"
                " !!e.closest('.gf-pipe__loop')])"
            )
            expected = _traced(
                precision, n_micro if accumulate else 1, segments if checkpointed else 1
            )
            key = f"{precision}-{int(accumulate)}-{int(checkpointed)}"
            built = data["combos"][key]["stages"]
            assert [tuple(s) for s in shown] == expected, key
            assert [s[0] for s in built] == [s[0] for s in expected], key
            micro = fig.locator(".gf-pipe").get_attribute("data-micro")
            assert micro == str(n_micro if accumulate else 1)
        assert not record["errors"]


def test_pipeline_widget_opens_a_stage_on_click_and_on_the_keyboard(browser, server):
    with open_page(browser, server, PAGE) as (page, _):
        fig = page.locator('[data-gf-widget="pipeline"]')
        # the chapter's stage table, as the reader sees it: the widget shows its "if it moves"
        clip_row = page.locator(".gf-stage-notes tbody tr").filter(has_text="Clip the global norm")
        clip_moves = clip_row.locator("td").nth(3).text_content().strip()
        detail = fig.locator(".gf-pipe__detail")
        fig.locator('button[data-stage="clip"]').click()
        assert detail.get_attribute("data-stage") == "clip"
        assert fig.locator('button[data-stage="clip"]').get_attribute("aria-pressed") == "true"
        assert clip_moves.startswith("Inside the micro-batch loop")
        assert clip_moves in detail.inner_text()
        fig.locator('button[data-stage="zero"]').focus()
        page.keyboard.press("Enter")
        assert detail.get_attribute("data-stage") == "zero"
        fig.get_by_label("Working precision", exact=True).select_option("fp16")
        fig.locator('button[data-stage="unscale"]').focus()
        page.keyboard.press("Space")
        assert detail.get_attribute("data-stage") == "unscale"
        assert "In this run: every gradient divided by 65536" in detail.inner_text()
        assert fig.locator('[aria-pressed="true"]').count() == 1


def _memory_config(cfg: dict) -> MemoryConfig:
    return MemoryConfig(
        **{k: DTYPES.get(v, v) if k.endswith("_dtype") else v for k, v in cfg.items()}
    )


def _sampled_configs(data):
    """Every precision x optimizer x checkpointing combination, cycling presets and options."""
    presets, out = data["presets"], []
    combos = itertools.product(
        data["precisions"].values(), data["states"], ("none", "selective", "full")
    )
    for i, (precision, optimizer, mode) in enumerate(combos):
        preset = presets[i % len(presets)]
        cfg = {k: preset[k] for k in ("n_layers", "hidden", "n_heads", "seq_len", "vocab")}
        cfg |= {k: v for k, v in precision.items() if k != "label"}
        cfg |= {
            "n_params": preset["n_params"] if i % 3 else None,
            "micro_batch": (1, 2, 8)[i % 3],
            "optimizer": optimizer,
            "checkpointing": mode,
            "stores_scores": i % 2 == 0,
            "dropout": i % 4 < 2,
            "mask_bytes": 1 + i % 2,
        }
        out.append(cfg)
    return out


def test_memory_logic_breakdown_equals_training_memory_to_the_byte(browser, server):
    with open_page(browser, server, MEMORY_PAGE) as (page, _):
        data = _data(page, "memory")
        data_precisions, configs = data["precisions"], _sampled_configs(data)
        got = page.evaluate("cs => cs.map(c => GF.logic.memory.breakdown(c))", configs)
        counts = page.evaluate("cs => cs.map(c => GF.logic.memory.parameterCount(c))", configs)
    assert len(configs) == len(data_precisions) * 4 * 3
    for cfg, js, n in zip(configs, got, counts):
        python = training_memory(_memory_config(cfg))
        assert js == python.as_dict(), cfg
        assert n == python.weights // DTYPES[cfg["param_dtype"]].itemsize


def _table(fig) -> dict[str, int]:
    rows = fig.locator("tr[data-component]")
    return {
        rows.nth(i).get_attribute("data-component"): int(rows.nth(i).get_attribute("data-bytes"))
        for i in range(rows.count())
    }


def test_memory_widget_recomputes_the_table_from_its_controls(browser, server):
    with open_page(browser, server, MEMORY_PAGE) as (page, record):
        data = _data(page, "memory")
        fig = page.locator('[data-gf-widget="memory"]')
        preset = next(p for p in data["presets"] if p["name"] == "70B")
        shape = {k: preset[k] for k in ("n_layers", "hidden", "n_heads", "seq_len", "vocab")}
        fig.get_by_label("Preset", exact=True).select_option("70B")
        fig.get_by_label("Precision", exact=True).select_option("fp32")
        fig.get_by_label("Optimizer", exact=True).select_option("sgd_momentum")
        fig.get_by_label("Checkpointing", exact=True).select_option("full")
        fig.get_by_label("Micro-batch (sequences)", exact=True).fill("4")
        fp32 = {k: v for k, v in data["precisions"]["fp32"].items() if k != "label"}
        cfg = shape | fp32 | {"n_params": preset["n_params"], "micro_batch": 4}
        cfg |= {"optimizer": "sgd_momentum", "checkpointing": "full", "stores_scores": False}
        cfg |= {"dropout": False}
        assert _table(fig) == training_memory(_memory_config(cfg)).as_dict()
        fig.get_by_label("Parameters (blank: count from the shape)", exact=True).fill("")
        expected = training_memory(_memory_config(cfg | {"n_params": None}))
        assert _table(fig) == expected.as_dict()
        assert fig.locator(".gf-status").get_attribute("data-total") == str(expected.total)
        fig.get_by_label("Heads", exact=True).fill("60")  # 8192 is not divisible by 60
        assert fig.locator(".gf-status").get_attribute("data-error") == "1"
        assert "divisible" in fig.locator(".gf-status").inner_text()
        assert not record["errors"]
