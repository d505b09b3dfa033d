"""Per-step timing with no Python frame on the per-step path.

The iterator handed to the training loop is composed of C-level iterators only
(``zip``, ``map``, ``iter(callable, sentinel)``, ``chain``), so each step costs a
couple of ``clock()`` calls and list appends and nothing else:

* log mode:    ``zip(stamp(starts), source, stamp(ready))``: ``starts[i]`` is when
  the loop asked for batch *i*, ``ready[i]`` when it got it. The time in between
  is the wait for data; ``starts[i+1] - starts[i]`` is the whole step.
* replay mode: ``map({}.get, stamp(starts), cached)``: one stamp per step.

``zip`` stops at the first exhausted iterator after advancing the ones before it,
so when the source is done one more start stamp is taken: the end of the last
step. A trailing ``iter(guard.end, DONE)`` calls back once at exhaustion; if the
loop leaves early (``break``, an exception), the iterator is dropped and the
guard's ``__del__`` closes the epoch instead.

With the default clock on Linux, where the optional C extension ``_cstamp`` was built
(``setup.py``), the same two iterators are one C object each: it reads
``CLOCK_MONOTONIC`` (the clock of ``time.perf_counter_ns`` there) and keeps integer
nanoseconds in 8-byte ``Stamps`` arrays, at about 40 % of the cost per step (a list
holds one fresh int object a stamp). ``LOADEVAL_NB_PURE_PYTHON=1`` turns it off; it is
also off when its clock does not agree with ``perf_counter_ns`` at import. A clock that
is injected (tests, a fake clock) always takes the iterators above.

Everything else (turning stamps into steps) happens off the hot path, in
:func:`epoch_steps`.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain, cycle, islice
from operator import itemgetter
from typing import Any, Callable, Optional

Clock = Callable[[], int]
"""A monotonic clock returning integer nanoseconds (default ``time.perf_counter_ns``)."""

_second = itemgetter(1)
_DONE = object()

DEFAULT_CLOCK: Clock = time.perf_counter_ns


def _c_path() -> Any:
    """The C extension, if it is built, wanted, and agrees with ``perf_counter_ns``."""
    # "1", "true", "yes" turn it off; "0", "false", "no" or empty leave it on, as they read
    wanted = os.environ.get("LOADEVAL_NB_PURE_PYTHON", "").strip().lower()
    if wanted not in ("", "0", "false", "no", "off"):
        return None
    try:
        _cstamp: Any = importlib.import_module(f"{__package__}._cstamp")
    except ImportError:
        return None
    for _ in range(3):
        before, t, after = DEFAULT_CLOCK(), _cstamp.now(), DEFAULT_CLOCK()
        if not before <= t <= after:
            return None
    return _cstamp


C_PATH: Any = _c_path()
"""The C per-step path (``loadeval_nb.core._cstamp``), or None: the iterators below."""


def step_path() -> str:
    """Which per-step path times the loop with the default clock: ``"C"`` (the optional
    extension) or ``"Python"`` (C-level iterators of the standard library)."""
    return "C" if C_PATH is not None else "Python"


@dataclass
class EpochRecord:
    """Raw stamps of one pass over the loader (one ``iter()`` of the evaluator).

    All times are integer nanoseconds from the evaluator's clock.
    """

    setup_ns: int = 0
    """Time spent in ``iter(source)`` before the first step (worker start-up)."""
    starts: Any = field(default_factory=list)
    """Clock when the loop asked for each batch (plus one at exhaustion): a list of ints,
    or the C path's ``Stamps`` (read like one: ``len``, ``s[i]``, ``s[a:b]``)."""
    ready: Any = field(default_factory=list)
    """Clock when each batch was handed over (log mode only); the same kind as ``starts``."""
    end_ns: Optional[int] = None
    """When the epoch was closed (exhaustion, break or error)."""
    sync_ns: int = 0
    """Time spent in the closing ``torch.cuda.synchronize()`` (queued GPU work)."""
    status: str = "running"
    """``running``, ``complete`` (source exhausted or ``max_steps`` reached),
    ``stopped`` (the loop left early) or ``source-error`` (``next()`` raised)."""
    expected: Optional[int] = None
    """The number of steps the epoch serves (replay), or may serve (log; None: unknown)."""
    last_end_known: bool = False
    """Replay: a stamp closes the last step (the loop asked past the last batch, or the
    adaptive stop ended the epoch). A framework that stops asking once it has ``len()``
    batches leaves the last step's end unknown."""
    auto_reason: Optional[str] = None
    """Adaptive stop: why the epoch ended (``converged``, ``max_steps``, ``loader exhausted``)."""
    copies: Optional[list[int]] = None
    """Host-to-device copy time (GPU, ns) in each step, when CUDA was in use (log mode)."""
    warmup: Optional[int] = None
    """Steps at this epoch's start left out of the statistics, when the epoch says so
    itself (a block of an interleaved pair); None: the run's ``warmup``."""

    c_path: bool = False
    """Stamped by the C extension's iterators (see :meth:`prepare`)."""
    catch_up: Optional[tuple[int, Callable[[], None]]] = None
    """CUDA: ``(i, wait)``: ``wait()`` (the GPU's queued work) runs once, before step
    ``i``'s start is stamped, where the steady steps begin (see :meth:`prepare`)."""
    finished: bool = False
    """The epoch's closing (statistics, samplers, workers, the run log) has completed."""

    @property
    def open(self) -> bool:
        return self.status == "running"

    def prepare(
        self, clock: Clock, catch_up: Optional[tuple[int, Callable[[], None]]] = None
    ) -> None:
        """Make the stamp containers for ``clock``, before anything holds them: the C
        path's arrays for the default clock where the extension is there.

        ``catch_up=(i, wait)`` (a CUDA process): ``wait()`` runs where the steady steps
        begin, charged to the last warm-up step. A loop that never reads a result back
        runs ahead of its GPU by up to the launch queue; without it the work queued
        during the warm-up would be done, and charged, within the steady steps (by the
        epoch's closing synchronise), and a GPU-bound run would read slower than it is.
        One wait an epoch: the stamps then go through Python (a call a step)."""
        self.catch_up = catch_up
        if catch_up is None and clock is DEFAULT_CLOCK and C_PATH is not None:
            self.starts, self.ready, self.c_path = C_PATH.Stamps(), C_PATH.Stamps(), True


class EpochGuard:
    """Closes an epoch exactly once: at exhaustion, or when the loop drops the iterator."""

    __slots__ = ("_close", "_closed", "__weakref__")

    def __init__(self, close: Callable[[str], None]) -> None:
        self._close = close
        self._closed = False

    def end(self) -> object:
        """Called by ``iter(guard.end, DONE)`` when the source is exhausted."""
        self.close("complete")
        return _DONE

    def close(self, status: str) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._close(status)
            except KeyboardInterrupt:
                # a Ctrl-C that came before the closing could defer the next ones: close
                # now (a closing that completed returns at once), then pass it on
                self._close(status)
                raise

    def __del__(self) -> None:
        try:
            self.close("stopped")
        except BaseException:  # pragma: no cover - never raise from a finaliser (a second
            pass  # Ctrl-C deferred while closing included: the first is already on its way


_NEVER = -1
"""Sentinel for iter(clock, _NEVER): a clock never returns -1, and int == int is the
cheapest comparison callable_iterator can make (cheaper than an object() sentinel)."""


def _stamps(out: Any, clock: Clock, catch_up: Optional[tuple[int, Callable[[], None]]] = None):
    # iter(clock, sentinel) calls clock() forever; map(list.append) stores each value.
    if catch_up is not None:
        at, wait = catch_up

        def clock_after_wait(clock: Clock = clock) -> int:
            if len(out) == at:  # the first steady step's start: the GPU has caught up
                wait()
            return clock()

        return map(out.append, iter(clock_after_wait, _NEVER))
    return map(out.append, iter(clock, _NEVER))


def timed_log_iter(
    source: Iterator[Any],
    rec: EpochRecord,
    guard: EpochGuard,
    clock: Clock,
    first_hook: Optional[Callable[[Any], Any]] = None,
) -> Iterator[Any]:
    """Iterate ``source``, stamping before and after every ``next()``; ``first_hook(batch)``
    sees the first batch and returns what is served."""
    if rec.c_path:
        return C_PATH.log_iter(  # type: ignore[no-any-return]
            source, rec.starts, rec.ready, guard.end, first_hook
        )
    z = zip(_stamps(rec.starts, clock, rec.catch_up), source, _stamps(rec.ready, clock))
    tail = iter(guard.end, _DONE)
    if first_hook is None:
        return chain(map(_second, z), tail)
    # islice(z, 1) stops before advancing z again, so z resumes at the second batch.
    return chain(map(first_hook, map(_second, islice(z, 1))), map(_second, z), tail)


def block_log_iter(source: Iterator[Any], rec: EpochRecord, clock: Clock) -> Iterator[Any]:
    """Iterate ``source`` (a block: it ends where the caller cut it), stamping before and
    after every ``next()``, and one more start when it is done: the end of the block's
    last step. No guard: the caller closes the block."""
    if rec.c_path:
        return C_PATH.log_iter(source, rec.starts, rec.ready, _nothing)  # type: ignore[no-any-return]
    return map(
        _second, zip(_stamps(rec.starts, clock, rec.catch_up), source, _stamps(rec.ready, clock))
    )


def block_replay_iter(batches: list[Any], rec: EpochRecord, clock: Clock) -> Iterator[Any]:
    """Serve ``batches`` (a block's order of cached batches), stamping before each step
    and once more when they are done: the end of the block's last step."""
    if rec.c_path:
        return C_PATH.replay_iter(batches, rec.starts)  # type: ignore[no-any-return]
    return map(_NO_KEYS.get, _stamps(rec.starts, clock, rec.catch_up), batches)


def _nothing() -> None:
    return None


_NO_KEYS: dict[Any, Any] = {}
MAX_FLAT_ORDER = 1_000_000
"""Replay epochs longer than this cycle over the cache instead of listing every step."""


class _ReplayOrder(list):  # type: ignore[type-arg]
    """The epoch's batch references; owns the guard, so the guard dies with the iteration.

    A list iterator drops its list the moment it is exhausted, and the loop drops the
    iterator on ``break``: either way the guard's ``__del__`` closes the epoch.
    """

    __slots__ = ("guard",)
    guard: EpochGuard


def timed_replay_iter(
    cache: list[Any],
    n: int,
    rec: EpochRecord,
    guard: EpochGuard,
    clock: Clock,
    wrap: Optional[Callable[[Iterator[Any]], Iterator[Any]]] = None,
) -> Iterator[Any]:
    """Serve ``n`` batches cycling over ``cache``, stamping once per step.

    The epoch's order is one flat list of references (built in place, one
    allocation): cheaper per step than ``islice(cycle(cache), n)``.

    ``map({}.get, stamps, batches)`` calls ``{}.get(None, batch)``, which returns
    ``batch``: like ``zip`` + ``itemgetter(1)`` (stamp first, then the batch) but
    with one C call instead of two and no tuple. No trailing ``chain`` either: the
    guard rides on the list of batches (see :class:`_ReplayOrder`), and the epoch
    is complete when there is one more stamp than batches.
    """
    if n > MAX_FLAT_ORDER and cache:
        # a flat list of a huge epoch would be memory spent before the first step:
        # cycle the cache instead, and close the epoch from a trailing guard call
        rec.expected = n
        batches = islice(cycle(cache), n)
        source = wrap(batches) if wrap is not None else batches
        return map(
            _NO_KEYS.get,
            _stamps(rec.starts, clock, rec.catch_up),
            chain(source, iter(guard.end, _DONE)),
        )
    order = _ReplayOrder(cache)
    order *= -(-n // len(cache)) if cache else 0
    del order[n:]
    order.guard = guard
    rec.expected = len(order)
    if wrap is not None:  # adaptive stop: it closes the guard itself when it stops
        return map(_NO_KEYS.get, _stamps(rec.starts, clock, rec.catch_up), wrap(iter(order)))
    return block_replay_iter(order, rec, clock)


@dataclass
class EpochSteps:
    """Per-step arrays derived from an :class:`EpochRecord` (nanoseconds)."""

    start_ns: list[int]
    """Clock value at which each step began (absolute, same clock as the samplers)."""
    wait_ns: Optional[list[int]]
    step_ns: list[int]
    complete: list[bool]
    """False for a step whose end is not known exactly (the last step before a break)."""


def epoch_steps(rec: EpochRecord, *, measure_wait: bool, now: Optional[int] = None) -> EpochSteps:
    """Turn stamps into steps.

    * step *i* runs from ``starts[i]`` to ``starts[i+1]``; the last step of a
      complete epoch also gets the closing CUDA synchronisation (GPU work still
      queued belongs to the run), and the first step gets ``setup_ns``.
    * after a ``break`` there is no stamp for the end of the last step: it is
      closed at ``end_ns`` (when the loop dropped the iterator), never negative,
      and flagged incomplete so statistics can leave it out.
    * an epoch still running is read as a snapshot: its step in progress ends at
      ``now`` and is flagged incomplete; the record itself is not changed.
    """
    starts, ready = rec.starts, rec.ready
    n = len(ready) if measure_wait else max(len(starts) - 1, 0)
    if not measure_wait and not rec.last_end_known:
        # replay: stamps are the step starts; a break leaves no closing stamp.
        n = len(starts)
    if n <= 0:
        return EpochSteps([], [] if measure_wait else None, [], [])
    ends: list[int] = list(starts[1 : n + 1])
    complete = [True] * n
    if len(ends) < n:  # left early: the last step's end is when the iterator was dropped
        end = rec.end_ns if rec.end_ns is not None else (now if now is not None else starts[n - 1])
        ends.append(max(end, starts[n - 1]))
        complete[-1] = False
    ends[-1] += rec.sync_ns
    step = [e - s for s, e in zip(starts[:n], ends)]
    step[0] += rec.setup_ns
    wait: Optional[list[int]] = None
    if measure_wait:
        wait = [r - s for s, r in zip(starts[:n], ready[:n])]
        wait[0] += rec.setup_ns
    start = list(starts[:n])
    start[0] -= rec.setup_ns
    return EpochSteps(start, wait, step, complete)
