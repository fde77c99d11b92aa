"""Roofline bounds: how long a matmul or an attention pass takes at best on a GPU.

A kernel needs at least FLOPs / peak FLOP/s of arithmetic and bytes / bandwidth of HBM traffic;
the larger of the two bounds its time (Williams et al., "Roofline", CACM 2009). The attention IO
counts follow Algorithm 0 and Algorithm 1 of FlashAttention (Dao et al. 2022, arXiv:2205.14135,
Theorem 2). Chapter 5b (docs/hardware.md) teaches it; figures come from gradflow_ref.hardware.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gradflow_ref import _checks
from gradflow_ref.hardware import _peak, gpu

__all__ = [
    "Matmul",
    "Bound",
    "matmul_bound",
    "attention_hbm_bytes",
    "flash_attention_hbm_bytes",
    "training_days",
    "peak_tensor_bytes",
]


@dataclass(frozen=True)
class Matmul:
    """A matmul C[M, N] = A[M, K] @ B[K, N], each matrix read or written once from HBM."""

    m: int  # rows of A and C (tokens in a batch, for a linear layer)
    n: int  # columns of B and C (output features)
    k: int  # columns of A, rows of B (input features)
    dtype_bytes: int = 2  # bytes per element of A, B and C (2 for BF16/FP16, 1 for FP8)

    def __post_init__(self):
        for name in ("m", "n", "k", "dtype_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Matmul: `{name}` must be an int, got {type(value).__name__}.")
            if value < 1:
                raise ValueError(f"Matmul: `{name}` must be at least 1, got {value}.")
        if self.flops > 1e300:  # bounds divide FLOPs and bytes by floats: keep them finite
            raise ValueError(
                f"Matmul: `m`, `n` and `k` must keep 2 * m * n * k within float range, got "
                f"{_checks._show(self.flops)} FLOPs; no GPU bound applies at that size."
            )

    @property
    def flops(self) -> int:
        """2 M N K: one multiply and one add per term of every dot product."""
        return 2 * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        """Read A and B once, write C once: (M K + K N + M N) elements."""
        return (self.m * self.k + self.k * self.n + self.m * self.n) * self.dtype_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte of HBM traffic."""
        return self.flops / self.bytes


@dataclass(frozen=True)
class Bound:
    """What the roofline allows one kernel on one GPU."""

    intensity: float  # FLOP per HBM byte
    ridge: float  # FLOP per byte where the two roofs meet (peak / bandwidth)
    attainable_flops: float  # min(peak, bandwidth * intensity), FLOP/s
    compute_s: float  # FLOPs / peak
    memory_s: float  # bytes / bandwidth
    time_s: float  # max(compute_s, memory_s): the fastest the kernel can run
    bound: str  # "memory" or "compute"

    def __post_init__(self):
        for f in ("intensity", "ridge", "attainable_flops", "compute_s", "memory_s", "time_s"):
            _checks.bounded("Bound", f, getattr(self, f), low=0, strict=False)
        _checks.choice("Bound", "bound", self.bound, ("memory", "compute"))


def matmul_bound(mm: Matmul, name: str, dtype: str = "bf16", sparse: bool = False) -> Bound:
    """Bound the time of matmul `mm` on GPU `name` by its peak FLOP/s and HBM bandwidth.

    Args:
        mm: the matmul's shape and element size.
        name: a key of gradflow_ref.hardware.GPUS.
        dtype: the math, a key of gradflow_ref.hardware.DTYPES ("bf16", "fp8", ...).
        sparse: use the 2:4-sparse peak (twice the dense one).

    Returns:
        A Bound; `bound` is "memory" when the intensity is below the ridge point.

    Raises:
        TypeError: `mm` is not a Matmul.
        ValueError: from gradflow_ref.hardware for an unknown GPU or dtype.

    Example:
        >>> b = matmul_bound(Matmul(1, 11008, 4096), "H100 SXM", "bf16")
        >>> b.bound
        'memory'
    """
    if not isinstance(mm, Matmul):
        raise TypeError(
            f"matmul_bound: `mm` must be a Matmul, got {type(mm).__name__} {mm!r:.40}; "
            "e.g. Matmul(m=4096, n=4096, k=4096)."
        )
    peak = _peak("matmul_bound", name, dtype, sparse)
    bandwidth = gpu(name).memory_bytes_per_s
    compute_s, memory_s = mm.flops / peak, mm.bytes / bandwidth
    return Bound(
        intensity=mm.intensity,
        ridge=peak / bandwidth,
        attainable_flops=min(peak, bandwidth * mm.intensity),
        compute_s=compute_s,
        memory_s=memory_s,
        time_s=max(compute_s, memory_s),
        bound="memory" if memory_s > compute_s else "compute",
    )


def _check_attention(seq_len, head_dim, dtype_bytes, where):
    for pname, value in (
        ("seq_len", seq_len),
        ("head_dim", head_dim),
        ("dtype_bytes", dtype_bytes),
    ):
        _checks.count(where, pname, value)


def attention_hbm_bytes(seq_len: int, head_dim: int, dtype_bytes: int = 2) -> int:
    """Return the HBM bytes standard attention (Algorithm 0) moves for one head, forward.

    S = Q K^T is written to HBM, read back for P = softmax(S), P written and read again for
    O = P V: reads Q, K (2 N d), writes S (N^2), reads S (N^2), writes P (N^2), reads P and
    V (N^2 + N d), writes O (N d): 4 N d + 4 N^2 elements.

    Raises:
        ValueError: a size that is not a positive int.
    """
    _check_attention(seq_len, head_dim, dtype_bytes, "attention_hbm_bytes")
    n, d = seq_len, head_dim
    return (4 * n * d + 4 * n * n) * dtype_bytes


def flash_attention_hbm_bytes(
    seq_len: int, head_dim: int, sram_bytes: int, dtype_bytes: int = 2
) -> int:
    """Return the HBM bytes FlashAttention (Algorithm 1) moves for one head, forward.

    With M = sram_bytes / dtype_bytes elements of SRAM, K and V are cut into T_c =
    ceil(N / B_c) blocks of B_c = ceil(M / (4 d)) rows, each read once (2 N d). For each of
    them every block of Q, O and the softmax statistics l, m is read and O, l, m written back:
    T_c (3 N d + 4 N) elements; O, l, m start initialised in HBM (N d + 2 N). Of order
    N^2 d^2 / M (Theorem 2).

    Raises:
        ValueError: a size that is not a positive int, or SRAM too small for one row of K
            and V (`sram_bytes` < 4 * head_dim * dtype_bytes).
    """
    _check_attention(seq_len, head_dim, dtype_bytes, "flash_attention_hbm_bytes")
    _checks.count("flash_attention_hbm_bytes", "sram_bytes", sram_bytes, fix="E.g. 100_000.")
    if sram_bytes < 4 * head_dim * dtype_bytes:
        raise ValueError(
            f"flash_attention_hbm_bytes: `sram_bytes` must hold at least 4 * head_dim elements "
            f"({4 * head_dim * dtype_bytes} bytes), got {sram_bytes}; raise it or lower head_dim."
        )
    n, d = seq_len, head_dim
    block_c = -(-(sram_bytes // dtype_bytes) // (4 * d))  # ceil, in ints: no float overflow
    t_c = -(-n // block_c)
    elements = (n * d + 2 * n) + 2 * n * d + t_c * (3 * n * d + 4 * n)
    return elements * dtype_bytes


def training_days(flops: float, name: str, dtype: str = "bf16", mfu: float = 0.4) -> float:
    """Return the days one GPU needs for `flops` at a model-FLOPs utilisation `mfu` of its peak.

    Args:
        flops: the training budget in FLOPs (e.g. 3.14e23 for GPT-3).
        name: a key of gradflow_ref.hardware.GPUS.
        dtype: the math (dense peak).
        mfu: the fraction of the dense peak achieved, in (0, 1].

    Raises:
        ValueError: `flops` not positive and finite, or `mfu` outside (0, 1].
    """
    func = "training_days"
    _checks.bounded(func, "flops", flops, low=0, fix="E.g. 3.14e23 for GPT-3.")
    _checks.bounded(func, "mfu", mfu, low=0, fix="E.g. 0.4.")
    if mfu > 1:
        raise ValueError(f"{func}: `mfu` must be in (0, 1], got {mfu!r}; e.g. 0.4.")
    return flops / (_peak(func, name, dtype) * mfu) / 86400


class _LiveBytes(TorchDispatchMode):
    """Count the bytes of new storages operators return while they are alive."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.alive: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        inputs = {
            t.untyped_storage().data_ptr()
            for t in tree_flatten((args, kwargs or {}))[0]
            if isinstance(t, torch.Tensor)
        }
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size == 0 or key in inputs or key in self.alive:  # a view, or seen already
                continue
            self.alive.add(key)
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, key, size)
        return out

    def _free(self, key, size):
        self.alive.discard(key)
        self.live -= size


def peak_tensor_bytes(fn, *args) -> int:
    """Return the peak bytes of tensors that `fn(*args)` allocates and holds at once.

    Every operator's new output storage is counted from its creation until it is freed; views
    and the inputs are not. Scratch memory an operator allocates and frees inside itself is
    not seen (it never reaches Python), nor is allocator overhead. The result is dropped.

    Raises:
        TypeError: `fn` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"peak_tensor_bytes: `fn` must be callable, got {type(fn).__name__}.")
    with torch.no_grad(), _LiveBytes() as counter:
        fn(*args)
    return counter.peak
