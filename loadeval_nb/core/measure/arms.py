"""The arms of an interleaved pass, as data: what each serves, what it draws from the
loader, what its run log keeps. The pass (:class:`~.interleave.InterleavedPass`)
walks its plan's blocks and hands each to its arm: what a block serves, and what it
leaves out, it never decides from an arm's name.

* :class:`Live` arms serve a loader's batches as they come: :class:`Real` serves the
  user's loader's batches, stamped as they come (its steps wait
  for data), and fills the replay cache in the pass's first steps;
* :class:`Replay` (the ``ideal`` arm) serves the replay cache's batches;
* :class:`Contended` serves them too while a thread draws the real loader's batches and
  drops them (the loader's work still on the machine);
* :class:`Rebuilt` (the ``variant`` arm) serves a rebuilt copy of the loader;
* :class:`Served` is a real arm under another name whose first steps are the plan's
  (the straggler proof's ``free`` and ``control`` arms on a rank that does not replay in
  them; a rank that does replays them with a :class:`Freed` of that name: its cached
  batches, nothing drawn from its loader).

A new arm is a subclass that says what it serves (:meth:`Arm.steady` for a block on
the stamping iterators, :meth:`Arm.step` for one step at a time), what it leaves out
(:meth:`Arm.end_block`) and what its log keeps (:meth:`Arm.log_settings`), and an entry
in :data:`KINDS` (or in the ``arms`` a pass is given).
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from itertools import cycle, islice, repeat
from operator import itemgetter
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol

from ..errors import LoadEvalError
from ..record.run import CONTENDED, VARIANT
from .batches import cost_size
from .cache import nothing_to_measure
from .timing import EpochRecord, block_log_iter, block_replay_iter

if TYPE_CHECKING:
    from .cache import ReplayCache
    from .timing import Clock
    from .variant import Variant


class Started(Protocol):
    """A loader as the pass started it (:class:`~.modes.LoaderStart`)."""

    def first(self, batch: Any) -> None: ...
    def worker_pids(self) -> set[int]: ...


class Plan(Protocol):
    """What an arm reads of its pass's plan (:class:`~.blocks.BlockPlan`)."""

    @property
    def warmup(self) -> int: ...
    @property
    def drain(self) -> int: ...
    @property
    def variant_drain(self) -> int: ...
    def most_left_out(self, steps: int, per_block: int) -> int: ...


class Pass(Protocol):
    """What an arm reads and calls of the pass that serves it
    (:class:`~.interleave.InterleavedPass`)."""

    clock: Clock
    dataloader: Any
    cache: ReplayCache

    @property
    def plan(self) -> Plan: ...

    steps: int
    depth: int
    variant_depth: int
    representative: bool
    bound: Optional[int]
    variant: Optional[Variant]

    @property
    def _loader(self) -> Started: ...
    @property
    def _variant(self) -> Optional[Started]: ...

    _sides: dict[str, Any]
    _served: dict[str, list[Optional[int]]]
    _stream_sizes: list[int]
    _stream_positions: list[int]
    _paid: int
    _dropped: int

    @property
    def _cache_sizes(self) -> list[Optional[int]]: ...
    def _sampled_steps(
        self, src: Iterator[Any], n: int, rec: EpochRecord, clock: Clock
    ) -> Iterator[Any]: ...
    def _sample(self, batch: Any, cached: bool = False) -> None: ...
    def _drained(self, rec: EpochRecord, depth: Optional[int] = None, most: int = 0) -> int: ...
    def _drain(self, src: Iterator[Any], most: int) -> Drain: ...
    def _fold_dropped(self, drain: Drain) -> None: ...
    def _drawn(self) -> int: ...
    def _variant_settings(self) -> dict[str, Any]: ...


@dataclass
class PassState:
    """What one pass carries from block to block: the loaders' iterators, the replay
    cache's cursor, and whether the cache is still filling."""

    src: Any
    """The real loader's iterator."""
    vsrc: Any = None
    """The variant's loader's iterator (None: no variant arm)."""
    k_cache: int = 0
    """Cached batches served so far (the next one's place in the cache's cycle)."""
    filling: bool = False
    """The first pass's first real batches still go into the cache."""
    first: bool = False
    """The loader's first batch not yet seen (its check still to run)."""
    drain: Optional[Drain] = None
    """The contended arm's drawing thread in the block being served one step at a time."""


@dataclass
class Block:
    """The block being served: its place ``k`` in the pass, steps ``n`` (``skip`` of them
    left out at its start) and its record."""

    k: int
    n: int
    skip: int
    rec: EpochRecord


class Arm:
    """One arm of a pass: ``name`` (its run log's and its blocks' name) and what it is."""

    live: ClassVar[bool] = False
    """It serves a loader's batches as they come: its steps wait for data, its record
    stamps when each batch was ready (a real run's log), else a replay's."""
    replays: ClassVar[bool] = False
    """It serves the replay cache's batches."""
    serves_real: ClassVar[bool] = False
    """It serves the real loader's batches."""
    pays_ahead: ClassVar[bool] = True
    """On a loader whose ``len()`` does not bound its epoch, the real batches its steps
    stand for are drawn and dropped before its block (the loop is never handed more
    batches than the loader holds); False for an arm that serves the real loader, or one
    whose loader is taken out of the job (the straggler proof's :class:`Freed`)."""
    threaded: ClassVar[bool] = False
    """A thread of its own draws from the loader (the pass shortens the switch interval)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        """The block's batches on the stamping iterators (C where it is there); returns
        True where the loader ran out inside it."""
        raise NotImplementedError

    def open_steps(self, p: Pass, st: PassState, b: Block, todo: int) -> None:
        """Before ``todo`` steps served one at a time (the cache filling, or CUDA)."""

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        """Step ``i``'s batch (its start already stamped); StopIteration: the loader ran
        out."""
        raise NotImplementedError

    def close_steps(self, p: Pass, st: PassState, b: Block) -> bool:
        """After the steps served one at a time (whatever happened); True: the loader ran
        out."""
        return False

    def first_steady(self, p: Pass, b: Block, later: bool) -> int:
        """CUDA: the first step where the block's steady steps may begin (an event is
        recorded at each from there to ``skip``); ``later``: not the arm's first block."""
        return b.skip

    def end_block(self, p: Pass, rec: EpochRecord, now: int) -> None:
        """The block is over at ``now``: its closing stamp, and the steps it leaves out
        where they are known only now."""
        if len(rec.starts) == rec.expected:  # (a block's iterator stamps its own end)
            rec.starts.append(now)
        rec.last_end_known = True

    def loader(self, p: Pass) -> Started:
        """The loader whose workers run in its blocks."""
        return p._loader

    def most_steps(self, p: Pass) -> int:
        """The most steps its blocks take in an adaptive pass."""
        return p.steps

    def log_settings(self, p: Pass) -> dict[str, Any]:
        """What its run log's settings keep beside the pass's."""
        return {}

    def loader_settings(self, p: Pass) -> Optional[dict[str, Any]]:
        """The loader settings its run log keeps (None: the real loader's)."""
        return None


class Live(Arm):
    """An arm that serves a loader's own batches as they come (its steps wait for data):
    from :meth:`source`, with a queue :meth:`depth` batches deep; a block's closing stamp is
    the next step's start."""

    live = True

    def source(self, st: PassState) -> Any:
        """The iterator its blocks draw from in this pass."""
        return st.src

    def depth(self, p: Pass) -> int:
        """Its loader's queue (the batches served early after another arm's block)."""
        return p.depth

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        rec = b.rec
        yield from block_log_iter(islice(self.source(st), b.n - len(rec.ready)), rec, p.clock)
        return len(rec.ready) < b.n  # the loader ran out inside the block

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        batch = next(self.source(st))
        b.rec.ready.append(p.clock())
        return batch

    def first_steady(self, p: Pass, b: Block, later: bool) -> int:
        return min(self.depth(p), b.skip) if later and b.skip else b.skip

    def end_block(self, p: Pass, rec: EpochRecord, now: int) -> None:
        if len(rec.starts) == len(rec.ready):
            rec.starts.append(now)


class Real(Live):
    """The user's loader as it is. Its blocks after another arm's leave out the steps the
    workers' queue served early (:meth:`~.interleave.InterleavedPass._drained`)."""

    serves_real = True
    pays_ahead = False
    by_queue: ClassVar[bool] = True
    """Its first steps after another arm's are left out as far as the queue reached
    (else: the plan's count)."""

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        if b.skip and b.k and p.representative:
            # the steps left out anyway: their batches sampled (their size, and the
            # cache's reservoir) by a loop of our own
            yield from p._sampled_steps(st.src, b.skip, b.rec, p.clock)
        return (yield from super().steady(p, st, b))

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        batch = super().step(p, st, b, i)
        if st.filling:  # the first pass's first batches: cached
            if st.first:
                st.first = False
                p._loader.first(batch)
            p.cache.add(batch)
            p._sample(batch, cached=True)
            if p.cache.full:
                p.cache.seal()
                st.filling = False
        elif b.k and i < b.skip and p.representative:
            p._sample(batch)
        return batch

    def end_block(self, p: Pass, rec: EpochRecord, now: int) -> None:
        super().end_block(p, rec, now)
        if self.by_queue and rec.warmup == p.plan.drain and len(p._sides[self.name].epochs) > 1:
            rec.warmup = p._drained(rec)

    def most_steps(self, p: Pass) -> int:
        return p.steps + p.plan.warmup + p.plan.most_left_out(p.steps, p.plan.drain)

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {
            "stream_sizes": list(p._stream_sizes),
            "stream_positions": list(p._stream_positions),
            "stream_drawn": p._drawn(),
            **({"paid_ahead": p._paid} if p.bound is None else {}),
        }


class Served(Real):
    """A real arm under another name, its first steps the plan's (the straggler proof's
    ``free`` and ``control`` on a rank that serves its loader in them)."""

    by_queue = False

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {}


class Replay(Arm):
    """The replay cache's batches: what the step takes with loading free (``ideal``)."""

    replays = True

    def _order(self, p: Pass, st: PassState, n: int) -> list[Any]:
        batches = p.cache.batches
        j = st.k_cache % len(batches)
        sizes = p._cache_sizes
        p._served[self.name] += [sizes[(j + x) % len(sizes)] for x in range(n)]
        st.k_cache += n
        return list(islice(cycle(batches), j, j + n))

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        yield from block_replay_iter(self._order(p, st, b.n), b.rec, p.clock)
        return False

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        if st.filling:  # the loader had fewer batches than the cache holds
            st.filling = False
            p.cache.seal()
            if not p.cache.batches:
                raise LoadEvalError(nothing_to_measure(p.dataloader))
        batches = p.cache.batches
        at = st.k_cache % len(batches)
        p._served[self.name].append(p._cache_sizes[at])
        st.k_cache += 1
        return batches[at]

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {"served_sizes": list(p._served.get(self.name, []))}


class Freed(Replay):
    """The straggler proof's replaying arm (``free`` on the suspect, ``control`` on the
    runner-up): its cached batches, its loader taken out of the job, so nothing is drawn
    from it in its blocks, not even paid ahead."""

    pays_ahead = False


class Contended(Replay):
    """Cached batches while a thread draws the real loader's batches and drops them, one
    for each step served (:class:`Drain`): the ideal with the loader's work
    still on the machine."""

    threaded = True

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        order = self._order(p, st, b.n)
        drain = p._drain(st.src, b.n)
        try:
            yield from block_replay_iter(drain.paced(order), b.rec, p.clock)  # type: ignore[arg-type]
        finally:  # (its end is stamped: the join is not in it)
            drain.stop()
            p._fold_dropped(drain)
        return drain.exhausted

    def open_steps(self, p: Pass, st: PassState, b: Block, todo: int) -> None:
        st.drain = p._drain(st.src, todo) if todo else None

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        batch = super().step(p, st, b, i)
        if st.drain is not None:
            st.drain.tokens.put(1)
        return batch

    def close_steps(self, p: Pass, st: PassState, b: Block) -> bool:
        drain, st.drain = st.drain, None
        if drain is None:
            return False
        if len(b.rec.starts) == b.rec.expected:  # the block's end, before the join
            b.rec.starts.append(p.clock())
        drain.stop()
        p._fold_dropped(drain)
        return drain.exhausted

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {**super().log_settings(p), "dropped": p._dropped}


class Rebuilt(Live):
    """The variant: a rebuilt copy of the loader with other settings, its batches taking
    real batches' places (:mod:`.variant`)."""

    def source(self, st: PassState) -> Any:
        return st.vsrc

    def depth(self, p: Pass) -> int:
        return p.variant_depth

    def end_block(self, p: Pass, rec: EpochRecord, now: int) -> None:
        super().end_block(p, rec, now)
        if rec.warmup == p.plan.variant_drain:
            rec.warmup = p._drained(rec, p.variant_depth, p.plan.variant_drain)

    def loader(self, p: Pass) -> Started:
        assert p._variant is not None
        return p._variant

    def most_steps(self, p: Pass) -> int:
        return p.steps + p.plan.most_left_out(p.steps, p.plan.variant_drain)

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {VARIANT: p.variant.settings} if p.variant is not None else {}

    def loader_settings(self, p: Pass) -> Optional[dict[str, Any]]:
        return p._variant_settings()


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


DRAW_SWITCH_S = 1e-4
"""The interpreter's switch interval while a pass with the contended arm runs (every arm
alike, put back at the pass's end): the arm's drawing thread then takes the GIL within
0.1 ms of asking, as a real loop's own ``next()`` has it. With Python's default, 5 ms, a
step that holds the GIL (Python between the calls that release it) kept the thread
waiting at each of the several times it takes the GIL for a batch: on a busy machine it
drew 3 to 11 batches for 12 steps served, the loader took less CPU than in a real block,
and the contention was hidden. Every arm runs with it, so that other threads of the
process (a sampler, a pin-memory thread) get the GIL as fast in each."""


KINDS: dict[str, type[Arm]] = {
    "real": Real,
    "ideal": Replay,
    CONTENDED: Contended,
    VARIANT: Rebuilt,
}
"""The kind of each arm an interleaved pair's plan names."""


def arms_for(names: tuple[str, ...]) -> dict[str, Arm]:
    """The arms of a plan's ``names``, each of its kind (:data:`KINDS`)."""
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise LoadEvalError(
            f"No arm is called {unknown[0]!r}; a pass serves {', '.join(KINDS)}, or arms "
            "given with their kinds."
        )
    return {n: KINDS[n](n) for n in names}
