"""Input checks shared by gradflow_ref's modules: each error names the function, the argument,
the value and the fix (TypeError for a wrong type, ValueError for a wrong value)."""

import math

import torch
from torch import nn


def integer(func: str, name: str, value, low: int = 1, fix: str = "") -> int:
    """Return `value` if it is an int >= `low` (bools refused), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{func}: `{name}` must be an int, got {type(value).__name__} {value!r}.{_fix(fix)}"
        )
    if value < low:
        raise ValueError(f"{func}: `{name}` must be an integer >= {low}, got {value!r}.{_fix(fix)}")
    return value


def real(func: str, name: str, value, low=None, high=None, fix: str = "", strict=True) -> float:
    """Return `value` as a float if it is a finite number in (low, high), else raise.

    `strict` False makes the bounds inclusive; None for a bound means unbounded on that side.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{func}: `{name}` must be a number, got {type(value).__name__} {value!r}.{_fix(fix)}"
        )
    value = float(value)
    above = low is None or (value > low if strict else value >= low)
    below = high is None or (value < high if strict else value <= high)
    if not (math.isfinite(value) and above and below):
        lo, hi = ("(", ")") if strict else ("[", "]")
        span = f"in {lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}"
        if low == 0 and strict and high is None:
            span = "positive"
        raise ValueError(f"{func}: `{name}` must be {span} and finite, got {value!r}.{_fix(fix)}")
    return value


def instance(func: str, name: str, value, cls, fix: str = ""):
    """Return `value` if it is an instance of `cls`, else raise TypeError."""
    if not isinstance(value, cls):
        want = " or ".join(c.__name__ for c in cls) if isinstance(cls, tuple) else cls.__name__
        raise TypeError(
            f"{func}: `{name}` must be a {want}, got {type(value).__name__}.{_fix(fix)}"
        )
    return value


def model_input(func: str, name: str, model: nn.Module, x) -> torch.Tensor:
    """Check a batch `x` against the first layer of `model` before it runs deep inside torch.

    A float batch must have rows and the first Linear's width; integer token ids must lie
    within the first Embedding's vocabulary.
    """
    instance(func, name, x, torch.Tensor)
    if x.dim() == 0 or x.shape[0] == 0:
        raise ValueError(
            f"{func}: `{name}` must hold at least one row, got shape {tuple(x.shape)}; "
            "an empty batch has no mean loss (nan)."
        )
    first = next((m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))), None)
    if isinstance(first, nn.Linear) and x.shape[-1] != first.in_features:
        raise ValueError(
            f"{func}: `{name}` must have {first.in_features} features in its last dimension "
            f"(the first Linear layer's in_features), got shape {tuple(x.shape)}."
        )
    if isinstance(first, nn.Embedding) and x.numel() and not x.is_floating_point():
        low, high = int(x.min()), int(x.max())
        if low < 0 or high >= first.num_embeddings:
            raise ValueError(
                f"{func}: `{name}` holds token ids from {low} to {high}, but the vocabulary "
                f"has {first.num_embeddings} (ids 0 to {first.num_embeddings - 1}); "
                "check the tokenizer against the model's vocabulary size."
            )
    return x


def _fix(fix: str) -> str:
    return f" {fix}" if fix else ""
