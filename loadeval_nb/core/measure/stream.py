"""The real loader's stream as an interleaved pass sees it (:class:`Stream`): how many of
its batches were drawn (served to the loop, paid for ahead of a replayed block, dropped by
the contended arm), a sample of their sizes, and the replay cache kept a weighted
reservoir sample of it. One object, given to the pass's arms (:mod:`.arms`), so that no
arm reaches into the pass's own members."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from itertools import repeat
from operator import itemgetter
from queue import SimpleQueue
from typing import Any, Callable, Optional, Protocol

from .batches import cost_size
from .timing import Clock, EpochRecord


class Cache(Protocol):
    """What the stream reads and changes of the replay cache (:class:`~.cache.ReplayCache`)."""

    @property
    def ready(self) -> bool: ...
    @property
    def batches(self) -> list[Any]: ...
    def replace(self, slot: int, batch: Any) -> None: ...


class Stream:
    """The real stream's counters and samples for one pass (see the module's notes).

    ``served_real`` counts the real batches the loop was served so far (the pass's
    records know them); ``representative``: the cache is kept a sample of the whole
    stream (else the first batches, as DALI's)."""

    def __init__(self, cache: Cache, representative: bool, served_real: Callable[[], int]) -> None:
        self.cache = cache
        self.representative = representative
        self._served_real = served_real
        self.sizes: list[int] = []
        """Sizes (:func:`~.batches.cost_size`) of the real batches sampled across the pass."""
        self.positions: list[int] = []
        """Where in the real stream each size was sampled (real batches drawn by then,
        the contended arm's dropped ones among them)."""
        self.served: dict[str, list[Optional[int]]] = {}
        """Each replaying arm's batch sizes, step by step."""
        self.dropped = 0
        """Real batches the contended arm drew and dropped: the stream it moved past."""
        self.paid = 0
        """Real batches drawn and dropped ahead of the other arms' blocks."""
        self.credit = 0
        """Of those (and the contended arm's), how many no replayed step has used yet."""
        self._keys: list[float] = []
        """The weighted reservoir's key of each cached batch."""
        self._sizes_of_cache: list[Optional[int]] = []
        self._seen = 0
        self._rng = random.Random(0)

    def restart(self) -> None:
        """A new start of the loader: nothing paid for yet."""
        self.credit = 0

    def drawn(self) -> int:
        """Every real batch drawn so far: the real steps', the contended arm's dropped ones
        and those paid ahead."""
        return self._served_real() + self.dropped + self.paid

    def pay_ahead(self, src: Iterator[Any], n: int) -> bool:
        """Before a block of ``n`` replayed steps on a loader whose ``len()`` does not bound
        its epoch: draw and drop real batches until ``n`` are paid for (each batch's size a
        sample of the stream). False where the loader ends first: the loop must not be
        handed more batches than the loader holds."""
        while self.credit < n:
            try:
                batch = next(src)
            except StopIteration:
                return False
            self.paid += 1
            self.credit += 1
            if self.representative:
                self.sample(batch)
            del batch
        self.credit -= n
        return True

    def sampled_steps(
        self, src: Iterator[Any], n: int, rec: EpochRecord, clock: Clock
    ) -> Iterator[Any]:
        """``n`` real steps stamped as a block's are, each batch sampled (see
        :meth:`sample`): the steps a block leaves out at its start."""
        starts, ready = rec.starts, rec.ready
        for _ in range(n):
            starts.append(clock())
            try:
                batch = next(src)
            except StopIteration:
                return
            ready.append(clock())
            self.sample(batch)
            yield batch

    def drain(self, src: Iterator[Any], most: int) -> Drain:
        """The contended arm's block's drawing thread: it sizes the batches it drops
        where the cache is representative."""
        return Drain(src, most, sized=self.representative)

    def fold_dropped(self, drain: Drain) -> None:
        """The batches ``drain`` drew and dropped: the stretch of the stream the contended
        block moved past, each batch's size a sample of it (weight one: every batch was
        seen)."""
        real = self._served_real() + self.paid
        self.credit += drain.taken
        for size in drain.sizes:
            self.dropped += 1
            if size is not None:
                self._seen = real + self.dropped
                self.sizes.append(size)
                self.positions.append(self._seen)
        self.dropped += drain.taken - len(drain.sizes)

    def sample(self, batch: Any, cached: bool = False) -> None:
        """A real batch seen outside the measured steps: its size joins the stream's
        sample, weighted by the stretch of the stream it stands for (the real batches drawn
        since the last one sampled), and it may take a cached batch's place: weighted
        reservoir sampling (Efraimidis and Spirakis: the cache keeps the batches of the
        largest ``u ** (1 / weight)``), so that the cache is a sample of the whole stream
        drawn so far, not of its first batches."""
        size = cost_size(batch)
        if size is None:
            return
        drawn = self.drawn()
        weight = max(drawn - self._seen, 1)
        self._seen = drawn
        self.sizes.append(size)
        self.positions.append(drawn)
        key = self._rng.random() ** (1.0 / weight)
        if cached:
            self._keys.append(key)
            return
        if not self.cache.ready or not self._keys:
            return
        slot = min(range(len(self._keys)), key=self._keys.__getitem__)
        if key > self._keys[slot] and slot < len(self.cache.batches):
            self.cache.replace(slot, batch)
            self.cache_sizes[slot] = size
            self._keys[slot] = key

    @property
    def cache_sizes(self) -> list[Optional[int]]:
        """Each cached batch's size, in the cache's order."""
        if len(self._sizes_of_cache) != len(self.cache.batches):
            self._sizes_of_cache = [cost_size(b) for b in self.cache.batches]
        return self._sizes_of_cache

    def serve(self, arm: str, sizes: list[Optional[int]]) -> None:
        """A replaying arm served cached batches of these sizes, step by step."""
        self.served.setdefault(arm, []).extend(sizes)


class Drain:
    """The contended arm's loader: a thread that draws batches from ``src`` and drops
    them, so that the workers go on producing (and the loop's process goes on receiving)
    while the loop is served cached batches. It draws one batch for each step served (a
    token each, :meth:`paced`), as the real loop asks for one, up to ``most``: a loader
    that keeps ahead works at the pace it would in a real block, spread over the block,
    not all at its start (where the steps left out would hide it); one that falls behind
    is drawn from as fast as it delivers. :meth:`stop` ends it after the batch it is
    waiting for, and raises what the loader raised. (The pass runs with a short switch
    interval, :data:`DRAW_SWITCH_S`, so that a step that holds the GIL does not starve it.)"""

    def __init__(self, src: Iterator[Any], most: int, sized: bool = False) -> None:
        self.src, self.most, self.sized = src, most, sized
        self.taken = 0
        self.sizes: list[Optional[int]] = []
        """Each dropped batch's size (:func:`~.batches.cost_size`) where ``sized``."""
        self.exhausted = False
        self.error: Optional[BaseException] = None
        self.tokens: SimpleQueue[Optional[int]] = SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loadeval-drain", daemon=True)
        self._thread.start()

    def paced(self, order: list[Any]) -> Iterator[Any]:
        """``order``, a token given at each batch served (C-level iterators: no Python
        frame on the step's path)."""
        return map(itemgetter(0), zip(order, map(self.tokens.put, repeat(1))))

    def _run(self) -> None:
        try:
            while self.taken < self.most and self.tokens.get() is not None:
                if self._stop.is_set():
                    break
                batch = next(self.src)
                self.taken += 1
                if self.sized:
                    self.sizes.append(cost_size(batch))
                del batch
        except StopIteration:
            self.exhausted = True
        except BaseException as e:  # the loader's own error: the pass raises it
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        self.tokens.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error
