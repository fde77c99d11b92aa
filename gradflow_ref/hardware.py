"""GPU datasheet figures: the one place the guide takes peak FLOP/s, memory and bandwidth from.

Each figure is copied from NVIDIA's public datasheet named in `source`, never measured here.
Tensor-core figures are dense; the datasheets' larger "with sparsity" figures are 2:4 structured
sparsity, exactly twice the dense ones (`peak_flops(..., sparse=True)`). Chapter 5b uses it for
ridge points and training-time bounds (Williams et al., "Roofline", CACM 2009); chapters 4, 7
and 9 for peaks and memory sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from gradflow_ref import _checks

__all__ = ["GPU", "GPUS", "DTYPES", "peak_flops", "ridge_point", "gpu"]

A100_DATASHEET = (
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
H100_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"

# the math each figure is for: tensor-core math except "fp32" and "fp64" (plain CUDA cores)
DTYPES = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8")
# the math the datasheets give a 2:4-sparsity figure for (twice the dense one); none for FP64
_SPARSE = {"tf32", "bf16", "fp16", "fp8"}


@dataclass(frozen=True)
class GPU:
    """One GPU's datasheet figures (SI units: 1 TB/s = 1e12 bytes/s)."""

    name: str  # as the datasheet names the part
    memory_bytes: float  # HBM capacity
    memory_bytes_per_s: float  # HBM bandwidth
    nvlink_bytes_per_s: float  # NVLink, total per GPU (both directions)
    pcie_bytes_per_s: float  # PCIe to the host, total (both directions)
    tflops: dict[str, float] = field(default_factory=dict)  # dense peak TFLOP/s per DTYPES key
    source: str = ""  # the datasheet every figure above is from

    def __post_init__(self) -> None:
        _text("GPU", "name", self.name, nonempty=True)
        for f in ("memory_bytes", "memory_bytes_per_s", "nvlink_bytes_per_s", "pcie_bytes_per_s"):
            _checks.bounded("GPU", f, getattr(self, f), low=0, fix="Copy it from the datasheet.")
        _checks.instance("GPU", "tflops", self.tflops, dict, "Map DTYPES keys to TFLOP/s.")
        for key, value in self.tflops.items():
            _checks.choice("GPU", "tflops", key, DTYPES)
            _checks.bounded("GPU", f"tflops[{key!r}]", value, low=0, fix="Dense TFLOP/s.")
        _text("GPU", "source", self.source)


def _text(func: str, name: str, value, nonempty: bool = False) -> None:
    _checks.instance(func, name, value, str)
    if nonempty and not value:
        raise ValueError(f"{func}: `{name}` must be a non-empty string, got {value!r}.")


# the H100 SXM and H200 SXM datasheets list the same compute (dense halves of the "with
# sparsity" figures); the H200 differs in memory and bandwidth
_HOPPER_SXM_TFLOPS = {
    "fp64": 34.0,
    "fp64_tensor": 67.0,
    "fp32": 67.0,
    "tf32": 494.5,
    "bf16": 989.5,
    "fp16": 989.5,
    "fp8": 1979.0,
}

GPUS: dict[str, GPU] = {
    "A100 80GB SXM": GPU(
        name="A100 80GB SXM",
        memory_bytes=80e9,
        memory_bytes_per_s=2039e9,
        nvlink_bytes_per_s=600e9,
        pcie_bytes_per_s=64e9,
        tflops={
            "fp64": 9.7,
            "fp64_tensor": 19.5,
            "fp32": 19.5,
            "tf32": 156.0,
            "bf16": 312.0,
            "fp16": 312.0,
        },
        source=A100_DATASHEET,
    ),
    "H100 SXM": GPU(
        name="H100 SXM",
        memory_bytes=80e9,
        memory_bytes_per_s=3.35e12,
        nvlink_bytes_per_s=900e9,
        pcie_bytes_per_s=128e9,
        tflops=dict(_HOPPER_SXM_TFLOPS),
        source=H100_DATASHEET,
    ),
    "H200 SXM": GPU(
        name="H200 SXM",
        memory_bytes=141e9,
        memory_bytes_per_s=4.8e12,
        nvlink_bytes_per_s=900e9,
        pcie_bytes_per_s=128e9,
        tflops=dict(_HOPPER_SXM_TFLOPS),
        source=H200_PAGE,
    ),
}


def gpu(name: str) -> GPU:
    """Return the GPU called `name` (a key of GPUS).

    Raises:
        TypeError: `name` is not a string.
        ValueError: `name` is not in GPUS.
    """
    return _card("gpu", name)


def _card(func: str, name) -> GPU:
    if not isinstance(name, str):
        raise TypeError(
            f"{func}: `name` must be a string, got {type(name).__name__} {name!r:.40}; "
            f"pass one of {sorted(GPUS)}."
        )
    if name not in GPUS:
        raise ValueError(f"{func}: `name` must be one of {sorted(GPUS)}, got {name!r}.")
    return GPUS[name]


def _peak(func: str, name, dtype, sparse=False) -> float:
    card = _card(func, name)
    if not isinstance(dtype, str):
        raise TypeError(
            f"{func}: `dtype` must be one of {DTYPES}, got {type(dtype).__name__} {dtype!r:.40}."
        )
    if dtype not in DTYPES:
        raise ValueError(f"{func}: `dtype` must be one of {DTYPES}, got {dtype!r}.")
    if dtype not in card.tflops:
        raise ValueError(
            f"{func}: `dtype` is {dtype!r}, but the {name} datasheet lists no {dtype} figure; "
            f"pick one of {sorted(card.tflops)}."
        )
    # a truthy "no" must not double the peak
    _checks.boolean(func, "sparse", sparse, "True for the 2:4-sparse figure.")
    if sparse and dtype not in _SPARSE:
        raise ValueError(
            f"{func}: the datasheets give 2:4-sparse figures only for {sorted(_SPARSE)}, "
            f"got `sparse` with {dtype!r}."
        )
    return card.tflops[dtype] * 1e12 * (2 if sparse else 1)


def peak_flops(name: str, dtype: str, sparse: bool = False) -> float:
    """Return the datasheet peak in FLOP/s for `dtype` math on GPU `name`.

    Args:
        name: a key of GPUS.
        dtype: one of DTYPES.
        sparse: the 2:4 structured-sparsity figure (twice the dense one; TF32, BF16, FP16, FP8).

    Raises:
        ValueError: unknown `dtype`, a dtype the GPU has no figure for (the A100 has no FP8),
            or `sparse` for math without tensor cores.

    Example:
        >>> peak_flops("A100 80GB SXM", "bf16") / 1e12
        312.0
    """
    return _peak("peak_flops", name, dtype, sparse)


def ridge_point(name: str, dtype: str) -> float:
    """Return the FLOP per byte of HBM traffic above which `dtype` math is compute-bound.

    The ridge point of the roofline: dense peak FLOP/s divided by HBM bytes/s.

    Example:
        >>> round(ridge_point("A100 80GB SXM", "bf16"))
        153
    """
    return _peak("ridge_point", name, dtype) / GPUS[name].memory_bytes_per_s


# ---------------------------------------------------------------------------------------------
# On-chip memory hierarchy (Chapter 5b, docs/hardware.md). Separate from the datasheet cards
# above: these sizes come from NVIDIA's architecture articles, which use binary units
# (KB = 1024 bytes, MB = 1024 KB). Of on-chip bandwidths, the Ampere article gives the A100's L2
# read bandwidth in bytes per clock; the SRAM figure is the FlashAttention paper's estimate,
# labelled as such. None = not given by the sources cited here.
# ---------------------------------------------------------------------------------------------

AMPERE_ARTICLE = "https://developer.nvidia.com/blog/nvidia-ampere-architecture-in-depth/"
HOPPER_ARTICLE = "https://developer.nvidia.com/blog/nvidia-hopper-architecture-in-depth/"
FLASHATTENTION_PAPER = "https://arxiv.org/abs/2205.14135"

__all__ += ["OnChip", "ON_CHIP", "on_chip"]


@dataclass(frozen=True)
class OnChip:
    """One GPU's on-chip memory sizes as NVIDIA's architecture article gives them."""

    sms: int  # streaming multiprocessors enabled on this product
    register_kib_per_sm: int  # register file per SM
    l1_shared_kib_per_sm: int  # combined L1 data cache and shared memory per SM
    shared_max_kib_per_sm: int  # the most of it a kernel can configure as shared memory
    l2_mib: int  # L2 cache, whole GPU
    source: str  # the article every size above is from
    l2_bytes_per_clock: int | None = None  # L2 read bandwidth, whole GPU, if the article gives it
    boost_clock_mhz: int | None = None  # the GPU boost clock the article lists for the part
    sram_bytes_per_s: float | None = None  # aggregate shared-memory bandwidth, if published
    sram_bandwidth_source: str = ""  # where that figure is from (an estimate, not NVIDIA's)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "str":
                _text("OnChip", f.name, value)
            elif f.name == "sram_bytes_per_s":
                if value is not None:
                    _checks.bounded("OnChip", f.name, value, low=0, fix="Or None.")
            elif value is not None or f.default is not None:
                _checks.count("OnChip", f.name, value, fix="Copy it from the article.")

    @property
    def sram_kib(self) -> int:
        """L1/shared memory summed over all SMs."""
        return self.sms * self.l1_shared_kib_per_sm

    @property
    def l2_bytes_per_s(self) -> float | None:
        """L2 read bandwidth in bytes/s at the boost clock, or None where none is given."""
        if self.l2_bytes_per_clock is None or self.boost_clock_mhz is None:
            return None
        return self.l2_bytes_per_clock * self.boost_clock_mhz * 1e6


ON_CHIP: dict[str, OnChip | None] = {
    "A100 80GB SXM": OnChip(
        sms=108,
        register_kib_per_sm=256,
        l1_shared_kib_per_sm=192,
        shared_max_kib_per_sm=164,
        l2_mib=40,
        source=AMPERE_ARTICLE,
        # the article's table: "L2 Cache Read Bandwidth ... 5120 Bytes/clk" and a 1410 MHz boost
        l2_bytes_per_clock=5120,
        boost_clock_mhz=1410,
        # FlashAttention, section 2.1: "bandwidth estimated around 19TB/s" for A100 SRAM
        sram_bytes_per_s=19e12,
        sram_bandwidth_source=FLASHATTENTION_PAPER,
    ),
    "H100 SXM": OnChip(
        sms=132,
        register_kib_per_sm=256,
        l1_shared_kib_per_sm=256,
        shared_max_kib_per_sm=228,
        l2_mib=50,
        source=HOPPER_ARTICLE,
    ),
    # NVIDIA's H200 page lists HBM capacity and bandwidth but no SM count or on-chip sizes
    "H200 SXM": None,
}


def on_chip(name: str) -> OnChip | None:
    """Return GPU `name`'s on-chip sizes, or None where NVIDIA publishes none.

    Raises:
        TypeError, ValueError: as gpu() for a bad `name`.
    """
    _card("on_chip", name)
    return ON_CHIP[name]
