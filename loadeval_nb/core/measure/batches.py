"""Walking batch structures: size in bytes, leading dimension, copies and device moves.

A batch is whatever a loader yields: a tensor, a NumPy array, tuples (named or not),
lists, dicts, dataclasses and plain objects holding them, nested in any mix, plus plain
Python values. Every walk stops at a cycle (a batch that contains itself) and past
:data:`MAX_DEPTH` levels, so no batch can send it into endless recursion. torch and
NumPy are never imported here: tensors and arrays are recognised by duck typing, so
the core works on any iterable.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional

MAX_DEPTH = 32
"""Levels of nesting a walk goes down before it treats what is there as one leaf."""

_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))


def is_tensor(x: Any) -> bool:
    """True for a ``torch.Tensor`` (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def is_array(x: Any) -> bool:
    """True for a NumPy array (without importing NumPy)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _is_record(x: Any) -> bool:
    """A dataclass instance, or a plain object whose attributes may hold tensors (not a
    class, module, function or other machinery)."""
    if dataclasses.is_dataclass(x):
        return not isinstance(x, type)
    if isinstance(x, (type, _ATOMS)) or callable(x):
        return False
    module = type(x).__module__ or ""
    return hasattr(x, "__dict__") and not module.startswith(("torch", "numpy", "builtins"))


def _children(x: Any) -> Optional[list[tuple[str, Any]]]:
    """``(path step, value)`` of a container's parts; None for a leaf."""
    if is_tensor(x) or is_array(x) or isinstance(x, _ATOMS):
        return None
    if isinstance(x, Mapping):
        return [(f"[{k!r}]", v) for k, v in x.items()]
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple
        return [(f".{f}", v) for f, v in zip(x._fields, x)]
    if isinstance(x, (tuple, list)):
        return [(f"[{i}]", v) for i, v in enumerate(x)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [(f".{f.name}", getattr(x, f.name)) for f in dataclasses.fields(x)]
    if _is_record(x):
        return [(f".{k}", v) for k, v in vars(x).items()]
    return None


def iter_leaves_with_paths(batch: Any, root: str = "batch") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` for every leaf of ``batch`` (``batch.img``, ``batch[0]['x']``);
    a container met again on its own path (a cycle) is not entered twice."""
    on_path: set[int] = set()

    def walk(x: Any, path: str, depth: int) -> Iterator[tuple[str, Any]]:
        kids = _children(x) if depth < MAX_DEPTH else None
        if kids is None:
            yield path, x
            return
        if id(x) in on_path:
            return  # the batch contains itself: its parts were walked already
        on_path.add(id(x))
        try:
            for step, v in kids:
                yield from walk(v, path + step, depth + 1)
        finally:
            on_path.discard(id(x))

    yield from walk(batch, root, 0)


def iter_leaves(batch: Any) -> Iterator[Any]:
    """The leaves of a batch (tensors, arrays and plain values), however nested."""
    for _, leaf in iter_leaves_with_paths(batch):
        yield leaf


def _leaf_nbytes(x: Any) -> int:
    if is_tensor(x):
        return int(x.element_size() * x.nelement())
    nbytes = getattr(x, "nbytes", None)  # NumPy arrays and friends
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(x, (bytes, bytearray, memoryview)):
        return len(x)
    return sys.getsizeof(x)


def batch_nbytes(batch: Any) -> int:
    """Bytes held by a batch's tensors and arrays (plus the size of other leaves)."""
    return sum(_leaf_nbytes(leaf) for leaf in iter_leaves(batch))


MASK_NAMES = ("attention_mask", "padding_mask")
"""Leaves whose sum is the number of tokens a batch really holds (the rest is padding)."""


def cost_size(batch: Any) -> Optional[int]:
    """What a step's cost grows with, for a batch: its tokens that are not padding when it
    carries an attention (or padding) mask, else the elements of all its tensors and
    arrays (their shapes: a longer sequence, a bigger image). None: no tensor in it."""
    total, found = 0, False
    for path, leaf in iter_leaves_with_paths(batch):
        if not (is_tensor(leaf) or is_array(leaf)):
            continue
        found = True
        if any(path.endswith((f"['{m}']", f".{m}")) for m in MASK_NAMES):
            try:
                return int(leaf.sum())
            except Exception:  # a mask that does not sum: count elements instead
                pass
        total += int(leaf.numel()) if is_tensor(leaf) else int(leaf.size)
    return total if found else None


def leading_dim(batch: Any) -> Optional[int]:
    """Number of samples in a batch: the leading dimension of its first tensor or array.

    A list of non-array items (a batch that was not collated) counts its items.
    Returns ``None`` when nothing tells.
    """
    for leaf in iter_leaves(batch):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) >= 1:
            try:
                return int(shape[0])
            except (TypeError, ValueError):
                return None
    if isinstance(batch, list) and batch:
        return len(batch)
    return None


def map_leaves(
    batch: Any,
    tensor: Callable[[Any], Any],
    array: Optional[Callable[[Any], Any]] = None,
) -> Any:
    """A copy of ``batch``'s structure with ``tensor(t)`` for every tensor and
    ``array(a)`` for every NumPy array (kept as is without ``array``): containers,
    named tuples, dataclasses and objects holding tensors are rebuilt, each once (a part
    shared twice stays shared, a batch containing itself contains its copy), plain
    values are kept."""
    memo: dict[int, Any] = {}

    def walk(x: Any, depth: int) -> Any:
        if is_tensor(x):
            return tensor(x)
        if is_array(x):
            return array(x) if array is not None else x
        if depth >= MAX_DEPTH or _children(x) is None:
            return x
        if id(x) in memo:
            return memo[id(x)]
        if isinstance(x, Mapping):
            try:
                new: Any = type(x)()
            except TypeError:
                new = {}
            memo[id(x)] = new
            for k, v in x.items():
                new[k] = walk(v, depth + 1)
            if not isinstance(new, type(x)):  # a mapping we could not remake as itself
                memo[id(x)] = new = _remade(x, new)
            return new
        if isinstance(x, list):
            new = type(x)() if type(x) is not list else []
            memo[id(x)] = new
            new.extend(walk(v, depth + 1) for v in x)
            return new
        if isinstance(x, tuple):  # immutable: a cycle through it closes in a list or dict
            items = [walk(v, depth + 1) for v in x]
            new = type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
            memo[id(x)] = new
            return new
        # a dataclass or a plain object: a shallow copy, its attributes walked
        new = copy.copy(x)
        memo[id(x)] = new
        fields = (
            [f.name for f in dataclasses.fields(x)]
            if dataclasses.is_dataclass(x)
            else list(vars(x))
        )
        for name in fields:
            object.__setattr__(new, name, walk(getattr(x, name), depth + 1))
        return new

    return walk(batch, 0)


def _remade(original: Mapping[Any, Any], items: dict[Any, Any]) -> Any:
    try:
        return type(original)(items)  # type: ignore[call-arg]
    except TypeError:
        return items


def map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """A copy of ``batch``'s structure with ``fn`` applied to every tensor."""
    return map_leaves(batch, fn)
