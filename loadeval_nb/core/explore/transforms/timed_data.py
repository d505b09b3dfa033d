"""The dataset the per-transform split's loader reads: the user's, its per-sample call timed.

Imported only when a split runs (it needs torch: an ``IterableDataset`` must be one for
the DataLoader to iterate it). Each wrapper times the call that makes samples into the
table's root slot; the steps timed inside that call subtract themselves from it, so
what is left is the rest of the per-sample work (reading and decoding, typically).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import Dataset, IterableDataset

from .pipeline import ROOT, Table


class TimedItems(Dataset):
    """A map-style dataset: each ``dataset[i]`` timed as one sample."""

    rest = "rest of __getitem__"

    def __init__(self, base: Any, table: Table) -> None:
        self.base, self.table = base, table

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: Any) -> Any:
        return self.table.call(ROOT, self.base.__getitem__, (i,), {})

    def __getattr__(self, name: str) -> Any:
        # a worker_init_fn that reaches into its dataset finds the original's attributes
        if name.startswith("__") or "base" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.base, name)


class TimedBatches(TimedItems):
    """A dataset with ``__getitems__`` (a ``Subset``, Hugging Face datasets): the DataLoader
    fetches a batch's samples in one call, timed as that many samples."""

    rest = "rest of __getitems__"

    def __getitems__(self, indices: Any) -> Any:
        return self.table.call(ROOT, self.base.__getitems__, (indices,), {}, n=len(indices))


class TimedStream(IterableDataset):
    """An ``IterableDataset``: each ``next()`` of its iterator timed as one sample."""

    rest = "rest of next()"

    def __init__(self, base: Any, table: Table) -> None:
        self.base, self.table = base, table

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.base)
        while True:
            try:
                item = self.table.call(ROOT, next, (it,), {})
            except StopIteration:
                return
            yield item

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "base" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.base, name)


def timed_dataset(dataset: Any, table: Table) -> Any:
    """The wrapper that fits ``dataset``."""
    if isinstance(dataset, IterableDataset):
        return TimedStream(dataset, table)
    if callable(getattr(dataset, "__getitems__", None)):
        return TimedBatches(dataset, table)
    return TimedItems(dataset, table)
