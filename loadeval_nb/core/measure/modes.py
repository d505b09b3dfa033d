"""The two iteration strategies of :class:`~loadeval_nb.LoaderEvaluator`, one class per mode
(as torch's DataLoader has one iterator class per mode).

* :class:`LogMode` iterates the real loader, stamping before and after every ``next()``.
* :class:`ReplayMode` fills a :class:`~.cache.ReplayCache` at construction and serves it,
  stamping once per step.

Each answers the same questions for the evaluator: how an epoch's iterator is built,
how an epoch that ended early is classified, and what is left to do when it closes.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any, Callable, Optional

from .._env import cuda_in_use, epoch_bound, safe_len
from ..errors import LoadEvalError
from .adaptive import AutoChunker
from .batches import leading_dim
from .cache import ReplayCache
from .config import EvaluatorConfig
from .copies import CopyTimer, copies_on
from .loader import (
    end_prepared_epoch,
    open_pass,
    shutdown_persistent_workers,
    shutdown_source,
)
from .timing import EpochGuard, EpochRecord, timed_log_iter, timed_replay_iter
from .worker_timing import WorkerFetchTimer


def _auto_chunks(
    ev: EvaluatorConfig, rec: EpochRecord, source: Iterator[Any], guard: Optional[EpochGuard]
) -> Iterator[Any]:
    """``source`` fed in chunks, stopping once the :class:`AutoStop` is satisfied."""
    assert ev.auto_stop is not None

    # no reference back to the chunker (a cycle would keep the guard alive after a break)
    def on_stop(n: int, reason: str) -> None:
        rec.auto_reason = reason
        if guard is not None:  # replay: the batch list outlives the stop; close now
            guard.close("complete")

    return AutoChunker(source, rec.starts, ev.auto_stop, ev.warmup, on_stop).chunks()


class _Mode:
    """What both modes share: the evaluator's settings, copied once at its construction
    (no reference back to the evaluator: a dropped evaluator, and its sampler's thread,
    are freed at once)."""

    def __init__(self, config: EvaluatorConfig) -> None:
        self.ev = config


class LoaderStart:
    """Starting the user's loader, for every mode that iterates it (a real run, and the
    real side of an interleaved pair): the persistent workers this tool started (stopped
    at :meth:`close`, so the loader is left as it was), the per-batch timer inside the
    workers, the pids of the workers running now, and the first batch (its leading
    dimension, and the caller's check)."""

    def __init__(self, ev: EvaluatorConfig) -> None:
        self.ev = ev
        self.timer: Optional[WorkerFetchTimer] = None
        self.samples: Optional[int] = None
        """The first batch's leading dimension (None: not seen, or none)."""
        self.seen_first = False
        self._first_check = ev.first_batch
        # whether the loader's persistent workers are ours to stop at close(): they were
        # not running before our first epoch, so the user's loader is left as it was
        self._started_persistent: Optional[bool] = None
        self.src: Any = None
        """The source iterator of the pass running now (its workers are "workers" to the
        utilisation sampler)."""

    def open(self) -> Any:
        """A new iterator of the loader (through the worker timer when it is on)."""
        ev = self.ev
        if self._started_persistent is None:
            self._started_persistent = bool(
                getattr(ev.dataloader, "persistent_workers", False)
                and getattr(ev.dataloader, "_iterator", False) is None
            )
        # (the timer itself passes a loader without worker processes straight through)
        if ev.worker_timing:
            if self.timer is None:
                self.timer = WorkerFetchTimer(ev.dataloader)
            self.src = self.timer.iter()
        else:
            self.src = open_pass(ev.dataloader)
        return self.src

    def first(self, batch: Any) -> None:
        """The first batch: its leading dimension, then the caller's check (once)."""
        self.seen_first = True
        try:
            self.samples = leading_dim(batch)
        except Exception:
            self.samples = None
        check, self._first_check = self._first_check, None
        if check is not None:
            check(batch)

    def end_pass(self, src: Any, left_early: bool) -> None:
        """A pass is over: stop the workers of a pass left early (an exhausted DataLoader
        iterator has stopped its own; persistent ones stay for the next pass)."""
        if (
            src is not None
            and left_early
            and not getattr(self.ev.dataloader, "persistent_workers", False)
        ):
            shutdown_source(src)
        if left_early:
            end_prepared_epoch(self.ev.dataloader)

    def worker_pids(self) -> set[int]:
        """The pids of the DataLoader worker processes of the pass running now."""
        workers = getattr(self.src, "_workers", None) or ()
        return {w.pid for w in workers if getattr(w, "pid", None) is not None}

    def worker_load_ns(self) -> Optional[list[int]]:
        t = self.timer
        if t is None or not t.available:
            return None
        return t.load_ns()

    def close(self) -> None:
        """Stop the worker timer and the persistent workers this tool started."""
        self.src = None
        if self.timer is not None:
            self.timer.close()
        if self._started_persistent:
            shutdown_persistent_workers(self.ev.dataloader)
            self._started_persistent = None


class LogMode(_Mode):
    """Iterate the real loader and time every step: the wait inside ``next()`` and the step."""

    name = "log"
    """The mode, as DALI names it (and the run log's ``mode``)."""
    side = "real"
    """Which run of a pair this mode measures."""
    measure_wait = True
    """Each step records its wait for data (``ready`` stamps)."""
    short_last_batch = True
    """A full pass over the loader may end with a short batch."""

    def __init__(self, ev: EvaluatorConfig) -> None:
        super().__init__(ev)
        self.start = LoaderStart(ev)
        self._copies: Optional[CopyTimer] = None

    @property
    def timer(self) -> Optional[WorkerFetchTimer]:
        return self.start.timer

    def samples_per_batch(self) -> Optional[int]:
        return self.start.samples

    def open_epoch(self, rec: EpochRecord, guard: EpochGuard) -> tuple[Iterator[Any], Any]:
        """The timed iterator of one pass, and the source iterator it drives."""
        ev = self.ev
        clock = ev.clock
        t = clock()
        src = self.start.open()
        rec.setup_ns = clock() - t
        rec.expected = ev.expected_steps()
        copies = copies_on()
        if copies[0] != "cuda" or cuda_in_use():
            self._copies = CopyTimer(rec.starts, copies[0], copies[1])
            self._copies.install()
        source: Iterator[Any] = src
        if ev.auto_stop is not None:  # it stops at the AutoStop's max_steps itself
            source = _auto_chunks(ev, rec, source, None)
        elif ev.steps is not None:
            source = islice(src, ev.steps)
        hook = None if self.start.seen_first else self._first_batch_hook()
        return timed_log_iter(source, rec, guard, clock, hook), src

    def _first_batch_hook(self) -> Callable[[Any], Any]:
        first = self.start.first

        def hook(batch: Any) -> Any:
            first(batch)
            return batch

        return hook

    def settle_status(self, rec: EpochRecord, status: str, interrupted: bool = False) -> str:
        if status == "complete":
            return status
        if len(rec.starts) == len(rec.ready) + 1:
            # next() itself raised: a broken loader, unless Ctrl-C stopped it waiting there
            return "stopped" if interrupted else "source-error"
        if rec.expected is not None and len(rec.ready) >= rec.expected:
            return "complete"  # every batch taken; the loop stopped asking at len()
        return status

    def close_epoch(self, rec: EpochRecord, src: Any, exhausted: bool) -> None:
        # A loader left mid-epoch (break, error, steps reached, a loop that stopped asking at
        # len()) still has workers: stop them. An exhausted DataLoader iterator has
        # already stopped its own.
        self.close_copies(rec)
        self.start.end_pass(src, left_early=not exhausted or self.ev.steps is not None)

    def worker_load_ns(self) -> Optional[list[int]]:
        return self.start.worker_load_ns()

    def close_copies(self, rec: EpochRecord) -> None:
        """Put ``Tensor.to`` back and give each step its copy time (after the epoch's
        closing synchronisation)."""
        timer, self._copies = self._copies, None
        if timer is not None:
            timer.uninstall()
            rec.copies = timer.per_step(len(rec.ready))

    def worker_pids(self) -> set[int]:
        """The pids of the DataLoader worker processes of the epoch running now."""
        return self.start.worker_pids()

    def release(self) -> None:
        pass  # nothing held past close()

    def close(self) -> None:
        if self._copies is not None:
            self._copies.uninstall()
            self._copies = None
        self.start.close()


class ReplayMode(_Mode):
    """Serve a cache of batches for a whole epoch (``len(loader)`` or ``steps`` steps)."""

    name = "replay"
    side = "ideal"
    measure_wait = False
    short_last_batch = False

    def __init__(self, ev: EvaluatorConfig) -> None:
        super().__init__(ev)
        if ev.steps is None and safe_len(ev.dataloader) is None:
            raise LoadEvalError(
                f"Replay needs to know how many steps make an epoch, but this "
                f"{type(ev.dataloader).__name__} has no len(); pass steps=N."
            )
        self.cache = ReplayCache(
            ev.num_cached_batches,
            cache_on=ev.cache_on,
            budget_bytes=ev.cache_budget_bytes,
            device=ev.device,
        )
        # a loader whose len() does not bound its epoch (an IterableDataset, a stream) is
        # counted as it fills the cache, up to the steps asked: the loop is never handed
        # more batches than the loader would hand it
        bound = epoch_bound(ev.dataloader)
        drawn = self.cache.fill(
            ev.dataloader, count_to=None if bound is not None else ev.expected_steps()
        )
        self.held: Optional[int] = drawn if bound is None else None
        """Batches the loader was seen to hold, where its len() does not bound its epoch."""

    def samples_per_batch(self) -> Optional[int]:
        return self.cache.samples_per_batch

    def worker_pids(self) -> set[int]:
        return set()  # a replay has no workers: its loader's were shut down after caching

    def open_epoch(self, rec: EpochRecord, guard: EpochGuard) -> tuple[Iterator[Any], Any]:
        ev = self.ev
        wrap = None
        if ev.auto_stop is not None:

            def wrap(order: Iterator[Any]) -> Iterator[Any]:
                return _auto_chunks(ev, rec, order, guard)

        steps = ev.expected_steps()
        assert steps is not None  # checked at construction
        if self.held is not None:
            steps = min(steps, self.held)
        return timed_replay_iter(self.cache.batches, steps, rec, guard, ev.clock, wrap), None

    def settle_status(self, rec: EpochRecord, status: str, interrupted: bool = False) -> str:
        served = len(rec.starts)
        if status == "complete" or served == (rec.expected or 0) + 1:
            rec.last_end_known = True  # the closing stamp was taken
            return "complete"
        if served == rec.expected:
            return "complete"  # every batch served; the loop stopped asking at len()
        return status

    def close_epoch(self, rec: EpochRecord, src: Any, exhausted: bool) -> None:
        self.cache.check_mutation()

    def worker_load_ns(self) -> Optional[list[int]]:
        return None

    def close(self) -> None:
        pass  # the cache stays: a repeat replays it again

    def release(self) -> None:
        self.cache.release()


MODES: dict[str, type[LogMode] | type[ReplayMode]] = {"log": LogMode, "replay": ReplayMode}
