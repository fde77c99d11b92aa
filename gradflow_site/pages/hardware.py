"""Build side of docs/hardware.md: datasheet tables, the roofline and attention figures, widgets.

Every figure comes from gradflow_ref.hardware (datasheets and architecture articles, each with
its link) and gradflow_ref.roofline; nothing here is typed in.
"""

from __future__ import annotations

from gradflow_ref import roofline
from gradflow_ref.hardware import GPUS, ON_CHIP, peak_flops, ridge_point
from gradflow_site.render import plain_log_ticks

__all__ = [
    "PRESETS",
    "SPEC_DTYPES",
    "attention_figure",
    "hierarchy_table",
    "ridge_table",
    "roofline_data",
    "roofline_figure",
    "roofline_widget",
    "spec_table",
]

# (label, dtype key, sparse figure exists): the tensor-core math of the spec table
SPEC_DTYPES = [
    ("BF16/FP16", "bf16", True),
    ("TF32", "tf32", True),
    ("FP8", "fp8", True),
    ("FP64", "fp64_tensor", False),
]
# matmul presets of the widget: (label, M, N, K)
PRESETS = [
    ("7B MLP up-projection, 1 token", 1, 11008, 4096),
    ("7B MLP up-projection, 4096 tokens", 4096, 11008, 4096),
    ("7B attention projection, 1 token", 1, 4096, 4096),
    ("7B attention projection, 512 tokens", 512, 4096, 4096),
    ("Square 8192", 8192, 8192, 8192),
]
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8": 1, "fp64_tensor": 8}


def _link(text: str, url: str) -> str:
    return f"[{text}]({url})"


def spec_table() -> str:
    """Return the Markdown spec table: tensor TFLOPS dense and 2:4 sparse, memory, bandwidth."""
    head = ["GPU"]
    for label, _, sparse in SPEC_DTYPES:
        head.append(f"{label} dense")
        if sparse:
            head.append(f"{label} 2:4 sparse")
    head += ["HBM (GB)", "HBM (TB/s)", "source"]
    rows = []
    for name, card in GPUS.items():
        cells = [name]
        for _, key, sparse in SPEC_DTYPES:
            have = key in card.tflops
            cells.append(f"{peak_flops(name, key) / 1e12:g}" if have else "none")
            if sparse:
                cells.append(f"{peak_flops(name, key, sparse=True) / 1e12:g}" if have else "none")
        cells += [
            f"{card.memory_bytes / 1e9:g}",
            f"{card.memory_bytes_per_s / 1e12:.3g}",
            _link("datasheet", card.source),
        ]
        rows.append(cells)
    return _markdown(head, rows)


def ridge_table() -> str:
    """Return the Markdown table of ridge points (dense peak / HBM bandwidth) per GPU and dtype."""
    head = ["GPU"] + [f"{label} (FLOP/byte)" for label, _, _ in SPEC_DTYPES]
    rows = [
        [name]
        + [
            f"{ridge_point(name, key):.0f}" if key in card.tflops else "none"
            for _, key, _ in SPEC_DTYPES
        ]
        for name, card in GPUS.items()
    ]
    return _markdown(head, rows)


def hierarchy_table() -> str:
    """Return the memory hierarchy as Markdown: one row per level, one column per GPU."""
    missing = "not published"
    head = ["level"] + list(GPUS)

    def chip(name, fmt):
        card = ON_CHIP[name]
        return missing if card is None else fmt(card)

    rows = [
        ["registers"]
        + [
            chip(n, lambda c: _link(f"{c.register_kib_per_sm} KB per SM x {c.sms} SMs", c.source))
            for n in GPUS
        ],
        ["L1 / shared memory"]
        + [
            chip(
                n,
                lambda c: _link(
                    f"{c.l1_shared_kib_per_sm} KB per SM "
                    f"(up to {c.shared_max_kib_per_sm} KB shared)",
                    c.source,
                ),
            )
            for n in GPUS
        ],
        ["L1 / shared bandwidth"]
        + [
            chip(
                n,
                lambda c: (
                    missing
                    if c.sram_bytes_per_s is None
                    else _link(
                        f"about {c.sram_bytes_per_s / 1e12:g} TB/s (paper's estimate)",
                        c.sram_bandwidth_source,
                    )
                ),
            )
            for n in GPUS
        ],
        ["L2 cache"] + [chip(n, lambda c: _link(f"{c.l2_mib} MB", c.source)) for n in GPUS],
        ["L2 read bandwidth"]
        + [
            chip(
                n,
                lambda c: (
                    missing
                    if c.l2_bytes_per_s is None
                    else _link(
                        f"{c.l2_bytes_per_clock} bytes per clock, "
                        f"{c.l2_bytes_per_s / 1e12:.1f} TB/s at {c.boost_clock_mhz} MHz",
                        c.source,
                    )
                ),
            )
            for n in GPUS
        ],
        ["HBM"]
        + [
            _link(
                f"{g.memory_bytes / 1e9:g} GB at {g.memory_bytes_per_s / 1e12:.3g} TB/s", g.source
            )
            for g in GPUS.values()
        ],
        ["NVLink (GPU to GPU)"]
        + [_link(f"{g.nvlink_bytes_per_s / 1e9:g} GB/s", g.source) for g in GPUS.values()],
        ["PCIe (host memory)"]
        + [_link(f"{g.pcie_bytes_per_s / 1e9:g} GB/s", g.source) for g in GPUS.values()],
    ]
    return _markdown(head, rows)


def _markdown(head: list[str], rows: list[list[str]]) -> str:
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join([":--"] + ["--:"] * (len(head) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _presets(dtype_bytes: int = 2):
    return [(label, roofline.Matmul(m, n, k, dtype_bytes)) for label, m, n, k in PRESETS]


def roofline_figure():
    """Return a log-log matplotlib roofline: BF16 roofs of each GPU and the presets on them."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    intensities = [2.0**e for e in range(-2, 13)]
    for i, name in enumerate(GPUS):
        bw, peak = GPUS[name].memory_bytes_per_s, peak_flops(name, "bf16")
        ax.plot(
            intensities,
            [min(peak, bw * x) / 1e12 for x in intensities],
            label=f"{name} BF16 (ridge {ridge_point(name, 'bf16'):.0f})",
            linestyle=["-", "--", ":"][i],
            color=f"C{i}",
        )
    for j, (label, mm) in enumerate(_presets()):
        b = roofline.matmul_bound(mm, "H100 SXM", "bf16")
        ax.plot(
            b.intensity,
            b.attainable_flops / 1e12,
            marker="os^vD"[j],
            color="k",
            linestyle="none",
            label=f"{label} (H100)",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity (FLOP per HBM byte)",
        ylabel="attainable TFLOP/s",
    )
    plain_log_ticks(ax)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def roofline_data() -> dict:
    """Return the roofline widget's data: every GPU's roofs and the matmul presets."""
    gpus = {
        name: {
            "bandwidth": card.memory_bytes_per_s,
            "peaks": {key: peak_flops(name, key) for key in DTYPE_BYTES if key in card.tflops},
        }
        for name, card in GPUS.items()
    }
    return {
        "gpus": gpus,
        "dtypeBytes": DTYPE_BYTES,
        "presets": [{"label": label, "m": m, "n": n, "k": k} for label, m, n, k in PRESETS],
        "start": {"gpu": "H100 SXM", "dtype": "bf16", "preset": 0},
    }


def roofline_widget() -> str:
    """Return the roofline widget's HTML, with roofline_figure() as its static figure."""
    from gradflow_site.render import svg
    from gradflow_site.widgets import widget

    return widget("roofline", roofline_data(), static=svg(roofline_figure()))


ATTENTION_DIMS = (64, 128)  # head dimensions the attention figure draws
# the most shared memory one SM of the A100 and the H100 gives a kernel, in KiB
# (gradflow_ref.hardware.ON_CHIP): FlashAttention's blocks live there, not in the L1 cache
ATTENTION_SRAM_KIB = {
    name: ON_CHIP[name].shared_max_kib_per_sm for name in ("A100 80GB SXM", "H100 SXM")
}


def attention_figure():
    """Return a figure of HBM bytes per head, standard attention against FlashAttention."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    lengths = [2**e for e in range(8, 17)]
    srams = [kib * 1024 for kib in ATTENTION_SRAM_KIB.values()]
    for i, d in enumerate(ATTENTION_DIMS):
        ax.plot(
            lengths,
            [roofline.attention_hbm_bytes(n, d) / 2**20 for n in lengths],
            color=f"C{i}",
            label=f"standard, d={d}",
        )
        for sram, style in zip(srams, ("--", ":")):
            ax.plot(
                lengths,
                [roofline.flash_attention_hbm_bytes(n, d, sram) / 2**20 for n in lengths],
                color=f"C{i}",
                linestyle=style,
                label=f"FlashAttention, d={d}, {sram // 1024} KB shared memory",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="sequence length N",
        ylabel="HBM MiB per head (BF16, forward)",
    )
    plain_log_ticks(ax)
    ax.legend(fontsize=7)
    return fig
