"""A small byte-level GPT whose stability switches can be flipped: norm placement, QK-norm, init.

Taught in docs/transformer.md (and trained to failure in docs/diagnosis.md). Pre-LN is GPT-2's
layer (Radford et al. 2019), post-LN the original Transformer's (Vaswani et al. 2017, analysed by
Xiong et al. 2020, arXiv:2002.04745); QK-norm normalises each head's queries and keys before
their dot product (Dehghani et al. 2023, arXiv:2302.05442; Wortsman et al. 2023, arXiv:2309.14322).
"""

import math
from dataclasses import dataclass
from importlib.resources import files

import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref import _checks

__all__ = ["TransformerConfig", "Transformer", "shakespeare", "get_batch"]


@dataclass
class TransformerConfig:
    vocab: int = 256  # one token per byte
    seq_len: int = 32  # longest input, in tokens
    hidden: int = 32  # width of the residual stream
    n_heads: int = 2  # attention heads (hidden must divide by it)
    n_layers: int = 2  # blocks
    norm: str = "pre"  # "pre": x + f(LN(x)), GPT-2; "post": LN(x + f(x)), the original Transformer
    qk_norm: bool = False  # LayerNorm on each head's queries and keys before q.k
    depth_init: bool = True  # residual projections start at std 0.02 / sqrt(2 * n_layers) (GPT-2)

    def __post_init__(self) -> None:
        for name in ("vocab", "seq_len", "hidden", "n_heads", "n_layers"):
            _checks.integer("TransformerConfig", name, getattr(self, name))
        _checks.choice("TransformerConfig", "norm", self.norm, ("pre", "post"))
        _checks.boolean("TransformerConfig", "qk_norm", self.qk_norm)
        _checks.boolean("TransformerConfig", "depth_init", self.depth_init)
        if self.hidden % self.n_heads:
            raise ValueError(
                f"TransformerConfig: `hidden` ({self.hidden}) must be a multiple of `n_heads` "
                f"({self.n_heads}); pick n_heads among the divisors of hidden."
            )


class _Attention(nn.Module):
    """Causal self-attention; keeps its last forward's largest logit and mean entropy."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        h, self.n_heads = cfg.hidden, cfg.n_heads
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        d = h // cfg.n_heads
        self.q_norm = nn.LayerNorm(d) if cfg.qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(d) if cfg.qk_norm else nn.Identity()
        self.max_logit = torch.tensor(float("nan"))  # largest pre-softmax logit, last forward
        self.entropy = torch.tensor(float("nan"))  # mean attention entropy in nats, last forward

    def forward(self, x):  # x: (b, s, h)
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.n_heads, -1).transpose(1, 2) for t in self.qkv(x).split(h, -1))
        q, k = self.q_norm(q), self.k_norm(k)  # (b, a, s, d)
        logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, a, s, s)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        logits = logits.masked_fill(~causal, float("-inf"))
        p = logits.softmax(-1)
        with torch.no_grad():
            self.max_logit = logits.amax().float()
            self.entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean().float()
        return self.proj((p @ v).transpose(1, 2).reshape(b, s, h))


class _Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        h, self.pre = cfg.hidden, cfg.norm == "pre"
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.attn = _Attention(cfg)
        self.mlp = nn.Sequential(nn.Linear(h, 4 * h), nn.GELU(), nn.Linear(4 * h, h))

    def forward(self, x):
        if self.pre:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Transformer(nn.Module):
    """A GPT of `cfg`'s shape: token and position embeddings, `n_layers` blocks, tied output head.

    `forward(idx)` returns FP32 logits of shape (batch, tokens, vocab). `blocks[i].attn.max_logit`
    and `.entropy` hold the last forward's largest attention logit and mean attention entropy.

    Example:
        >>> model = Transformer(TransformerConfig(n_layers=4, norm="post"))
        >>> x, y = get_batch(shakespeare(), 8, 32, torch.Generator().manual_seed(0))
        >>> loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    """

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        _checks.instance("Transformer", "cfg", cfg, TransformerConfig)
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.hidden) if cfg.norm == "pre" else nn.Identity()
        residual_std = 0.02 / math.sqrt(2 * cfg.n_layers) if cfg.depth_init else 0.02
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:  # GPT-2's init; the two projections into the residual stream scaled
                residual = name.endswith(("attn.proj.weight", "mlp.2.weight"))
                nn.init.normal_(p, std=residual_std if residual else 0.02)

    def forward(self, idx):  # idx: (b, s) int64 -> (b, s, vocab) FP32
        _checks.model_input("Transformer", "idx", self, idx)
        if idx.dim() != 2 or idx.is_floating_point() or idx.shape[1] > self.cfg.seq_len:
            raise ValueError(
                f"Transformer: `idx` must be (batch, tokens) integer ids with at most "
                f"{self.cfg.seq_len} tokens (cfg.seq_len), got {idx.dtype} of shape "
                f"{tuple(idx.shape)}."
            )
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight).float()


def shakespeare() -> torch.Tensor:
    """Return the Shakespeare text shipped in the package as int64 byte values (one per token)."""
    text = (files("gradflow_ref") / "data" / "shakespeare.txt").read_bytes()
    return torch.frombuffer(bytearray(text), dtype=torch.uint8).long()


def get_batch(data: torch.Tensor, batch: int, seq_len: int, generator: torch.Generator):
    """Return `batch` random windows of `data` as inputs and next-token targets, (batch, seq_len).

    Args:
        data: 1-D int64 tokens, longer than `seq_len`.
        batch: windows to draw.
        seq_len: tokens per window.
        generator: the CPU generator that picks the windows (seed it for a repeatable run).
    """
    _checks.instance("get_batch", "data", data, torch.Tensor)
    batch = _checks.integer("get_batch", "batch", batch)
    seq_len = _checks.integer("get_batch", "seq_len", seq_len)
    _checks.instance("get_batch", "generator", generator, torch.Generator)
    if data.dim() != 1 or data.is_floating_point() or len(data) <= seq_len:
        raise ValueError(
            f"get_batch: `data` must be 1-D integer tokens longer than seq_len ({seq_len}), got "
            f"{data.dtype} of shape {tuple(data.shape)}."
        )
    start = torch.randint(len(data) - seq_len, (batch,), generator=generator)
    window = start[:, None] + torch.arange(seq_len + 1)
    tokens = data[window]
    return tokens[:, :-1], tokens[:, 1:]
