"""Both sides of a pair in one loop: blocks of the real loader's batches and blocks of
replayed ones, in A B B A order, on one start of the user's loader.

A real run followed by an ideal run puts whatever the machine does in between (clock
speeds, caches, other work, a workload that slows down as it goes) into the difference
between them, and an interval taken within each run cannot see it. Interleaving puts
it on both sides alike:

* the pass begins with ``warmup`` real steps (at least ``num_cached_batches``): the
  replay cache is filled from them, copies made as they pass, and none is measured;
* then blocks of ``block`` steady steps alternate, real R, ideal I, in the order
  R I I R R I I R ... (every other pair reversed, so a drift that is linear in time
  lands on both sides equally);
* while an ideal block runs, the DataLoader's workers go on preparing the batches
  already asked for (up to ``prefetch_factor × num_workers``) and then wait: the first
  steps of the next real block are served from that queue, faster than the loader
  could. Those ``drain`` steps are left out, and as many at the start of an ideal block
  (the workers finishing what they had in hand);
* each block is an epoch of its side's :class:`~loadeval_nb.Run` (its own
  ``warmup`` in the epoch's summary), so the verdict pairs block *k* of one side
  with block *k* of the other: the spread between blocks is in its interval.

What it costs, against a real run then an ideal run of the same ``steps``: the
ideal's second start of the loader and its ``num_cached_batches`` batches of cache
fill and its warm-up are gone; ``drain`` steps at each of ``2 × blocks`` changes of side
come in (4 batches each with 2 workers and ``prefetch_factor=2``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from itertools import cycle, islice
from typing import Any, Callable, Optional

from .._env import (
    SigintStamp,
    agree,
    cuda_in_use,
    cuda_synchronize,
    environment,
    interrupts_deferred,
    loader_settings,
    safe_len,
)
from .._errors import LoadEvalError, a_kind, check_choice, check_int
from ..record.journal import MetricsWriter
from ..record.run import Run
from .adaptive import AutoStop
from .batches import leading_dim
from .build_run import build_run
from .cache import ReplayCache, nothing_to_measure
from .copies import CopyTimer
from .loader import end_prepared_epoch, shutdown_persistent_workers, shutdown_source
from .sampler import UtilSampler
from .timing import (
    DEFAULT_CLOCK,
    Clock,
    EpochRecord,
    block_log_iter,
    block_replay_iter,
    epoch_steps,
    step_path,
)
from .worker_timing import WorkerFetchTimer

SIDES = ("real", "ideal")

MIN_BLOCK = 8
"""Fewest steady steps in a block: fewer and a block's mean is mostly noise."""
MAX_BLOCKS = 8
"""Blocks per side when the steps allow (8 ratios: a t-interval with 7 degrees of freedom)."""
MIN_BLOCKS = 2
"""Fewest blocks per side (one A B B A cycle)."""
WAITED_NS = 500_000
"""A real step whose batch took longer than this (or 5 % of an ideal step) to come
waited for the loader: the queue filled during the ideal block is used up."""


@dataclass(frozen=True)
class BlockPlan:
    """How one pass interleaves: ``warmup`` real steps first (the cache filled from them),
    then ``blocks`` blocks of ``block`` steady steps per side in A B B A order, ``drain``
    steps left out at the start of each block that follows the other side's."""

    warmup: int
    block: int
    blocks: int
    drain: int
    settle: int = 0
    """Ideal steps left out at the start of an ideal block that follows a real one (the
    workers finishing the batches they had in hand); 0: ``drain``."""

    def order(self) -> list[str]:
        """The side of each block: real, ideal, ideal, real, real, ideal, ..."""
        out = []
        for b in range(self.blocks):
            out += list(SIDES if b % 2 == 0 else SIDES[::-1])
        return out

    def block_steps(
        self, sides: Optional[list[str]] = None, before: Optional[str] = None
    ) -> list[tuple[str, int, int]]:
        """(side, steps served, steps left out at its start) for each block of the pass, or
        of ``sides`` after a block of side ``before`` (the adaptive stop's next cycle)."""
        out = []
        first = sides is None
        for k, side in enumerate(self.order() if sides is None else sides):
            change = self.drain if side == "real" else (self.settle or self.drain)
            skip = self.warmup if first and k == 0 else (change if side != before else 0)
            out.append((side, self.block + skip, skip))
            before = side
        return out

    @property
    def total_steps(self) -> int:
        """Every step the pass serves, both sides, warm-up and drains included."""
        return sum(n for _, n, _ in self.block_steps())


def queue_depth(loader: Any) -> int:
    """Batches a DataLoader has asked its workers for ahead of the loop
    (``prefetch_factor × num_workers``); 0 for a loader without workers."""
    info = loader_settings(loader)
    workers = info.get("num_workers")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers <= 0:
        return 0
    factor = info.get("prefetch_factor")
    return workers * (factor if isinstance(factor, int) and factor > 0 else 2)


def plan_blocks(
    steps: int,
    warmup: int,
    num_cached_batches: int,
    depth: int,
    loader_len: Optional[int] = None,
    blocks: Optional[int] = None,
) -> Optional[BlockPlan]:
    """The plan for ``steps`` steps per side (warm-up included, as for a real run), with
    ``depth`` batches prefetched. With ``loader_len`` (the loader's ``len()``), the whole
    pass — both sides' blocks, the warm-up and the drained steps — fits in one epoch of the
    loader: the loop is handed no more batches than it would be without the tool, so a
    schedule sized from ``len(loader)`` runs as it would. None when the steps (or the
    epoch) are too few to interleave."""
    first = max(warmup, num_cached_batches, 1)
    drain, settle = 2 * depth + 1, max(depth, 1)
    steady = steps - warmup
    for n in [blocks] if blocks else range(MAX_BLOCKS, MIN_BLOCKS - 1, -2):
        # a side's steps hold its drained ones too (every other real block follows an
        # ideal one): the pass takes no longer than a real run and an ideal run would
        drains = (n // 2) * drain
        block = (steady - drains) // n
        if loader_len is not None:  # the pass, every step of it, within the epoch
            fixed = BlockPlan(first, 0, n, drain, settle).total_steps
            block = min(block, (loader_len - fixed) // (2 * n))
        if block >= MIN_BLOCK:
            return BlockPlan(first, block, n, drain, settle)
    return None


def fewest_steps(warmup: int, num_cached_batches: int, depth: int) -> int:
    """The fewest loop steps (both sides) a pass of interleaved blocks takes."""
    first = max(warmup, num_cached_batches, 1)
    return BlockPlan(first, MIN_BLOCK, MIN_BLOCKS, 2 * depth + 1, max(depth, 1)).total_steps


def too_short(
    steps: Any, warmup: int, num_cached_batches: int, depth: int, loader_len: Optional[int]
) -> str:
    """Why a pass cannot be interleaved, in words a front end can put after "because"."""
    need = fewest_steps(warmup, num_cached_batches, depth)
    if loader_len is not None and loader_len < need:
        return (
            f"an epoch of the loader has {loader_len} batches and interleaved blocks need "
            f"{need} (warm-up {max(warmup, num_cached_batches, 1)}, 2 blocks of {MIN_BLOCK} "
            f"steps a side, {2 * depth + 1} drained step{'s' if depth else ''})"
        )
    return f"{steps} steps a side are too few for 2 blocks of {MIN_BLOCK} steps a side"


def plan_pass(
    loader: Any,
    *,
    steps: int,
    warmup: int,
    num_cached_batches: int,
    blocks: Optional[int] = None,
    auto_stop: Optional[AutoStop] = None,
) -> tuple[BlockPlan, Optional[int], int]:
    """The one rule for whether, and how, a pass over ``loader`` interleaves: its plan,
    made before its first step from the settings, the loader's ``len()`` and queue depth,
    and the process group — never from timing seen on the way. Under
    ``torch.distributed`` the ranks agree first (the smallest epoch, the deepest queue),
    so every rank holds the same plan and runs the same number of loop steps; settings
    that differ between ranks are one sentence. Returns ``(plan, the epoch it fits in,
    ranks that agreed)``; raises :class:`NotInterleavable` when the pass is too short."""
    depth, n, ranks = queue_depth(loader), safe_len(loader), 1
    agreed = agree(
        "plan of the interleaved pass",
        {
            "depth": depth,
            "len": n,
            "steps": steps,
            "warmup": warmup,
            "cache": num_cached_batches,
            "blocks": blocks,
            "auto": auto_stop is not None,
        },
    )
    if agreed is not None:
        ranks = len(agreed)
        _same_settings(agreed)
        depth = max(a["depth"] for a in agreed)
        lens = [a["len"] for a in agreed if a["len"] is not None]
        n = min(lens) if lens else None
    if auto_stop is not None:  # two A B B A cycles first; more as the stop rule asks
        first_steps = max(auto_stop.min_steps, 2 * MIN_BLOCK * 2) + warmup
        plan = plan_blocks(first_steps, warmup, num_cached_batches, depth, n, blocks=2)
    else:
        plan = plan_blocks(steps, warmup, num_cached_batches, depth, n, blocks)
    if plan is None:
        raise NotInterleavable(
            too_short(steps, warmup, num_cached_batches, depth, n),
            epoch_limited=n is not None and n < fewest_steps(warmup, num_cached_batches, depth),
        )
    return plan, n, ranks


class NotInterleavable(LoadEvalError):
    """A pass too short for interleaved blocks (``reason`` says why): the front ends run
    the sides one after the other instead, and say so."""

    def __init__(self, reason: str, epoch_limited: bool) -> None:
        self.reason = reason
        self.epoch_limited = epoch_limited
        fix = (
            "measure the real and the ideal run one after the other (interleave=False)"
            if epoch_limited
            else "pass more steps, or measure the sides one after the other (interleave=False)"
        )
        super().__init__(f"Cannot interleave: {reason}; {fix}.")


def _same_settings(agreed: list[dict[str, Any]]) -> None:
    """Every rank must measure with the same settings: one sentence naming the first that
    does not."""
    for key in ("steps", "warmup", "cache", "blocks", "auto"):
        values = [a[key] for a in agreed]
        if len(set(map(str, values))) > 1:
            odd = next(r for r, v in enumerate(values) if v != values[0])
            raise LoadEvalError(
                f"Rank {odd} measures with {key}={values[odd]!r} where rank 0 has "
                f"{values[0]!r}: give every rank the same settings."
            )


class _Side:
    """What the loop recorded of one side: its blocks (epochs) and its run log."""

    def __init__(self, name: str, label: str, metrics_file: Optional[str]) -> None:
        self.name = name
        self.label = label
        self.epochs: list[EpochRecord] = []
        self.metrics_file = metrics_file
        self.writer: Optional[MetricsWriter] = MetricsWriter(metrics_file) if metrics_file else None
        self.final: Optional[Run] = None
        self.spans: list[tuple[int, Optional[int]]] = []
        """(start, end) clock of each block, for the utilisation ticks of this side."""


class InterleavedEvaluator:
    """Wrap a DataLoader so that one loop over it measures a real and an ideal run
    interleaved in blocks (see the module's notes). Iterate it like the loader; each
    ``iter()`` is a pass of ``len()`` steps.

    Args:
        dataloader: a re-iterable loader of batches (a DataLoader).
        steps: steps per side, warm-up included (as a real run's ``steps``); or
            ``"auto"``: A B B A cycles go on until the speedup is known to ± ``rel``
            of the :class:`AutoStop` (at least two cycles) or its ``max_steps`` per side.
        warmup: real steps at the start of a pass left out (the cache fills during
            them, so they are at least ``num_cached_batches``).
        num_cached_batches, cache_on, cache_budget_bytes, device: the replay cache, as
            for :class:`LoaderEvaluator`.
        blocks: blocks per side (None: as many as the steps allow, up to 8).
        metrics_files: ``{"real": path, "ideal": path}`` run logs, written (as a journal)
            at every block's end.
        first_batch: called with the first real batch (a check the caller makes).
    """

    mode = "interleave"

    def __init__(
        self,
        dataloader: Any,
        *,
        steps: Any = 200,
        warmup: int = 10,
        num_cached_batches: int = 20,
        cache_on: str = "host",
        cache_budget_bytes: Optional[int] = None,
        device: Any = None,
        blocks: Optional[int] = None,
        sample_interval_s: Optional[float] = 0.1,
        auto_stop: Optional[AutoStop] = None,
        worker_timing: bool = False,
        label: Optional[str] = None,
        metrics_files: Optional[dict[str, Optional[str]]] = None,
        first_batch: Optional[Callable[[Any], None]] = None,
        clock: Optional[Clock] = None,
    ) -> None:
        if not hasattr(dataloader, "__iter__"):
            raise LoadEvalError(
                f"InterleavedEvaluator needs an iterable of batches such as a DataLoader, "
                f"not {a_kind(dataloader)}."
            )
        if steps == "auto":
            auto_stop = auto_stop or AutoStop()
        check_int("warmup", warmup, 0)
        check_int("num_cached_batches", num_cached_batches, 1)
        check_choice("cache_on", cache_on, ("host", "device"))
        check_int("blocks", blocks, MIN_BLOCKS, allow_none=True)
        if blocks is not None and blocks % 2:
            raise LoadEvalError(
                f"blocks must be an even number (A B B A cycles of 2 blocks a side), not {blocks}."
            )
        self.dataloader = dataloader
        self.auto_stop = auto_stop
        self.warmup = warmup
        self.num_cached_batches = num_cached_batches
        self.cache_on = cache_on
        self.label = label
        self.clock: Clock = clock or DEFAULT_CLOCK
        self.worker_timing = bool(worker_timing)
        self.first_batch = first_batch
        self.depth = queue_depth(dataloader)
        """This loader's queue (the drain rule reads it); the plan's is the deepest rank's."""
        if auto_stop is None:
            check_int("steps", steps, 1)
        per_side = auto_stop.max_steps if auto_stop is not None else steps
        plan, self.loader_len, self.ranks = plan_pass(
            dataloader,
            steps=per_side,
            warmup=warmup,
            num_cached_batches=num_cached_batches,
            blocks=blocks,
            auto_stop=auto_stop,
        )
        self.plan = plan
        self.steps = per_side
        """Steps per side (warm-up included), as for one run."""
        self.cache = ReplayCache(
            num_cached_batches, cache_on=cache_on, budget_bytes=cache_budget_bytes, device=device
        )
        self.cache_budget_bytes = cache_budget_bytes
        files = metrics_files or {}
        self._sides = {s: _Side(s, (label or s) if s == "real" else s, files.get(s)) for s in SIDES}
        self._t0: Optional[int] = None
        self._sampler: Optional[UtilSampler] = (
            UtilSampler(sample_interval_s, clock=self.clock) if sample_interval_s else None
        )
        me = weakref.ref(self)
        if self._sampler is not None:
            self._sampler.worker_pids = lambda: _worker_pids(me)
        self._loader_info = loader_settings(dataloader)
        self._timer: Optional[WorkerFetchTimer] = None
        self._src: Any = None
        self._started_persistent: Optional[bool] = None
        self._open: Optional[Generator[Any, None, None]] = None
        self._closed = False
        self._lock = threading.Lock()
        self._sigint = SigintStamp(self.clock)
        self._samples: Optional[int] = None
        self.block_now: Optional[tuple[str, int]] = None
        """The side and number (from 1) of the block being served, or last served."""

    # -- DataLoader look-alike -------------------------------------------------
    def __len__(self) -> int:
        if self.auto_stop is not None:  # at most: both sides' max_steps and the drains
            most = 2 * self.steps + self.plan.warmup + self.plan.drain * self.steps // MIN_BLOCK
            return most if self.loader_len is None else min(most, self.loader_len)
        return self.plan.total_steps

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "dataloader" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["dataloader"], name)

    def __repr__(self) -> str:
        p = self.plan
        return (
            f"InterleavedEvaluator({type(self.dataloader).__name__}, {p.blocks} blocks of "
            f"{p.block} steps per side, cached={len(self.cache.batches)})"
        )

    def __iter__(self) -> Iterator[Any]:
        if self._open is not None:
            self._open.close()  # a pass left open: its generator's finally closes it
        gen = self._pass()
        self._open = gen
        return gen

    # -- the pass --------------------------------------------------------------
    def _source(self) -> Any:
        if self._started_persistent is None:
            self._started_persistent = bool(
                getattr(self.dataloader, "persistent_workers", False)
                and getattr(self.dataloader, "_iterator", False) is None
            )
        if self.worker_timing:
            if self._timer is None:
                self._timer = WorkerFetchTimer(self.dataloader)
            return self._timer.iter()
        return iter(self.dataloader)

    def _pass(self) -> Generator[Any, None, None]:
        clock = self.clock
        if self._sampler is not None:
            self._sampler.start()
        self._sigint.install()
        if self._t0 is None:
            self._t0 = clock()
        first_pass = not self.cache.ready
        filling = first = first_pass  # (locals: the per-step path reads no attribute)
        if first_pass:
            self.cache.start(self.dataloader)
        t = clock()
        src = self._source()
        self._src = src
        setup = clock() - t
        everything: list[int] = []  # every step's start, for the copy timer
        copies: Optional[CopyTimer] = None
        if cuda_in_use():
            copies = CopyTimer(everything, "cuda", None)
            copies.install()
        plan = self.plan
        blocks = plan.block_steps()
        k_cache = 0
        rec: Optional[EpochRecord] = None
        side: Optional[_Side] = None
        first_index: dict[int, int] = {}
        status = "complete"
        exhausted = False
        reason = "stopped"
        k = n_steps = 0
        try:
            while True:
                if k >= len(blocks):
                    if self.auto_stop is None:
                        break
                    if self._converged():
                        reason = "converged"
                        break
                    if self._side_steps("real") >= self.steps:
                        reason = "max_steps"
                        break
                    cycle_ = plan.block_steps(list(SIDES + SIDES[::-1]), blocks[-1][0])
                    if self.loader_len is not None and sum(b[1] for b in blocks + cycle_) > (
                        self.loader_len
                    ):  # the epoch's end: the loop is never handed more than len(loader)
                        exhausted = True
                        break
                    blocks += cycle_  # one more A B B A cycle
                name, n_steps, skip = blocks[k]
                side = self._sides[name]
                self.block_now = (name, len(side.epochs) + 1)
                rec = EpochRecord(setup_ns=setup if k == 0 else 0, warmup=skip)
                rec.prepare(clock)  # the C path's stamp arrays, where it is there
                rec.expected = n_steps
                setup = 0
                first_index[id(rec)] = len(everything)
                side.epochs.append(rec)
                side.spans.append((clock(), None))
                real = name == "real"
                starts, ready = rec.starts, rec.ready
                todo = n_steps
                if copies is None and not filling:
                    # the steady path: a block is one stamping iterator (C, or C-level
                    # iterators of the standard library), the pass resumes between blocks
                    if real:
                        yield from block_log_iter(islice(src, n_steps), rec, clock)
                        if len(ready) < n_steps:  # the loader ran out inside the block
                            exhausted = True
                            break
                    else:
                        batches = self.cache.batches
                        j = k_cache % len(batches)
                        order = list(islice(cycle(batches), j, j + n_steps))
                        k_cache += n_steps
                        yield from block_replay_iter(order, rec, clock)
                    todo = 0  # (served: the loop below is the filling and CUDA path)
                for _ in range(todo):
                    now = clock()
                    starts.append(now)
                    everything.append(now)
                    if real:
                        try:
                            batch = next(src)
                        except StopIteration:
                            exhausted = True
                            break
                        ready.append(clock())
                        if filling:  # the first pass's first batches: copied into the cache
                            if first:
                                first = False
                                self._first(batch)
                            self.cache.add(batch)
                            if self.cache.full:
                                self.cache.seal()
                                filling = False
                    else:
                        if filling:  # the loader had fewer batches than the cache holds
                            filling = False
                            self.cache.seal()
                            if not self.cache.batches:
                                raise LoadEvalError(nothing_to_measure(self.dataloader))
                        batches = self.cache.batches
                        batch = batches[k_cache % len(batches)]
                        k_cache += 1
                    yield batch
                if exhausted:
                    break
                # the run logs are written where the next block leaves out its first steps
                # anyway (a change of side), or at the end, never inside a side's stretch
                last = k + 1 >= len(blocks) and self.auto_stop is None
                self._end_block(
                    side, rec, clock(), last or blocks[min(k + 1, len(blocks) - 1)][0] != name
                )
                rec = None
                k += 1
        except GeneratorExit:
            # a framework that stops asking once it has len() batches (Lightning) leaves
            # after the pass's last batch: the pass is complete, its last step's end unknown
            last = k == len(blocks) - 1 and self.auto_stop is None
            status = (
                "complete" if last and rec is not None and len(rec.starts) >= n_steps else "stopped"
            )
        except BaseException:
            status = "stopped" if self._sigint.at is not None else "source-error"
            raise
        finally:
            with interrupts_deferred():
                if self.auto_stop is not None:  # why the adaptive pass ended, on its blocks
                    why = "loader exhausted" if exhausted else reason
                    for s in self._sides.values():
                        for r in s.epochs:
                            r.auto_reason = r.auto_reason or why
                self._end_pass(side, rec, status, exhausted, src, copies, everything, first_index)

    def _first(self, batch: Any) -> None:
        try:
            self._samples = leading_dim(batch)
        except Exception:
            self._samples = None
        if self.first_batch is not None:
            check, self.first_batch = self.first_batch, None
            check(batch)

    def _end_block(self, side: _Side, rec: EpochRecord, now: int, write: bool) -> None:
        """A block is over: its closing stamp is the next step's start (taken now)."""
        if side.name == "real":
            if len(rec.starts) == len(rec.ready):
                rec.starts.append(now)
            if rec.warmup == self.plan.drain and len(self._sides["real"].epochs) > 1:
                rec.warmup = self._drained(rec)
        else:
            if len(rec.starts) == rec.expected:  # (a block's iterator stamps its own end)
                rec.starts.append(now)
            rec.last_end_known = True
        rec.end_ns = now
        rec.status = "complete"
        side.spans[-1] = (side.spans[-1][0], now)
        rec.finished = True
        if write:
            self._journal(side)

    def _end_pass(
        self,
        side: Optional[_Side],
        rec: Optional[EpochRecord],
        status: str,
        exhausted: bool,
        src: Any,
        copies: Optional[CopyTimer],
        everything: list[int],
        first_index: dict[int, int],
    ) -> None:
        now = self.clock()
        try:
            if cuda_in_use():
                cuda_synchronize()
            if side is not None and rec is not None and not rec.finished:
                if exhausted:
                    rec.status = "complete"
                    rec.end_ns = now
                    side.spans[-1] = (side.spans[-1][0], now)
                    rec.finished = True
                    self._journal(side)
                else:
                    rec.end_ns = now
                    rec.status = status
                    side.spans[-1] = (side.spans[-1][0], now)
                    rec.finished = True
                    self._journal(side)
            if copies is not None:
                copies.uninstall()
                per = copies.per_step(len(everything))
                for s in self._sides.values():
                    for r in s.epochs:
                        i = first_index.get(id(r))
                        if i is not None and r.copies is None:
                            r.copies = per[i : i + len(r.starts)]
            if self._sampler is not None:
                self._sampler.pause()
            if not getattr(self.dataloader, "persistent_workers", False):
                shutdown_source(src)
            end_prepared_epoch(self.dataloader)
            if not self.cache.ready:
                self.cache.seal()
            else:
                self.cache.check_mutation()
        finally:
            self._src = None
            self._open = None
            self._sigint.uninstall()

    def _drained(self, rec: EpochRecord) -> int:
        """Steps at the start of a real block that follows an ideal one, to leave out.

        The first ``prefetch_factor × num_workers`` came from the queue the workers filled
        while the ideal block ran; the workers also got ahead while those were served, so
        the next few come early too. The block is steady from its first step that waited
        for its batch (or, for a loader that keeps ahead of the loop, after the queue)."""
        depth = self.depth
        ideal = self._sides["ideal"].epochs
        ref = 0
        if ideal:
            st = ideal[-1].starts
            if len(st) > 1:
                ref = (st[-1] - st[0]) // (len(st) - 1)
        starts, ready = rec.starts, rec.ready
        queued = sorted(ready[i] - starts[i] for i in range(min(depth, len(ready))))
        # a batch taken from the queue still costs its hand-over (unpickling, pinning)
        waited = max(WAITED_NS, ref // 20, 2 * queued[len(queued) // 2] if queued else 0)
        for i in range(depth, len(ready)):
            if ready[i] - starts[i] > waited:
                return min(i, self.plan.drain)
        return depth  # no step waited: the loader keeps ahead, only the queue came early

    def _side_steps(self, name: str) -> int:
        return sum(len(r.starts) for r in self._sides[name].epochs)

    def _converged(self) -> bool:
        """Adaptive: each side's step time known to ± ``rel`` (as :class:`AutoStop` asks of
        one run), over two A B B A cycles at least."""
        assert self.auto_stop is not None
        runs = [self._run(s) for s in SIDES]
        mine = min(len(r.epochs) for r in runs) >= 2 * MIN_BLOCKS and all(
            self.auto_stop.precise_enough(r.steady_step_s()) for r in runs
        )
        agreed = agree("adaptive stop of the interleaved pass", mine)
        # under a process group every rank stops at the same cycle: when all are precise
        return mine if agreed is None else all(agreed)

    def _journal(self, side: _Side) -> None:
        if side.writer is None:
            return
        with self._lock:
            try:
                side.writer.epoch_ended(
                    lambda e, t: self._run(side.name, first_epoch=e, first_tick=t)
                )
            except Exception:  # never lose the run over a bad path
                side.writer = None

    # -- results ----------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return sum(self._side_steps(s) for s in SIDES)

    def to_runs(self) -> dict[str, Run]:
        """``{"real": Run, "ideal": Run}``: each side's blocks as its epochs."""
        return {s: self.to_run(s) for s in SIDES}

    def to_run(self, side: str = "real") -> Run:
        s = self._sides[side]
        return s.final if s.final is not None else self._run(side)

    def _run(self, name: str, first_epoch: int = 0, first_tick: int = 0) -> Run:
        s = self._sides[name]
        t0 = self._t0 or 0
        real = name == "real"
        util = None
        if self._sampler is not None:
            util = _ticks_within(self._sampler.series(t0), s.spans, t0, first_tick)
        return build_run(
            s.epochs[first_epoch:],
            first_epoch=first_epoch,
            mode="log" if real else "replay",
            measure_wait=real,
            t0_ns=t0,
            now_ns=self.clock(),
            warmup=self.warmup,
            label=s.label,
            loader=self._loader_info,
            settings={
                "num_cached_batches": self.num_cached_batches,
                "batches_cached": len(self.cache.batches) if self.cache.ready else 0,
                "max_steps": self.steps,
                "auto_stop": self.auto_stop.to_dict() if self.auto_stop is not None else None,
                "cache_on": None if real else self.cache_on,
                "cache_bytes": None if real else self.cache.nbytes,
                "cache_budget_bytes": self.cache_budget_bytes,
                "cached_shapes_differ": None if real else self.cache.shapes_differ,
                "interleaved": {
                    "block": self.plan.block,
                    "blocks": self.plan.blocks,
                    "drain": self.plan.drain,
                    "settle": self.plan.settle,
                    "pass_steps": self.plan.total_steps if self.auto_stop is None else None,
                    "epoch": self.loader_len,
                    "ranks": self.ranks,
                },
            },
            environment=environment(step_path()),
            samples_per_batch=self._samples if real else self.cache.samples_per_batch,
            short_last_batch=False,
            auto_stop=self.auto_stop is not None,
            util=util,
            worker_load_ns=(
                self._timer.load_ns() if real and self._timer and self._timer.available else None
            ),
        )

    # -- life cycle ------------------------------------------------------------------
    def close(self) -> None:
        """End a pass still open, stop the samplers and the workers this wrapper started,
        and fold each side's journal into its run log."""
        if self._open is not None:
            self._open.close()
        if self._sampler is not None:
            self._sampler.stop()
        if self._timer is not None:
            self._timer.close()
        if self._started_persistent:
            shutdown_persistent_workers(self.dataloader)
            self._started_persistent = None
        if not self._closed:
            self._closed = True
            for s in self._sides.values():
                s.final = self._run(s.name)
                if s.writer is not None:
                    try:
                        s.writer.write_all(s.final)
                    except Exception:
                        pass

    def release(self) -> None:
        """:meth:`close`, then let go of the replay cache."""
        self.close()
        self.cache.release()

    def __enter__(self) -> InterleavedEvaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- live reading ---------------------------------------------------------------
    @property
    def util_sampler(self) -> Optional[UtilSampler]:
        return self._sampler

    @property
    def started_ns(self) -> Optional[int]:
        return self._t0

    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns`` (None: between blocks or outside the pass)."""
        for name, s in self._sides.items():
            for a, b in reversed(s.spans):
                if a <= t_ns and (b is None or t_ns <= b):
                    return name
        return None

    def worker_pids(self) -> set[int]:
        workers = getattr(self._src, "_workers", None) or ()
        return {w.pid for w in workers if getattr(w, "pid", None) is not None}

    def steps_since(
        self, side: str, cursor: tuple[int, int] = (0, 0)
    ) -> tuple[list[int], tuple[int, int]]:
        """``side``'s step times (ns) completed since ``cursor`` (block, step), and the
        new cursor. Safe to call from another thread while the loop runs."""
        e, i = cursor
        out: list[int] = []
        epochs = self._sides[side].epochs
        real = side == "real"
        while e < len(epochs):
            rec = epochs[e]
            if not rec.finished:
                starts = rec.starts
                n = len(starts) - 1
                out.extend(starts[k + 1] - starts[k] for k in range(i, n))
                return out, (e, max(i, n))
            out.extend(epoch_steps(rec, measure_wait=real).step_ns[i:])
            e, i = e + 1, 0
        return out, (e, i)


def _ticks_within(
    series: dict[str, Any], spans: list[tuple[int, Optional[int]]], t0: int, first: int = 0
) -> dict[str, Any]:
    """``series`` (times relative to ``t0``) cut to the ticks inside ``spans``, from the
    ``first`` of those on."""
    t = series.get("t_ns") or []
    inside = [any(a - t0 <= x and (b is None or x <= b - t0) for a, b in spans) for x in t]
    keep, seen = [], 0
    for k in inside:
        keep.append(k and seen >= first)
        seen += k

    def cut(v: Any) -> Any:
        if isinstance(v, list) and len(v) == len(t):
            return [x for x, k in zip(v, keep) if k]
        if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == len(t) for x in v):
            return [[x for x, k in zip(d, keep) if k] for d in v]
        return v

    out = {k: cut(v) for k, v in series.items()}
    for part in ("gpu", "cpu"):
        if isinstance(series.get(part), dict):
            out[part] = {k: cut(v) for k, v in series[part].items()}
    return out


def _worker_pids(ref: weakref.ref[InterleavedEvaluator]) -> Optional[set[int]]:
    ev = ref()
    return ev.worker_pids() if ev is not None else None
