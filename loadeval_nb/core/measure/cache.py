"""The replay cache: a few batches pulled from the source once, kept to be served again.

Filling it checks the budget from the first batch (before the rest are pulled),
moves batches to the GPU for ``cache_on="device"``, and shuts the source's workers
down so their teardown is not charged to the replay. Afterwards it can tell whether
the training loop changed the cached tensors in place.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
import zlib
from itertools import islice
from typing import Any, Callable, Optional

from .._env import cuda_synchronize, is_dataloader
from .._format import fmt_bytes
from ..errors import CacheBudgetError, CacheMutationWarning, LoadEvalError
from .batches import (
    batch_nbytes,
    is_array,
    is_tensor,
    iter_leaves_with_paths,
    leading_dim,
    map_leaves,
)
from .loader import (
    end_prepared_epoch,
    open_pass,
    shutdown_persistent_workers,
    shutdown_source,
)

log = logging.getLogger("loadeval_nb")

DEFAULT_CACHE_BUDGET_FRACTION = 0.5
"""Default cache budget: this fraction of the host (or GPU) memory available now."""


def default_budget(free: int, where: str) -> tuple[int, str]:
    """The default cache budget (bytes, and where it comes from) out of ``free`` bytes."""
    frac = DEFAULT_CACHE_BUDGET_FRACTION
    return int(free * frac), f"{frac:.0%} of the {fmt_bytes(free)} of {where}"


def host_budget() -> tuple[int, str]:
    """The default budget for what is kept in host memory (a replay cache, cached samples)."""
    import psutil

    return default_budget(psutil.virtual_memory().available, "host memory available")


def target_device(device: Any) -> Any:
    """The CUDA device batches are cached on (``device``, or the current one)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        raise LoadEvalError(
            "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'."
        )
    if device is not None:
        return torch.device(device)
    return torch.device("cuda", torch.cuda.current_device())


def nothing_to_measure(source: Any, name: str = "") -> str:
    """The sentence for a source that yielded no batch: a used-up iterator, or an empty loader."""
    what = name or f"The {type(source).__name__}"
    try:  # asked only of iterators: iter() on a DataLoader would start its workers
        used_up = callable(getattr(type(source), "__next__", None)) and iter(source) is source
    except TypeError:
        used_up = False
    if used_up:
        return (
            f"{what} is an iterator that is used up (it yields nothing now); make a new one, "
            "or pass a re-iterable loader such as a DataLoader."
        )
    if is_dataloader(source):
        return (
            f"{what} produced no batches, so there is nothing to measure; check that its "
            "dataset is not empty (and drop_last with a small dataset)."
        )
    return (
        f"{what} produced no batches, so there is nothing to measure; pass a loader that "
        "yields at least one batch."
    )


def budget_checker(
    size: int, *, cache_on: str = "host", budget_bytes: Optional[int] = None, device: Any = None
) -> Callable[[Any], None]:
    """For a pair: refuse now a replay cache on a missing CUDA device, and return the check
    of ``size`` batches against the budget, to be made on the real run's first batch (one
    start of the user's loader fewer than pulling a batch of its own)."""
    if cache_on == "device":
        target_device(device)
    return functools.partial(
        check_budget, size=size, cache_on=cache_on, budget_bytes=budget_bytes, device=device
    )


def check_budget(
    first: Any, *, size: int, cache_on: str, budget_bytes: Optional[int], device: Any
) -> None:
    """Refuse (:class:`CacheBudgetError`) ``size`` batches like ``first`` over the budget:
    ``budget_bytes``, else half the memory free where the cache would live."""
    per = batch_nbytes(first)
    need = per * size
    if budget_bytes is not None:
        budget, why = budget_bytes, "cache_budget_bytes"
    elif cache_on == "device":
        free, _ = sys.modules["torch"].cuda.mem_get_info(target_device(device))
        budget, why = default_budget(free, "GPU memory free")
    else:
        budget, why = host_budget()
    if need > budget:
        fits = budget // per if per else 0
        raise CacheBudgetError(
            f"Caching {size} batches of {fmt_bytes(per)} needs about "
            f"{fmt_bytes(need)}, over the budget of {fmt_bytes(budget)} ({why}); pass "
            f"num_cached_batches={max(fits, 1)} or less, or raise cache_budget_bytes."
        )


_NOTHING = object()


def may_hand_out_user_tensors(source: Any) -> bool:
    """Whether ``source`` may yield tensors the user holds (a list of tensors, a DataLoader
    without batching or with its own collate_fn in the main process), which replaying
    would let the loop change over and over. A DataLoader that collates with
    ``default_collate``, pins memory or uses workers makes new tensors for each batch."""
    data = sys.modules.get("torch.utils.data")
    if data is None or not isinstance(source, data.DataLoader):
        return True
    if source.num_workers > 0 or source.pin_memory:
        return False
    return source.batch_size is None or source.collate_fn is not data.default_collate


class ReplayCache:
    """Up to ``size`` batches of ``source``, on the host as produced or on a CUDA device."""

    def __init__(
        self,
        size: int,
        *,
        cache_on: str = "host",
        budget_bytes: Optional[int] = None,
        device: Any = None,
    ) -> None:
        self.size = size
        self.cache_on = cache_on
        self.budget_bytes = budget_bytes
        self.device = device
        self.batches: list[Any] = []
        self.ready = False
        self.nbytes: Optional[int] = None
        self.samples_per_batch: Optional[int] = None
        self._tensors: list[tuple[str, Any]] = []
        self._versions: list[int] = []
        self._arrays: list[tuple[str, Any]] = []
        self._sums: list[int] = []
        self._mutation_warned = False
        self.copied = False
        self._to_device: Optional[Callable[[Any], Any]] = None
        self._filling: list[Any] = []
        self.shapes_differ = False
        """The cached batches' tensors and arrays are not all of one shape (variable-length
        batches): the ideal step then depends on which batches were cached."""
        """The cached tensors are copies (the source may hand out the user's own)."""

    def check_budget(self, first: Any) -> None:
        """Refuse (:class:`CacheBudgetError`) ``size`` batches like ``first`` over the budget."""
        check_budget(
            first,
            size=self.size,
            cache_on=self.cache_on,
            budget_bytes=self.budget_bytes,
            device=self.device,
        )

    def fill(self, source: Any, count_to: Optional[int] = None) -> int:
        """Pull up to ``size`` batches from ``source``, then stop its workers. ``count_to``:
        go on drawing (and dropping) batches until that many were drawn, to know the epoch
        holds them. Returns the batches drawn.

        Raises :class:`CacheBudgetError` when they would not fit, :class:`LoadEvalError`
        when the source yields nothing.
        """
        drawn = 0
        self.start(source)
        # persistent workers this fill starts are ours to stop; the user's are left running
        ours = bool(
            getattr(source, "persistent_workers", False)
            and getattr(source, "_iterator", False) is None
        )
        it = open_pass(source)
        try:
            for batch in islice(it, self.size):
                self.add(batch)
                drawn += 1
            if count_to is not None and drawn == self.size:
                for _ in islice(it, max(count_to - drawn, 0)):
                    drawn += 1
        finally:
            # Stop the source's workers now, so their teardown is not charged to the replay.
            if not getattr(source, "persistent_workers", False):
                shutdown_source(it)
            elif ours:
                shutdown_persistent_workers(source)
            end_prepared_epoch(source)
            del it
        if not self._filling:
            raise LoadEvalError(nothing_to_measure(source))
        if len(self._filling) < self.size:
            log.info(
                "loadeval_nb: the loader had only %d batches; caching all of them.",
                len(self._filling),
            )
        self.seal()
        return drawn

    def start(self, source: Any) -> None:
        """Get ready to cache batches of ``source`` one by one (:meth:`add`, then
        :meth:`seal`): how they are copied depends on what the source hands out."""
        self._to_device = None
        self.copied = may_hand_out_user_tensors(source)
        copy = self.copied
        # arrays and the containers that hold tensors are copied too: a dataclass, a named
        # tuple or an object the loader hands out may be the user's own
        arrays = _copy_array if copy else None
        if self.cache_on == "device":
            dev = target_device(self.device)
            self._to_device = lambda b: map_leaves(b, lambda t: t.to(dev, copy=copy), arrays)  # noqa: E731
        elif copy:  # the cache counts the copies in its budget: they are what it holds
            self._to_device = lambda b: map_leaves(b, _clone, arrays)  # noqa: E731
        self._filling = []

    @property
    def full(self) -> bool:
        """:meth:`add` has taken ``size`` batches (or the cache is sealed)."""
        return self.ready or len(self._filling) >= self.size

    def add(self, batch: Any) -> None:
        """Cache one more batch (the first is checked against the budget first)."""
        if not self._filling:
            self.check_budget(batch)
            self.samples_per_batch = leading_dim(batch)
        self._filling.append(self._to_device(batch) if self._to_device else batch)

    def seal(self) -> None:
        """The batches added are the cache: count them, and note what to watch."""
        cache, self._filling = self._filling, []
        if self._to_device is not None and cache:
            cuda_synchronize()
        self.batches = cache
        self.nbytes = sum(batch_nbytes(b) for b in cache)
        self.shapes_differ = len({_shapes(b) for b in cache}) > 1
        leaves = [
            (path, leaf)
            for k, b in enumerate(cache)
            for path, leaf in iter_leaves_with_paths(b, f"cached batch {k}")
        ]
        self._tensors = [(p, x) for p, x in leaves if is_tensor(x)]
        self._versions = [t._version for _, t in self._tensors]
        # arrays have no version counter: a checksum, read when an epoch ends
        self._arrays = [(p, x) for p, x in leaves if is_array(x)]
        if sum(a.nbytes for _, a in self._arrays) > MAX_SUMMED_BYTES:
            self._arrays = []  # too large to read at every epoch's end: not watched
        self._sums = [_checksum(a) for _, a in self._arrays]
        self.ready = True

    def replace(self, k: int, batch: Any) -> None:
        """Put ``batch`` in slot ``k`` of the sealed cache, copied as the cache copies (a
        batch sampled later in the stream, for a cache that is representative of it)."""
        new = self._to_device(batch) if self._to_device else batch
        if self._to_device is not None and self.cache_on == "device":
            cuda_synchronize()
        self.batches[k] = new
        self._filling = self.batches
        self.seal()

    def release(self) -> None:
        """Let go of the cached batches (their host or device memory is freed once nothing
        else holds them); ``nbytes`` still says how much was held."""
        self.batches = []
        self._tensors, self._versions, self._arrays, self._sums = [], [], [], []

    def check_mutation(self) -> None:
        """Warn once if the loop changed cached tensors or arrays in place since they were
        cached, naming where (``cached batch 0.img``)."""
        if self._mutation_warned or not (self._versions or self._sums):
            return
        now = [t._version for _, t in self._tensors]  # grows with every in-place op
        sums = [_checksum(a) for _, a in self._arrays] if self._arrays else []
        if now == self._versions and sums == self._sums:  # (one comparison each per epoch)
            return
        changed = [p for (p, _), a, b in zip(self._tensors, now, self._versions) if a != b]
        changed += [p for (p, _), a, b in zip(self._arrays, sums, self._sums) if a != b]
        self._mutation_warned = True
        kinds = " and ".join(
            f"{n} of the {total} cached {what}"
            for n, total, what in (
                (sum(a != b for a, b in zip(now, self._versions)), len(now), "tensors"),
                (sum(a != b for a, b in zip(sums, self._sums)), len(sums), "arrays"),
            )
            if n
        )
        where = ", ".join(changed[:3]) + (
            f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        )
        yours = (
            "your own data was not changed (the cache holds copies of it)"
            if self.copied
            else "your data was not changed (the loader made these batches)"
        )
        warnings.warn(
            f"The training loop changed {kinds} in place ({where}; e.g. images.sub_(mean) or "
            "arr += 1), so replayed steps after the first pass over the cache computed on "
            f"altered values; {yours}. Copy before changing (x = x.clone(), a = a.copy(), or "
            "x.to(device) on another device) or use out-of-place ops.",
            CacheMutationWarning,
            stacklevel=4,
        )


MAX_SUMMED_BYTES = 256 * 2**20
"""Cached arrays up to this size are checksummed at each epoch's end to tell in-place
changes (tensors have a version counter; arrays do not)."""


def _shapes(batch: Any) -> tuple[Any, ...]:
    return tuple(
        tuple(getattr(leaf, "shape", ()))
        for _, leaf in iter_leaves_with_paths(batch)
        if is_tensor(leaf) or is_array(leaf)
    )


def _clone(t: Any) -> Any:
    return t.clone()


def _copy_array(a: Any) -> Any:
    return a.copy()


def _checksum(a: Any) -> int:
    try:
        return (
            zlib.crc32(memoryview(a).cast("B")) if a.flags.c_contiguous else zlib.crc32(a.tobytes())
        )
    except (TypeError, ValueError, BufferError):
        return zlib.crc32(a.tobytes())
