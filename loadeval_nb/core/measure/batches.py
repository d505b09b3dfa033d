"""Walking batch structures: size in bytes, leading dimension, device moves, pinning.

A batch is whatever a loader yields: a tensor, a NumPy array, or tuples, lists
and dicts of them (nested), plus plain Python values. torch is never imported
here: tensors are recognised by duck typing, so the core works on any iterable.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional


def is_tensor(x: Any) -> bool:
    """True for a ``torch.Tensor`` (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def iter_leaves(batch: Any, _depth: int = 0) -> Iterator[Any]:
    """Yield the leaves of a nested tuple/list/dict batch."""
    if _depth > 20:
        yield batch
        return
    if isinstance(batch, Mapping):
        for v in batch.values():
            yield from iter_leaves(v, _depth + 1)
    elif isinstance(batch, (tuple, list)):
        for v in batch:
            yield from iter_leaves(v, _depth + 1)
    else:
        yield batch


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


def map_tensors(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """Return a copy of ``batch`` with ``fn`` applied to every tensor, same structure."""
    if is_tensor(batch):
        return fn(batch)
    if isinstance(batch, Mapping):
        return type(batch)({k: map_tensors(v, fn) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(map_tensors(v, fn) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(v, fn) for v in batch)
    return batch


def batch_is_pinned(batch: Any) -> Optional[bool]:
    """True if every CPU tensor in the batch is in pinned memory; None without tensors."""
    flags = [bool(leaf.is_pinned()) for leaf in iter_leaves(batch) if is_tensor(leaf)]
    return all(flags) if flags else None
