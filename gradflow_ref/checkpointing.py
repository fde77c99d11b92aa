"""Gradient checkpointing: keep a few activations, recompute the rest during backward.

Taught in docs/checkpointing.md. Chen et al. 2016, "Training Deep Nets with Sublinear
Memory Cost" (arXiv:1604.06174). `checkpoint` and `checkpoint_sequential` follow torch's
non-reentrant `torch.utils.checkpoint` (use_reentrant=False), built on saved-tensor hooks.
"""

import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from gradflow_ref import _checks

__all__ = [
    "checkpoint",
    "checkpoint_sequential",
    "SavedTensorMeter",
    "count_forwards",
    "CheckpointStats",
    "measure",
    "mlp",
    "segment_model",
]

_MAX_LAYERS = 10_000  # mlp's deepest: a Python loop builds every layer before any work
_MAX_WIDTH = 65_536  # mlp's widest: each layer holds width**2 weights


def checkpoint(function, *args, use_reentrant=False, preserve_rng_state=True, **kwargs):
    """Run `function(*args, **kwargs)` keeping none of its intermediates; recompute them later.

    Same semantics as `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`: the tensor
    arguments are saved, every tensor saved inside `function` is replaced by a placeholder and
    rebuilt by re-running `function` (stopping early once all are rebuilt) when backward first
    needs one. The CPU RNG state (and CUDA's, for CUDA inputs) and autocast state of the forward
    are restored for the recomputation, so dropout draws the same mask.

    Args:
        function: the callable to checkpoint; must run the same operations when re-run.
        *args: its positional arguments; tensors and any other Python values.
        use_reentrant: must be False. The reentrant variant is not implemented here.
        preserve_rng_state: restore the forward's RNG state while recomputing.
        **kwargs: keyword arguments for `function`, kept as they are.

    Returns:
        Whatever `function` returns.

    Raises:
        TypeError: `function` is not callable, or a flag is not True or False.
        NotImplementedError: `use_reentrant=True`.
        RuntimeError: in backward, if an input was modified in place or the recomputation
            saved different tensors than the forward.

    Example:
        >>> layer = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU())
        >>> x = torch.randn(2, 4, requires_grad=True)
        >>> checkpoint(layer, x).sum().backward()  # layer runs twice, its GELU input is not kept
    """
    _checks.callable_("checkpoint", "function", function, "Pass the layer or function to run.")
    _checks.boolean("checkpoint", "use_reentrant", use_reentrant)
    _checks.boolean("checkpoint", "preserve_rng_state", preserve_rng_state)
    if use_reentrant:
        _refuse_reentrant("checkpoint")
    if not torch.is_grad_enabled():
        return function(*args, **kwargs)
    frame = _Frame(function, args, kwargs, preserve_rng_state)
    with torch.autograd.graph.saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=False, **kwargs):
    """Split a sequential model into `segments` chunks and checkpoint all but the last.

    Same split as torch: chunks of `len(functions) // segments` layers, the last chunk takes the
    remainder and runs without checkpointing (its activations are needed first in backward).

    Args:
        functions: an `nn.Sequential`, `nn.ModuleList`, list or tuple of one-tensor callables.
        segments: number of chunks, 1 <= segments <= len(functions).
        input: the tensor fed to the first function.
        use_reentrant: must be False (see `checkpoint`).
        **kwargs: only `preserve_rng_state` (bool), as in torch.

    Returns:
        The output of the last function.

    Raises:
        TypeError: `functions` is not sequential, `input` is not a tensor or `segments` not an int.
        ValueError: `segments` out of range or an unknown keyword argument.
        NotImplementedError: `use_reentrant=True`.
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError(
            f"checkpoint_sequential: unexpected keyword arguments {sorted(kwargs)}; "
            "only `preserve_rng_state` is accepted."
        )
    func = "checkpoint_sequential"
    fix = (
        "Wrap the layers in nn.Sequential, or call checkpoint() on the parts of a "
        "non-sequential model."
    )
    _checks.instance(func, "functions", functions, (nn.Sequential, nn.ModuleList, list, tuple), fix)
    seq = isinstance(functions, nn.Sequential)  # its children, as torch takes them
    functions = list(functions.children()) if seq else list(functions)
    fix = "Each layer takes and returns one tensor; use checkpoint() for several inputs."
    _checks.instance(func, "input", input, torch.Tensor, fix)
    if not functions:
        raise ValueError(f"{func}: `functions` must hold at least one layer, got none.")
    for i, f in enumerate(functions):
        _checks.callable_(func, f"functions[{i}]", f, "Each layer is a module or a function.")
    fix = f"Pass between 1 and the number of layers ({len(functions)}); 1 checkpoints nothing."
    _checks.integer(func, "segments", segments, fix=fix)
    _checks.boolean(func, "use_reentrant", use_reentrant)
    _checks.boolean(func, "preserve_rng_state", preserve)
    if segments > len(functions):
        raise ValueError(
            f"checkpoint_sequential: `segments` must be between 1 and the number of layers "
            f"({len(functions)}), got {segments}."
        )
    if use_reentrant:
        _refuse_reentrant("checkpoint_sequential")

    def run(start, stop):
        def forward(x):
            for f in functions[start:stop]:
                x = f(x)
            return x

        return forward

    size = len(functions) // segments
    for start in range(0, size * (segments - 1), size):
        input = checkpoint(run(start, start + size), input, preserve_rng_state=preserve)
    return run(size * (segments - 1), len(functions))(input)


class SavedTensorMeter:
    """Count the bytes autograd saves for backward while active (a saved-tensor hook).

    Each storage is counted once (views and tensors sharing memory are deduplicated, and a
    storage counts whole). Parameters, and views of them, are counted apart in
    `parameter_bytes`: they are alive anyway, so they are not activation memory. Tensors saved
    inside a checkpointed region are invisible here (the region's own hook takes them); its
    saved inputs are seen. After a forward pass `bytes` is the activation memory held for
    backward. Works on any device.
    """

    def __init__(self):
        self.bytes = 0  # activation bytes: distinct non-parameter storages saved
        self.tensors = 0  # number of those storages
        self.parameter_bytes = 0  # distinct parameter storages saved (not activation memory)
        self._seen = {}  # (device, data_ptr) -> weakref to a tensor keeping that storage alive
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda x: x)

    def _pack(self, x):
        base = x if x._base is None else x._base
        key = (x.device, x.untyped_storage().data_ptr())
        ref = self._seen.get(key)
        if ref is None or ref() is None:  # a dead entry means the address was reused
            self._seen[key] = weakref.ref(x)
            nbytes = x.untyped_storage().nbytes()
            if isinstance(base, nn.Parameter):
                self.parameter_bytes += nbytes
            else:
                self.bytes += nbytes
                self.tensors += 1
        return x

    def __enter__(self):
        self._hooks.__enter__()
        self._active = True
        return self

    def __exit__(self, *exc):
        if not getattr(self, "_active", False):
            raise RuntimeError(
                "SavedTensorMeter.__exit__: the meter is not active; use it as "
                "`with SavedTensorMeter() as meter:`."
            )
        self._active = False
        self._hooks.__exit__(*exc)


class count_forwards:
    """Count calls of each given module's forward while active (forward pre-hooks).

    Pre-hooks also count a recomputation that checkpoint's early stop cuts short.
    """

    def __init__(self, modules: Iterable[nn.Module]):
        fix = "Pass a list of layers; wrap a single module as [module]."
        _checks.instance("count_forwards", "modules", modules, Iterable, fix)
        self.modules = list(modules)
        if not self.modules:
            raise ValueError(
                f"count_forwards: `modules` is empty, so it would count nothing. {fix}"
            )
        for m in self.modules:
            _checks.instance("count_forwards", "modules", m, nn.Module, "pass a list of layers.")
        self.count = 0  # forward calls of the given modules so far
        self._handles = []

    def _hook(self, module, args):
        self.count += 1

    def __enter__(self):
        self._handles = [m.register_forward_pre_hook(self._hook) for m in self.modules]
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()


@dataclass
class CheckpointStats:
    saved_bytes: int  # activation bytes held for backward after the forward (SavedTensorMeter)
    saved_tensors: int  # distinct storages behind saved_bytes
    forwards: int  # layer forwards during the forward pass
    recomputed: int  # layer forwards re-run during backward
    seconds: float  # wall time of forward + backward
    peak_bytes: int | None = None  # CUDA only: peak allocated above the start, forward + backward

    def __post_init__(self) -> None:
        for name in ("saved_bytes", "saved_tensors", "forwards", "recomputed"):
            _checks.integer("CheckpointStats", name, getattr(self, name), low=0)
        _checks.real("CheckpointStats", "seconds", self.seconds, low=0, strict=False)
        if self.peak_bytes is not None:
            _checks.integer("CheckpointStats", "peak_bytes", self.peak_bytes, low=0)


def measure(forward: Callable[[], torch.Tensor], layers: Iterable[nn.Module]) -> CheckpointStats:
    """Run `forward()` then backward of its sum once, and report memory, forwards and time.

    Args:
        forward: builds the output (the model call); its `.sum()` is backpropagated.
        layers: the modules whose forward calls are counted.

    Returns:
        A CheckpointStats; `peak_bytes` is set when CUDA is available.

    Raises:
        TypeError: `forward` is not callable or returns no tensor, or `layers` holds a
            non-module.
        ValueError: `forward()` returns a tensor with no gradient to backpropagate.
    """
    _checks.callable_("measure", "forward", forward, "Pass e.g. lambda: model(x).")
    _checks.instance("measure", "layers", layers, Iterable, "Pass a list of layers.")
    layers = list(layers)
    if not layers:
        raise ValueError(
            "measure: `layers` is empty, so the forwards and recomputations would count nothing; "
            "pass the model's layers, e.g. list(model)."
        )
    for i, layer in enumerate(layers):
        _checks.instance("measure", f"layers[{i}]", layer, nn.Module, "Pass a list of layers.")
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start_bytes = torch.cuda.memory_allocated()
    start = time.perf_counter()
    with count_forwards(layers) as counter:
        with SavedTensorMeter() as meter:
            out = forward()
        forwards = counter.count
        _checks.instance("measure", "forward()", out, torch.Tensor, "Return the model's output.")
        if not out.requires_grad:
            raise ValueError(
                "measure: `forward()` returned a tensor that needs no gradient; build it from "
                "parameters or inputs with requires_grad=True, outside torch.no_grad()."
            )
        out.sum().backward()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() - start_bytes if cuda else None
    return CheckpointStats(
        meter.bytes, meter.tensors, forwards, counter.count - forwards, seconds, peak
    )


def mlp(n_layers, width, *, seed=0, device=None, dtype=None) -> nn.Sequential:
    """Build an `n_layers`-deep MLP of (Linear(width, width), ReLU) blocks, seeded.

    Raises:
        TypeError / ValueError: `n_layers` not an int from 1 to 10,000, `width` not one from 1
            to 65,536, `seed` not an int from 0 to 2**63 - 1, `dtype` not a floating dtype, or
            `device` no device of this machine.
    """
    fix = "The guide's MLPs have 2 to 64 layers."
    _checks.count("mlp", "n_layers", n_layers, high=_MAX_LAYERS, fix=fix)
    fix = "Every layer is a width x width matrix; the guide's are 64 to 1024 wide."
    _checks.count("mlp", "width", width, high=_MAX_WIDTH, fix=fix)
    _checks.count("mlp", "seed", seed, low=0, fix="torch.manual_seed takes 0 to 2**63 - 1.")
    if dtype is not None:
        _checks.dtype("mlp", "dtype", dtype)
    _checks.device("mlp", "device", device)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(n_layers)]
    torch.random.set_rng_state(gen_state)
    return nn.Sequential(*blocks).to(device=device, dtype=dtype)


def segment_model(n_layers, k):
    """Return N/K + K: layer activations held with a checkpoint every `k` of `n_layers` layers.

    Raises:
        TypeError / ValueError: `n_layers` or `k` is not a positive finite number.
    """
    n_layers = _checks.real("segment_model", "n_layers", n_layers, low=0, fix="Pass N >= 1.")
    k = _checks.real("segment_model", "k", k, low=0, fix="Pass a segment length K >= 1.")
    return n_layers / k + k


# ---- inside checkpoint: the saved-tensor hooks and the recomputation they trigger


class _Anchor(torch.autograd.Function):
    """Save the region's tensor inputs as ordinary saved tensors, so outer hooks see them."""

    @staticmethod
    def forward(ctx, token, *tensors):
        ctx.save_for_backward(*tensors)
        return token.new_empty(0)

    @staticmethod
    def backward(ctx, grad):  # never reached: the anchor's output is never used
        return (None,) * (1 + len(ctx.saved_tensors))


class _Stop(Exception):
    """Raised inside recomputation once every saved tensor has been rebuilt (early stop)."""


class _Slot:
    """Stands in for one tensor saved inside a checkpointed region."""

    __slots__ = ("meta", "value", "__weakref__")

    def __init__(self, meta):
        self.meta = meta  # (shape, dtype, device) seen in the forward, checked on recompute
        self.value = None  # the recomputed tensor, held from recomputation until unpacked


def _meta(x):
    return (x.shape, x.dtype, x.device)


def _get_rng(cuda_devices):
    return torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in cuda_devices]


def _set_rng(state, cuda_devices):
    torch.set_rng_state(state[0])
    for d, device_state in zip(cuda_devices, state[1]):
        torch.cuda.set_rng_state(device_state, d)


class _Frame:
    """One checkpointed call: its inputs, RNG and autocast state, and the slots it stands for."""

    def __init__(self, function, args, kwargs, preserve_rng_state):
        self.function, self.args, self.kwargs = function, list(args), kwargs
        self.tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        tensors = [args[i] for i in self.tensor_at]
        self.versions = [t._version for t in tensors]
        self.requires_grad = [t.requires_grad for t in tensors]
        self.anchor = _Anchor.apply(torch.empty(0, requires_grad=True), *tensors)
        for i in self.tensor_at:
            self.args[i] = None  # held by the anchor only, like any saved tensor
        self.slots = []
        # As torch: the RNG of the CPU and of the CUDA devices holding tensor inputs.
        self.cuda_devices = sorted({t.device.index for t in tensors if t.device.type == "cuda"})
        self.device_type = "cuda" if self.cuda_devices else "cpu"
        self.rng = _get_rng(self.cuda_devices) if preserve_rng_state else None
        self.autocast = {
            d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
            for d in {"cpu", self.device_type}
        }
        self.autocast_cache = torch.is_autocast_cache_enabled()

    def pack(self, x):
        slot = _Slot(_meta(x))
        self.slots.append(weakref.ref(slot))
        return slot

    def unpack(self, slot):
        if slot.value is None:
            self.recompute()
        value, slot.value = slot.value, None
        return value

    def recompute(self):
        tensors = self.anchor.grad_fn.saved_tensors
        args = list(self.args)
        for i, t, version, rg in zip(self.tensor_at, tensors, self.versions, self.requires_grad):
            if t._version != version:
                raise RuntimeError(
                    "checkpoint: an input of the checkpointed function was modified in place "
                    "after the forward; clone it before modifying it, or do not checkpoint there."
                )
            args[i] = t.detach().requires_grad_(rg)
        count = 0

        def pack(x):
            nonlocal count
            if count >= len(self.slots):
                raise RuntimeError(
                    "checkpoint: recomputation saved more tensors than the forward did; "
                    "the checkpointed function must run the same operations both times."
                )
            slot, count = self.slots[count](), count + 1
            if slot is not None:
                if _meta(x) != slot.meta:
                    raise RuntimeError(
                        f"checkpoint: a recomputed tensor has (shape, dtype, device) {_meta(x)}, "
                        f"the forward saved {slot.meta}; make the function deterministic in shape."
                    )
                slot.value = x.detach() if x.requires_grad else x
            if count == len(self.slots):
                raise _Stop  # early stop: everything backward needs has been rebuilt
            # Not x: an op that saves its own output (ReLU) would then hold that output, whose
            # grad_fn is the op itself, a cycle in C++ that Python's collector never frees.
            # This graph is never run backward, so it needs nothing back.
            return None

        saved_rng = _get_rng(self.cuda_devices)
        try:
            if self.rng is not None:
                _set_rng(self.rng, self.cuda_devices)
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x), torch.enable_grad():
                with _autocast(self.autocast, self.autocast_cache):
                    self.function(*args, **self.kwargs)
        except _Stop:
            pass
        finally:
            _set_rng(saved_rng, self.cuda_devices)
        if count != len(self.slots):
            raise RuntimeError(
                f"checkpoint: recomputation saved {count} tensors, the forward saved "
                f"{len(self.slots)}; the checkpointed function must run the same operations."
            )


class _autocast:
    """Re-enter the autocast state of the original forward (backward runs outside it)."""

    def __init__(self, states, cache):
        # a device whose autocast was off in the forward and is off now needs no context
        # (building a torch.autocast costs about half a millisecond)
        self.contexts = [
            torch.autocast(d, dtype=dtype, enabled=on, cache_enabled=cache)
            for d, (on, dtype) in states.items()
            if on or torch.is_autocast_enabled(d)
        ]

    def __enter__(self):
        for c in self.contexts:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.contexts):
            c.__exit__(*exc)


def _refuse_reentrant(func):
    raise NotImplementedError(
        f"{func}: `use_reentrant=True` is not implemented here, only torch's recommended "
        f"non-reentrant variant; pass use_reentrant=False, or call torch.utils.checkpoint.{func}"
        "(..., use_reentrant=True) for the legacy one."
    )
