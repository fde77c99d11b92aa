"""Training-memory calculator: weights, master weights, gradients, optimizer states, activations.

Taught in docs/memory.md. Activations follow Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models" (arXiv:2205.05198): sbh(34 + 5as/h) bytes per layer
for 16-bit activations with dropout. `GPT` is the layer layout that formula counts, small enough
to measure on a CPU.
"""

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref import _checks

__all__ = [
    "MemoryConfig",
    "MemoryBreakdown",
    "parameter_count",
    "layer_activation_bytes",
    "activation_bytes",
    "training_memory",
    "GPT",
]

_STATES = {"adamw": 2, "adam": 2, "sgd_momentum": 1, "sgd": 0}
# the largest GPT(cfg) builds (a Python loop over layers; embeddings of vocab and seq_len rows)
_GPT_SIZES = {"n_layers": 10_000, "hidden": 65_536, "vocab": 2**24, "seq_len": 2**20}
_CHECKPOINTING = ("none", "selective", "full")


@dataclass
class MemoryConfig:
    n_layers: int = 12  # transformer layers, L
    hidden: int = 768  # hidden size, h
    n_heads: int = 12  # attention heads, a
    seq_len: int = 1024  # sequence length, s
    micro_batch: int = 1  # sequences per micro-batch, b
    vocab: int = 50257  # vocabulary size, v
    n_params: int | None = None  # parameter count; None derives it from the shape (GPT layout)
    # the default layout is torch.autocast's: FP32 parameters, which are the master weights
    # (autocast casts them to BF16 inside each matmul), and FP32 gradients
    param_dtype: torch.dtype = torch.float32  # parameters the optimizer updates
    master_dtype: torch.dtype | None = None  # a separate master copy (Trainer's: FP32); None: none
    grad_dtype: torch.dtype = torch.float32  # gradients
    optimizer: str = "adamw"  # "adamw"/"adam" (2 states), "sgd_momentum" (1), "sgd" (0)
    state_dtype: torch.dtype = torch.float32  # optimizer states
    activation_dtype: torch.dtype = torch.bfloat16  # activations saved for backward (2 bytes
    # counts what a BF16 model keeps; under autocast some ops keep FP32 outputs, so more)
    dropout: bool = True  # dropout layers present: their masks and outputs are stored
    mask_bytes: int = 1  # per dropout-mask element: 1 = CUDA's bool mask; CPU keeps the dtype's
    stores_scores: bool = True  # attention keeps its a*s*s scores (False: fused/flash attention)
    checkpointing: str = "none"  # "none", "selective" (recompute attention core), "full"

    def __post_init__(self) -> None:
        _check(self)  # at once, so a bad shape never reaches GPT(cfg) or a rank of measure_fsdp2


@dataclass
class MemoryBreakdown:
    weights: int  # bytes, parameters in param_dtype
    master_weights: int  # bytes, master copy (0 without one)
    gradients: int  # bytes
    optimizer_states: int  # bytes
    activations: int  # bytes, peak held for backward under the config's checkpointing

    def __post_init__(self) -> None:
        for f in fields(self):
            _checks.integer("MemoryBreakdown", f.name, getattr(self, f.name), low=0)

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"total": self.total}


def _check(cfg, func: str = "MemoryConfig"):
    _checks.instance(
        func, "cfg", cfg, MemoryConfig, "Pass MemoryConfig(...) with the model's shape."
    )
    for name in ("n_layers", "hidden", "n_heads", "seq_len", "micro_batch", "vocab", "mask_bytes"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"MemoryConfig: `{name}` must be an int, got {value!r}.")
        if value < 1:
            raise ValueError(f"MemoryConfig: `{name}` must be a positive int, got {value!r}.")
    if cfg.hidden % cfg.n_heads:
        raise ValueError(
            f"MemoryConfig: `hidden` ({cfg.hidden}) must be divisible by `n_heads` "
            f"({cfg.n_heads}); pick a head count that divides it."
        )
    if cfg.optimizer not in _STATES:
        raise ValueError(
            f"MemoryConfig: `optimizer` must be one of {sorted(_STATES)}, got {cfg.optimizer!r}."
        )
    if cfg.checkpointing not in _CHECKPOINTING:
        raise ValueError(
            f"MemoryConfig: `checkpointing` must be one of {_CHECKPOINTING}, "
            f"got {cfg.checkpointing!r}."
        )
    for name in ("param_dtype", "grad_dtype", "state_dtype", "activation_dtype", "master_dtype"):
        value = getattr(cfg, name)
        if not (name == "master_dtype" and value is None):
            _checks.dtype("MemoryConfig", name, value, fix="E.g. torch.bfloat16 or torch.float32.")
    if cfg.n_params is not None:
        _checks.integer("MemoryConfig", "n_params", cfg.n_params, fix="Or None to derive it.")
    # an int, not a probability: the probability is GPT's `dropout` (0.1 would count as off)
    fix = "It says whether dropout layers exist; their probability goes to GPT(cfg, dropout=...)."
    _checks.boolean("MemoryConfig", "dropout", cfg.dropout, fix)
    _checks.boolean("MemoryConfig", "stores_scores", cfg.stores_scores, "False: flash attention.")


def parameter_count(cfg: MemoryConfig) -> int:
    """Return `cfg.n_params`, or the GPT layout's count: L(12h^2 + 13h) + vh + sh + 2h.

    Per layer: QKV 3h^2+3h, output projection h^2+h, MLP 8h^2+5h, two LayerNorms 4h. Plus token
    and learned position embeddings (the output head shares the token embedding) and a final
    LayerNorm.
    """
    _check(cfg, "parameter_count")
    if cfg.n_params is not None:
        return cfg.n_params
    h = cfg.hidden
    return cfg.n_layers * (12 * h * h + 13 * h) + cfg.vocab * h + cfg.seq_len * h + 2 * h


def layer_activation_bytes(cfg: MemoryConfig, stores_scores: bool | None = None) -> int:
    """Return the bytes one layer saves for backward (Korthikanti et al. 2022, section 4.1).

    Stored values, in elements: attention 5sbh (LayerNorm output, Q, K, V, projection input)
    plus as^2b softmax output (and as^2b dropout output), MLP 9sbh, LayerNorm inputs 2sbh; each
    dropout keeps a mask of `mask_bytes` per element. At 2 bytes with 1-byte masks and dropout:
    sbh(34 + 5as/h).
    """
    _check(cfg, "layer_activation_bytes")
    if stores_scores is not None:
        _checks.boolean("layer_activation_bytes", "stores_scores", stores_scores, "Or None.")
    s, b, h, a = cfg.seq_len, cfg.micro_batch, cfg.hidden, cfg.n_heads
    scores = cfg.stores_scores if stores_scores is None else stores_scores
    drop = int(cfg.dropout)
    sbh, ass = s * b * h, a * s * s * b * int(scores)
    values = 16 * sbh + (1 + drop) * ass
    masks = drop * (2 * sbh + ass)
    return values * cfg.activation_dtype.itemsize + masks * cfg.mask_bytes


def activation_bytes(cfg: MemoryConfig, checkpointing: str | None = None) -> int:
    """Return the peak activation bytes of one micro-batch: L layers plus embedding and head.

    "none": every layer's activations. "selective": the attention core (softmax, dropout,
    scores times V) is recomputed, leaving sbh*34 at 16 bits. "full": only each layer's input
    (sbh values) is kept, plus one layer's full activations while it is recomputed. Outside the
    layers: the embedding dropout mask (sbh), final LayerNorm and head inputs (2sbh values) and
    the FP32 log-probabilities of the loss (4sbv bytes).
    """
    _check(cfg, "activation_bytes")
    mode = cfg.checkpointing if checkpointing is None else checkpointing
    if mode not in _CHECKPOINTING:
        raise ValueError(
            f"activation_bytes: `checkpointing` must be one of {_CHECKPOINTING}, got {mode!r}."
        )
    sb, h, item = cfg.seq_len * cfg.micro_batch, cfg.hidden, cfg.activation_dtype.itemsize
    outside = int(cfg.dropout) * sb * h * cfg.mask_bytes + 2 * sb * h * item + 4 * sb * cfg.vocab
    if mode == "none":
        layers = cfg.n_layers * layer_activation_bytes(cfg)
    elif mode == "selective":
        layers = cfg.n_layers * layer_activation_bytes(cfg, stores_scores=False)
    else:
        layers = cfg.n_layers * sb * h * item + layer_activation_bytes(cfg)
    return layers + outside


def training_memory(cfg: MemoryConfig) -> MemoryBreakdown:
    """Return the training memory of one data-parallel rank, component by component, in bytes.

    Args:
        cfg: the model shape, micro-batch, precisions, optimizer and checkpointing mode.

    Returns:
        A MemoryBreakdown (weights, master_weights, gradients, optimizer_states, activations).

    Raises:
        ValueError: a non-positive size, heads not dividing hidden, or an unknown option.

    Example:
        >>> m = training_memory(MemoryConfig(n_params=7_000_000_000))
        >>> (m.weights + m.master_weights + m.gradients + m.optimizer_states) / 7e9
        16.0
    """
    _check(cfg, "training_memory")
    p = parameter_count(cfg)
    master = p * cfg.master_dtype.itemsize if cfg.master_dtype is not None else 0
    return MemoryBreakdown(
        weights=p * cfg.param_dtype.itemsize,
        master_weights=master,
        gradients=p * cfg.grad_dtype.itemsize,
        optimizer_states=p * _STATES[cfg.optimizer] * cfg.state_dtype.itemsize,
        activations=activation_bytes(cfg),
    )


class _Block(nn.Module):
    """Pre-LayerNorm GPT layer laid out as Korthikanti et al. count it."""

    def __init__(self, cfg: MemoryConfig, p: float):
        super().__init__()
        h = cfg.hidden
        self.n_heads, self.p = cfg.n_heads, p
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def _drop(self, x):
        return F.dropout(x, self.p, self.training) if self.p > 0 else x

    def forward(self, x):  # x: (b, s, h)
        b, s, h = x.shape
        heads = (b, s, self.n_heads, h // self.n_heads)
        qkv = self.qkv(self.ln1(x)).split(h, -1)
        q, k, v = (t.view(heads).transpose(1, 2).contiguous() for t in qkv)  # (b, a, s, d) each
        mask = torch.full((s, s), float("-inf"), device=x.device, dtype=x.dtype).triu(1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(h // self.n_heads)) + mask
        y = self._drop(att.softmax(-1)) @ v  # (b, a, s, d)
        x = x + self._drop(self.proj(y.transpose(1, 2).reshape(b, s, h)))
        return x + self._drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class GPT(nn.Module):
    """A GPT with `cfg`'s shape and exactly `parameter_count(cfg)` parameters (n_params unset).

    `layers` is an nn.Sequential of blocks, so `checkpoint_sequential` applies to it.
    """

    def __init__(self, cfg: MemoryConfig, dropout: float = 0.1):
        super().__init__()
        _check(cfg, "GPT")
        for name, high in _GPT_SIZES.items():  # before any layer is built
            fix = "GPT builds every layer of this size in memory; the calculator counts any size."
            _checks.count("GPT", f"cfg.{name}", getattr(cfg, name), high=high, fix=fix)
        dropout = _checks.bounded("GPT", "dropout", dropout, low=0.0, high=1.0, strict=False)
        self.vocab, self.seq_len = cfg.vocab, cfg.seq_len
        self.p = dropout if cfg.dropout else 0.0
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.layers = nn.Sequential(*[_Block(cfg, self.p) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.hidden)

    def embed(self, idx):  # idx: (b, s) int64 -> (b, s, h)
        _checks.model_input("GPT", "idx", self, idx)
        if idx.dim() != 2 or idx.is_floating_point() or idx.shape[1] > self.seq_len:
            raise ValueError(
                f"GPT: `idx` must be (batch, tokens) integer token ids with at most "
                f"{self.seq_len} tokens (cfg.seq_len), got {idx.dtype} of shape {tuple(idx.shape)}."
            )
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return F.dropout(x, self.p, self.training) if self.p > 0 else x

    def head(self, x, targets):  # x: (b, s, h) -> FP32 mean cross-entropy
        _checks.instance("GPT", "targets", targets, torch.Tensor)
        if targets.dtype != torch.long:
            raise TypeError(
                f"GPT: `targets` must be torch.long token ids, got {targets.dtype} of shape "
                f"{tuple(targets.shape)}; the loss takes the next token's id, not scores."
            )
        if targets.shape != x.shape[:2]:
            raise ValueError(
                f"GPT: `targets` must hold one token id per input token, shape "
                f"{tuple(x.shape[:2])}, got shape {tuple(targets.shape)}."
            )
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= self.vocab):
            raise ValueError(
                f"GPT: `targets` holds token ids from {int(targets.min())} to "
                f"{int(targets.max())}, but the vocabulary has {self.vocab} (ids 0 to "
                f"{self.vocab - 1}); check the targets against cfg.vocab."
            )
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def forward(self, idx, targets):
        return self.head(self.layers(self.embed(idx)), targets)
