"""Per-batch production time, measured inside the DataLoader's worker processes.

Log mode sees loading from the outside: how long the training loop waited for
each batch. That wait is zero whenever the workers keep up, so it cannot say how
long one batch takes to *make*, which is what :mod:`..whatif.simulator` needs to
predict other ``num_workers`` settings. :class:`WorkerFetchTimer` measures it
where it happens.

How it works. ``timer.iter()`` calls ``iter(loader)`` while
``loader.worker_init_fn`` is temporarily a :class:`_WorkerHook` (restored in a
``finally`` as soon as ``iter()`` returns, so your loader object is left as it
was). PyTorch starts the workers inside ``iter()``; in each worker the hook

1. calls your own ``worker_init_fn(worker_id)`` first, exactly as before, then
2. patches ``_MapDatasetFetcher.fetch`` and ``_IterableDatasetFetcher.fetch`` of
   ``torch.utils.data._utils.fetch`` *in that worker process only*, with a wrapper
   that stamps ``clock()`` before and after the call (the dataset indexing and
   ``collate_fn``: one whole batch) and records ``(worker_id, t0_ns, t1_ns)``.

PyTorch's ``_worker_loop`` runs ``init_fn`` before it creates the fetcher (and
re-creates it from the same, patched class on every epoch of persistent
workers), so every batch goes through the wrapper. Your Dataset, ``collate_fn``
and the batches themselves are untouched; a fetch that raises (including the
``StopIteration`` that ends an IterableDataset) is not recorded and its
exception passes through unchanged.

Where the records go. Not through a ``multiprocessing.Queue``: a queue's feeder
thread keeps a worker from exiting while the pipe is full (about 2,000 records
nobody has collected yet), which would stall every DataLoader shutdown by five
seconds. The records go into a fixed shared-memory ring (``RawArray`` from the
loader's own multiprocessing context, so fork, spawn and forkserver all work)
guarded by a lock between the workers: a worker never blocks on the main
process, and :meth:`WorkerFetchTimer.collect` never blocks on the workers. A
worker writes its record *before* it sends the batch, so once the main process
has a batch, that batch's record is there to collect. If more than ``capacity``
records pile up between two ``collect()`` calls the oldest are overwritten and
counted in :attr:`WorkerFetchTimer.lost`.

The clock is ``time.perf_counter_ns`` (``CLOCK_MONOTONIC`` on Linux, one
system-wide clock on macOS and Windows too), so worker stamps are comparable
with the main process's step stamps.

Persistent workers keep the patch for their whole life, across epochs; a later
timer on the same loader (the next run of a cell) reads the records those workers
still write. A loader whose persistent workers were started *before* any timer
cannot be instrumented (``available`` is False and ``reason`` says why). With ``num_workers=0`` there
are no workers: loading happens in the main process, inside the wait log mode
already measures.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from typing import Any, Callable, Optional

from .._env import is_dataloader
from .._errors import check_int
from .loader import open_pass

_FIELDS = 3  # worker_id, t0_ns, t1_ns
_LOCK_TIMEOUT_S = 0.05
_PATCHED = "_loadeval_worker_hook"
# loader -> (hook, weak iterator) for persistent workers a timer started: a later timer on
# the same loader (the next run of a cell) reads the same buffer those workers still fill.
_LIVE_HOOKS: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


class _WorkerHook:
    """The ``worker_init_fn`` used while the timer starts the workers (picklable for spawn)."""

    def __init__(
        self,
        buf: Any,
        lock: Any,
        capacity: int,
        user_init_fn: Optional[Callable[[int], Any]],
        clock: Callable[[], int],
    ) -> None:
        self.buf = buf
        self.lock = lock
        self.capacity = capacity
        self.user_init_fn = user_init_fn
        self.clock = clock

    def __call__(self, worker_id: int) -> None:
        if self.user_init_fn is not None:
            self.user_init_fn(worker_id)
        self._install(worker_id)

    def _install(self, worker_id: int) -> None:
        from torch.utils.data._utils import fetch as fetch_mod

        for cls in (fetch_mod._MapDatasetFetcher, fetch_mod._IterableDatasetFetcher):
            original = cls.fetch
            # Already patched in this process (only if a worker itself forks a loader).
            original = getattr(original, _PATCHED, (None, original))[1]
            wrapper = _timed_fetch(original, self, worker_id)
            setattr(wrapper, _PATCHED, (self, original))
            cls.fetch = wrapper  # type: ignore[method-assign]

    def record(self, worker_id: int, t0_ns: int, t1_ns: int) -> None:
        """Append one record; never raises, never waits more than a few milliseconds."""
        try:
            if not self.lock.acquire(True, _LOCK_TIMEOUT_S):
                return
            try:
                buf = self.buf
                n = buf[0]
                j = 1 + (n % self.capacity) * _FIELDS
                buf[j] = worker_id
                buf[j + 1] = t0_ns
                buf[j + 2] = t1_ns
                buf[0] = n + 1  # after the slot: a reader that sees n+1 sees the record
            finally:
                self.lock.release()
        except Exception:
            pass  # timing must never break the user's loading


def _timed_fetch(original: Callable, hook: _WorkerHook, worker_id: int) -> Callable:
    clock = hook.clock

    def fetch(self: Any, possibly_batched_index: Any) -> Any:
        t0 = clock()
        data = original(self, possibly_batched_index)
        hook.record(worker_id, t0, clock())
        return data

    fetch.__wrapped__ = original  # type: ignore[attr-defined]
    return fetch


class WorkerFetchTimer:
    """Times every batch a DataLoader's worker processes produce.

    ``loader`` is any iterable; only a ``torch.utils.data.DataLoader`` with
    ``num_workers > 0`` can be timed (otherwise ``available`` is False, ``reason``
    says why, and :meth:`iter` is plain ``iter(loader)``). ``capacity`` is how many
    records the shared ring holds between two :meth:`collect` calls (24 bytes each);
    ``clock`` is an integer-nanosecond monotonic clock shared by all processes,
    picklable if the loader uses spawn.

    Use::

        timer = WorkerFetchTimer(loader)
        for batch in timer.iter():
            ...
        durations_ns = timer.load_ns()
        timer.close()
    """

    def __init__(
        self,
        loader: Any,
        *,
        capacity: int = 65536,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        check_int("capacity", capacity, 1)
        self.loader = loader
        self.capacity = capacity
        self.clock = clock
        self.available: bool = True
        """Whether batches are being timed inside worker processes."""
        self.reason: Optional[str] = None
        """Why not, when ``available`` is False."""
        self.lost: int = 0
        """Records overwritten before :meth:`collect` read them (the ring was full)."""
        self._records: list[tuple[int, int, int]] = []
        self._read = 0
        self._hook: Optional[_WorkerHook] = None
        self._iterator: Any = None
        self._closed = False
        if not is_dataloader(loader):
            self._unavailable(
                f"{type(loader).__name__} is not a torch.utils.data.DataLoader; "
                "only a DataLoader's worker processes can be timed."
            )
        elif loader.num_workers == 0:
            self._unavailable(
                "num_workers=0: loading happens in the main process; "
                "its time is the wait measured by log mode."
            )

    def _unavailable(self, reason: str) -> None:
        self.available = False
        self.reason = reason

    def _make_hook(self) -> _WorkerHook:
        import torch.multiprocessing as torch_mp

        ctx = self.loader.multiprocessing_context or torch_mp
        buf = ctx.RawArray("q", 1 + self.capacity * _FIELDS)
        return _WorkerHook(buf, ctx.Lock(), self.capacity, self.loader.worker_init_fn, self.clock)

    def iter(self) -> Iterator:
        """``iter(loader)``, with its worker processes timing every batch they make.

        The loader's ``worker_init_fn`` is swapped only for the duration of the
        ``iter()`` call and restored in a ``finally``. After :meth:`close`, a new
        ``iter()`` starts timing again into a fresh buffer (records already collected
        are kept).
        """
        self._closed = False
        loader = self.loader
        if not self.available:
            return open_pass(loader)
        persistent = bool(getattr(loader, "persistent_workers", False))
        running = getattr(loader, "_iterator", None)
        if persistent and running is not None and running is not self._iterator:
            entry = _LIVE_HOOKS.get(loader)
            if entry is not None and entry[1]() is running:
                # workers another timer started, still patched: read their records from now
                self._hook = entry[0]
                self._read = entry[0].buf[0]
                self._iterator = running
                return open_pass(loader)
            self._unavailable(
                "persistent workers were started before the timer, without its hook; "
                "make the timer before the loader's first iter()."
            )
            return open_pass(loader)
        if persistent and running is not None:
            return open_pass(loader)  # our workers, still patched: they keep recording
        if self._hook is None:
            self._hook = self._make_hook()
            self._read = 0
        user_init_fn = loader.worker_init_fn
        self._hook.user_init_fn = user_init_fn
        try:
            loader.worker_init_fn = self._hook
            it = open_pass(loader)
        finally:
            loader.worker_init_fn = user_init_fn
        if persistent:
            self._iterator = it
            try:
                _LIVE_HOOKS[loader] = (self._hook, weakref.ref(it))
            except TypeError:  # pragma: no cover - not weak-referenceable
                pass
        return it

    def collect(self) -> list[tuple[int, int, int]]:
        """All records so far, ``(worker_id, t0_ns, t1_ns)``, in order of completion.

        Reads what the workers have written since the last call without waiting for
        them; returns a new list each time.
        """
        hook = self._hook
        if hook is None or self._closed:
            return list(self._records)
        buf, cap = hook.buf, hook.capacity
        n1 = buf[0]
        start = max(self._read, n1 - cap)
        raw: list[int] = []
        for k in range(start, n1):
            j = 1 + (k % cap) * _FIELDS
            raw.extend(buf[j : j + _FIELDS])
        n2 = buf[0]
        # slots of records up to n2 - cap may have been overwritten while we copied them
        # (record n2 - cap too: a worker may be writing record n2 into its slot right now)
        safe = max(start, n2 - cap + 1)
        skip = safe - start
        self.lost += safe - self._read
        for k in range(skip, n1 - start):
            w, t0, t1 = raw[k * _FIELDS : (k + 1) * _FIELDS]
            self._records.append((int(w), int(t0), int(t1)))
        self._read = max(n1, safe)
        return list(self._records)

    def load_ns(self) -> list[int]:
        """Per-batch production times (``t1_ns - t0_ns``), in order of completion."""
        return [t1 - t0 for _, t0, t1 in self.collect()]

    def close(self) -> None:
        """Collect what is left and stop reading the shared buffer.

        Persistent workers keep their patch and go on filling the buffer until the
        loader shuts them down (the buffer lives as long as they do); a later
        :meth:`iter` on that loader, by this timer or another, reads it again from
        that point on. Calling ``close()`` again does nothing.
        """
        if self._closed:
            return
        self.collect()
        self._closed = True
        self._hook = None
        self._iterator = None

    def __enter__(self) -> WorkerFetchTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "available" if self.available else f"unavailable: {self.reason}"
        return (
            f"WorkerFetchTimer({type(self.loader).__name__}, {state}, records={len(self._records)})"
        )
