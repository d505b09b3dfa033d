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

from collections.abc import Generator
from dataclasses import dataclass
from itertools import cycle, islice
from typing import TYPE_CHECKING, Any, ClassVar, Optional, Protocol

from ..errors import LoadEvalError
from ..record.run import CONTENDED, VARIANT
from .cache import nothing_to_measure
from .stream import Drain, Stream
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

    stream: Stream
    """The real stream: what was drawn, its sizes, the cache's reservoir."""

    @property
    def real_start(self) -> Started:
        """The real loader, as the pass started it."""

    @property
    def variant_start(self) -> Optional[Started]:
        """The variant's loader, as the pass started it (None: no variant arm)."""

    def epochs_of(self, arm: str) -> list[EpochRecord]: ...
    def drained(self, rec: EpochRecord, depth: Optional[int] = None, most: int = 0) -> int: ...
    def variant_settings(self) -> dict[str, Any]: ...


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
        return p.real_start

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
    workers' queue served early (:meth:`~.interleave.InterleavedPass.drained`)."""

    serves_real = True
    pays_ahead = False
    by_queue: ClassVar[bool] = True
    """Its first steps after another arm's are left out as far as the queue reached
    (else: the plan's count)."""

    def steady(self, p: Pass, st: PassState, b: Block) -> Generator[Any, None, bool]:
        if b.skip and b.k and p.representative:
            # the steps left out anyway: their batches sampled (their size, and the
            # cache's reservoir) by a loop of our own
            yield from p.stream.sampled_steps(st.src, b.skip, b.rec, p.clock)
        return (yield from super().steady(p, st, b))

    def step(self, p: Pass, st: PassState, b: Block, i: int) -> Any:
        batch = super().step(p, st, b, i)
        if st.filling:  # the first pass's first batches: cached
            if st.first:
                st.first = False
                p.real_start.first(batch)
            p.cache.add(batch)
            p.stream.sample(batch, cached=True)
            if p.cache.full:
                p.cache.seal()
                st.filling = False
        elif b.k and i < b.skip and p.representative:
            p.stream.sample(batch)
        return batch

    def end_block(self, p: Pass, rec: EpochRecord, now: int) -> None:
        super().end_block(p, rec, now)
        if self.by_queue and rec.warmup == p.plan.drain and len(p.epochs_of(self.name)) > 1:
            rec.warmup = p.drained(rec)

    def most_steps(self, p: Pass) -> int:
        return p.steps + p.plan.warmup + p.plan.most_left_out(p.steps, p.plan.drain)

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {
            "stream_sizes": list(p.stream.sizes),
            "stream_positions": list(p.stream.positions),
            "stream_drawn": p.stream.drawn(),
            **({"paid_ahead": p.stream.paid} if p.bound is None else {}),
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
        sizes = p.stream.cache_sizes
        p.stream.serve(self.name, [sizes[(j + x) % len(sizes)] for x in range(n)])
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
        p.stream.serve(self.name, [p.stream.cache_sizes[at]])
        st.k_cache += 1
        return batches[at]

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {"served_sizes": list(p.stream.served.get(self.name, []))}


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
        drain = p.stream.drain(st.src, b.n)
        try:
            yield from block_replay_iter(drain.paced(order), b.rec, p.clock)  # type: ignore[arg-type]
        finally:  # (its end is stamped: the join is not in it)
            drain.stop()
            p.stream.fold_dropped(drain)
        return drain.exhausted

    def open_steps(self, p: Pass, st: PassState, b: Block, todo: int) -> None:
        st.drain = p.stream.drain(st.src, todo) if todo else None

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
        p.stream.fold_dropped(drain)
        return drain.exhausted

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {**super().log_settings(p), "dropped": p.stream.dropped}


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
            rec.warmup = p.drained(rec, p.variant_depth, p.plan.variant_drain)

    def loader(self, p: Pass) -> Started:
        assert p.variant_start is not None
        return p.variant_start

    def most_steps(self, p: Pass) -> int:
        return p.steps + p.plan.most_left_out(p.steps, p.plan.variant_drain)

    def log_settings(self, p: Pass) -> dict[str, Any]:
        return {VARIANT: p.variant.settings} if p.variant is not None else {}

    def loader_settings(self, p: Pass) -> Optional[dict[str, Any]]:
        return p.variant_settings()


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
