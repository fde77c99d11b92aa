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
    try:
        value = float(value)
    except OverflowError:  # an int beyond float range
        raise ValueError(
            f"{func}: `{name}` must be a finite number, got an int of {value.bit_length()} bits, "
            f"beyond float range.{_fix(fix)}"
        ) from None
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


# ---- checks added for precision, fp8, pipeline, sharding, flow and checkpointing


def number(func: str, name: str, value, fix: str = "") -> float:
    """Return `value` as a float if it is an int or float (inf and NaN allowed), else raise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{func}: `{name}` must be a real number (int or float), got "
            f"{type(value).__name__} {value!r:.60}.{_fix(fix)}"
        )
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"{func}: `{name}` is too large for a float64, got an int of "
            f"{value.bit_length()} bits.{_fix(fix)}"
        ) from None


def boolean(func: str, name: str, value, fix: str = "") -> bool:
    """Return `value` if it is True or False, else raise TypeError."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{func}: `{name}` must be True or False, got {type(value).__name__} {value!r:.60}."
            f"{_fix(fix)}"
        )
    return value


def choice(func: str, name: str, value, options, fix: str = ""):
    """Return `value` if it is one of `options` (bools never match ints), else raise ValueError."""
    # identity or equality of the same type: a tensor or a bool never compares as an option
    found = any(value is o or (type(value) is type(o) and value == o) for o in options)
    if not found:
        listed = ", ".join(repr(o) for o in options)
        raise ValueError(f"{func}: `{name}` must be one of {listed}, got {value!r:.60}.{_fix(fix)}")
    return value


def callable_(func: str, name: str, value, fix: str = ""):
    """Return `value` if it is callable, else raise TypeError."""
    if not callable(value):
        raise TypeError(
            f"{func}: `{name}` must be callable, got {type(value).__name__} {value!r:.60}."
            f"{_fix(fix)}"
        )
    return value


def tensor(
    func: str,
    name: str,
    value,
    *,
    floating: bool = False,
    nonempty: bool = False,
    finite: bool = False,
    dim: int | None = None,
    fix: str = "",
) -> torch.Tensor:
    """Return `value` if it is a tensor with the asked properties, else raise.

    TypeError for a non-tensor or a non-floating dtype; ValueError for the wrong number of
    dimensions, no elements, or an inf/NaN element.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{func}: `{name}` must be a torch.Tensor, got {type(value).__name__}.{_fix(fix)}"
        )
    if floating and not value.is_floating_point():
        raise TypeError(
            f"{func}: `{name}` must be a floating-point tensor, got dtype {value.dtype}; "
            f"convert it with .float().{_fix(fix)}"
        )
    if dim is not None and value.dim() != dim:
        raise ValueError(
            f"{func}: `{name}` must have {dim} dimension{'s' * (dim != 1)}, got shape "
            f"{tuple(value.shape)}.{_fix(fix)}"
        )
    if nonempty and value.numel() == 0:
        raise ValueError(
            f"{func}: `{name}` must hold at least one element, got shape {tuple(value.shape)}."
            f"{_fix(fix)}"
        )
    if finite and value.is_floating_point() and not bool(torch.isfinite(value).all()):
        bad = value[~torch.isfinite(value)].reshape(-1)[0].item()
        raise ValueError(f"{func}: `{name}` must be finite, got a tensor holding {bad}.{_fix(fix)}")
    return value


def same_shape(func: str, name: str, value: torch.Tensor, other_name: str, other) -> None:
    """Raise ValueError unless tensors `value` and `other` have one shape (no broadcasting)."""
    if value.shape != other.shape:
        raise ValueError(
            f"{func}: `{name}` and `{other_name}` must have the same shape, got "
            f"{tuple(value.shape)} and {tuple(other.shape)}; they are compared element by "
            "element, never broadcast."
        )


def dtype(func: str, name: str, value, floating: bool = True, fix: str = "") -> torch.dtype:
    """Return `value` if it is a torch.dtype (a floating one when `floating`), else raise."""
    if not isinstance(value, torch.dtype):
        raise TypeError(
            f"{func}: `{name}` must be a torch.dtype such as torch.float32, got "
            f"{type(value).__name__} {value!r:.60}.{_fix(fix)}"
        )
    if floating and not value.is_floating_point:
        raise ValueError(
            f"{func}: `{name}` must be a floating-point dtype (parameters need gradients), "
            f"got {value}.{_fix(fix)}"
        )
    return value


def device(func: str, name: str, value, fix: str = ""):
    """Return `value` if it names a device torch knows and this machine has, else raise.

    None passes through (the caller's default device).
    """
    if value is None:
        return value
    if not isinstance(value, (str, torch.device)):
        raise TypeError(
            f"{func}: `{name}` must be a str or torch.device such as 'cpu' or 'cuda', got "
            f"{type(value).__name__} {value!r:.60}.{_fix(fix)}"
        )
    try:
        dev = torch.device(value)
    except RuntimeError:
        raise ValueError(
            f"{func}: `{name}` must name a device such as 'cpu' or 'cuda:0', got {value!r}."
            f"{_fix(fix)}"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"{func}: `{name}` is {value!r}, but this machine has no CUDA device; pass 'cpu'."
            f"{_fix(fix)}"
        )
    return value


def pair(func: str, name: str, value, fix: str = "") -> tuple:
    """Return `value` as a tuple if it is a tuple or list of two items, else raise TypeError."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise TypeError(
            f"{func}: `{name}` must be a pair (a tuple of two), got {type(value).__name__} "
            f"{value!r:.60}.{_fix(fix)}"
        )
    return tuple(value)


# Appended for issue 35 item 6: the checks the training-step, hardware and rank modules share.

INT64_MAX = 2**63 - 1  # the largest size torch can index, and the largest seed manual_seed takes


def _show(value) -> str:
    """`value` as an error message shows it: an int too long to read is given by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**20:
        return f"an int of {value.bit_length()} bits"
    return repr(value)


def bounded(func: str, name: str, value, low=None, high=None, fix: str = "", strict=True) -> float:
    """As `real`, with `number`'s ValueError (not a bare OverflowError) for an int beyond float."""
    number(func, name, value, fix)
    return real(func, name, value, low, high, fix, strict)


def count(func: str, name: str, value, low: int = 1, high: int = INT64_MAX, fix: str = "") -> int:
    """As `integer`, with an upper bound `high` (torch's int64 sizes unless a tighter one holds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        integer(func, name, value, low, fix)  # raises the TypeError
    if not low <= value <= high:
        raise ValueError(
            f"{func}: `{name}` must be an integer from {low} to {high}, got {_show(value)}."
            f"{_fix(fix)}"
        )
    return value


def float_batch(func: str, name: str, model: nn.Module, x, finite: bool = True) -> torch.Tensor:
    """As `model_input`, and a batch for a first Linear layer is finite floats of its dtype."""
    model_input(func, name, model, x)
    first = next((m for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))), None)
    if isinstance(first, nn.Linear):
        want = first.weight.dtype
        if x.dtype != want:
            raise TypeError(
                f"{func}: `{name}` must be {want} like the model's first Linear layer, got "
                f"{x.dtype} of shape {tuple(x.shape)}; convert it with x.to({want})."
            )
        if finite and not torch.isfinite(x).all():
            raise ValueError(
                f"{func}: `{name}` holds nan or inf (shape {tuple(x.shape)}), so every loss and "
                "gradient would be nan; find where the batch went bad."
            )
    return x


def class_targets(func: str, name: str, y, n_classes: int, rows: int | None = None):
    """Check class-id targets `y`: torch.long ids in 0..n_classes-1, one per row if `rows`."""
    instance(func, name, y, torch.Tensor, "Pass class ids as a torch.long tensor.")
    if y.dtype not in (torch.long, torch.uint8):
        raise TypeError(
            f"{func}: `{name}` must hold class ids as torch.long, got {y.dtype} of shape "
            f"{tuple(y.shape)}; cross-entropy takes class indices (y.long()), not scores."
        )
    if rows is not None and (y.dim() != 1 or len(y) != rows):
        raise ValueError(
            f"{func}: `{name}` must hold one class id per row ({rows}), got shape {tuple(y.shape)}."
        )
    if y.numel():
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= n_classes:
            raise ValueError(
                f"{func}: `{name}` holds class ids from {low} to {high}, but the output has "
                f"{n_classes} classes (ids 0 to {n_classes - 1}); check the labels against "
                "the model's last layer."
            )
    return y


def out_classes(model: nn.Module) -> int | None:
    """The output width of `model`'s last Linear layer (its classes), or None without one."""
    last = None
    for m in model.modules():
        if isinstance(m, nn.Linear):
            last = m
    return None if last is None else last.out_features
