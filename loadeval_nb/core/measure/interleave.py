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
* with CUDA, each block is also timed on the GPU: an event where its steady steps may
  begin and one at its end (read once the pass's closing synchronise has run; nothing
  waits for the GPU on the way). A loop that never reads a result back runs ahead of
  its GPU by up to the launch queue: an ideal block that follows a real one (whose GPU
  sat idle waiting for data) would be timed at the pace the host queues work, its
  queued work landing in the next block. The events run at the GPU's pace, so a block
  whose span between them is longer than on the host's clock gets the difference on
  its last step (as an epoch's closing synchronise is charged), and a block that waited
  for data (GPU idle) keeps its host time;
* with ``contention=True`` a third arm, ``contended``, serves cached batches too, while a
  thread keeps drawing the real loader's batches (as many as the block serves, at most)
  and drops them: the ideal with the loader's work still on the machine. Real minus
  contended is the time spent waiting for data, contended minus ideal the CPU (and the
  hand-over of batches) that loading takes from the step. Its blocks are half the
  pair's, and a round goes R C I I C R: a real block follows only a contended one (the
  loader never stopped), so it leaves out the queue's depth, not a drain, and the arm
  adds about a quarter to the pass (``contention=None``, :class:`RunSettings`' default:
  only where that holds within the loader's epoch). A loader without workers
  (``num_workers=0``) loads in the loop's own thread: the arm would measure nothing
  else, so it is left out, and the runs' settings say why;
* the cache is a sample of the stream, not of its first batches: the steps a real block
  leaves out at its start (the queue drained) have their batches sampled — their size
  (the non-padding tokens of a batch with an attention mask, else its elements) kept,
  and each may take a cached batch's place (reservoir sampling over every batch sampled).
  The run logs keep the sampled sizes and the sizes of the batches each replaying arm
  served, step by step, so the verdict can say how far the cache is from the stream and
  size-match the ideal;
* the loop is never handed more batches than the loader would hand it: the pass fits in
  ``len(loader)`` where that bounds the epoch (a DataLoader over a map-style dataset, a
  list); for any other loader (an IterableDataset, whose ``__len__`` is the user's word, a
  stream without one, a subclass that counts its own way) every replayed step is paid
  for ahead: before a block of another arm than real, as many real batches as it will
  serve are drawn and dropped (between blocks, outside every step's time; their sizes
  join the stream's sample), and where the loader ends first, so does the pass;
* each block is an epoch of its side's :class:`~loadeval_nb.Run` (its own
  ``warmup`` in the epoch's summary), so the verdict pairs block *k* of one side
  with block *k* of the other: the spread between blocks is in its interval.

Each arm is data (:mod:`.arms`): the pass walks its plan's blocks and hands each to its
arm (:data:`~.arms.KINDS` for a pair's arms, or the ``arms`` it is given: the straggler
proof's), which serves it, says what it leaves out and what its run log keeps.

What it costs, against a real run then an ideal run of the same ``steps``: the
ideal's second start of the loader and its ``num_cached_batches`` batches of cache
fill and its warm-up are gone; ``drain`` steps at each of ``2 × blocks`` changes of side
come in (4 batches each with 2 workers and ``prefetch_factor=2``).
"""

from __future__ import annotations

import inspect
import sys
import weakref
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import Any, Callable, Optional

from .._env import (
    agree,
    cuda_in_use,
    cuda_synchronize,
    epoch_bound,
    interrupts_deferred,
    loader_settings,
)
from .._errors import check_int
from .._files import expand_path
from ..errors import LoadEvalError
from ..record.run import Run, step_metrics
from ..record.runlog import check_metrics_file
from .adaptive import AutoStop
from .arms import DRAW_SWITCH_S as DRAW_SWITCH_S
from .arms import Arm, Block, PassState, arms_for
from .base import Evaluator
from .blocks import MIN_BLOCKS, SIDES, WAITED_NS, PassPlan, queue_depth
from .blocks import NotInterleavable as NotInterleavable  # (the faces import them from here)
from .blocks import plan_blocks as plan_blocks
from .blocks import plan_pass as plan_pass
from .build_run import LogWriter, run_settings
from .cache import ReplayCache, nothing_to_measure
from .config import EvaluatorConfig
from .copies import CopyTimer
from .loader import TUNABLE, shutdown_persistent_workers
from .modes import LoaderStart
from .resource import resource_text
from .sampler import ticks_within
from .stream import Stream
from .timing import (
    Clock,
    EpochRecord,
)
from .variant import VARIANT, Variant


class _Side:
    """What the loop recorded of one side: its blocks (epochs) and its run log."""

    def __init__(self, name: str, label: str, metrics_file: Optional[str]) -> None:
        self.name = name
        self.label = label
        self.epochs: list[EpochRecord] = []
        self.metrics_file = metrics_file
        self.log = LogWriter(metrics_file, eager=True) if metrics_file else None
        self.final: Optional[Run] = None
        self.spans: list[tuple[int, Optional[int]]] = []
        """(start, end) clock of each block, for the utilisation ticks of this side."""


class InterleavedPass(Evaluator):
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
            at every block's end; or ``metrics_file``: one name, the two logs beside it
            (``run.json``: ``run-real.json`` and ``run-ideal.json``).
        first_batch: called with the first real batch (a check the caller makes).
        contention: a third arm, ``contended`` (see the module's notes): the ideal with
            the loader still producing, which splits the headroom into waiting for data
            and the CPU loading takes; None: where it is cheap (a loader with workers, the
            arm adding at most a quarter to the pass within its epoch: ``RunSettings``'
            default). Left out (and said) for a loader without workers.
        representative: the cache a sample of the whole real stream (see the module's
            notes), the sizes of the batches served and of the stream kept for the verdict.
        variant: a fourth arm, ``variant`` (:mod:`.variant`): the loader rebuilt with other
            settings (``"num_workers=4"``, ``{"pin_memory": True}``, a :class:`Variant`),
            its blocks interleaved with the real ones, each of its batches taking a real
            batch's place in the epoch; its workers are stopped after the pass. A loader
            that cannot be rebuilt is one sentence.
        planned: the pass's plan as :func:`plan_pass` made it for these settings (a front
            end that asked whether the pass interleaves hands its answer on: the plan is
            made, and agreed over a process group, once); None: made here.
        arms: the pass's arms by name (:mod:`.arms`), for a plan whose arms are not an
            interleaved pair's (the straggler proof's); None: each of the plan's arms of
            its kind (:func:`~.arms.arms_for`).
    """

    mode = "pair"
    sides: tuple[str, ...] = SIDES

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
        metrics_file: Optional[str] = None,
        contention: Optional[bool] = False,
        representative: bool = True,
        variant: Any = None,
        planned: Optional[PassPlan] = None,
        arms: Optional[dict[str, Arm]] = None,
    ) -> None:
        self.variant: Optional[Variant] = Variant.of(variant) if variant is not None else None
        """The settings the variant arm tries (None: no variant arm)."""
        self._check(
            dataloader,
            cache_on=cache_on,
            num_cached_batches=num_cached_batches,
            warmup=warmup,
            cache_budget_bytes=cache_budget_bytes,
            sample_interval_s=sample_interval_s,
            label=label,
        )
        if metrics_file is not None:
            if metrics_files is not None:
                raise LoadEvalError(
                    "metrics_file and metrics_files both name the run logs; pass one of them."
                )
            check_metrics_file(metrics_file)
        if steps == "auto":
            auto_stop = auto_stop or AutoStop()
        check_int("blocks", blocks, MIN_BLOCKS, allow_none=True)
        if blocks is not None and blocks % 2:
            raise LoadEvalError(
                f"blocks must be an even number (A B B A cycles of 2 blocks a side), not {blocks}."
            )
        self._start(dataloader, clock, sample_interval_s, label)
        self.auto_stop = auto_stop
        self.warmup = warmup
        self.num_cached_batches = num_cached_batches
        self.cache_on = cache_on
        self.worker_timing = bool(worker_timing)
        self.depth = queue_depth(dataloader)
        """This loader's queue (the drain rule reads it); the plan's is the deepest rank's."""
        if auto_stop is None:
            check_int("steps", steps, 1)
        per_side = auto_stop.max_steps if auto_stop is not None else steps
        self._variant_loader: Any = planned.variant if planned is not None else None
        if self.variant is not None and self._variant_loader is None:
            # (one sentence for a loader that cannot be rebuilt; a plan made for it has it)
            self._variant_loader = self.variant.rebuild(dataloader)
        plan, self.loader_len, self.ranks, _ = planned or plan_pass(
            dataloader,
            steps=per_side,
            warmup=warmup,
            num_cached_batches=num_cached_batches,
            blocks=blocks,
            auto_stop=auto_stop,
            contention=contention,
            variant=self._variant_loader,
        )
        self.plan = plan
        self.contention: Optional[str] = plan.no_contention
        """Without the contended arm though it was asked for, or would be on by default:
        why (else None)."""
        self.sides = plan.arms
        """The arms this pass serves: ``real`` and ``ideal``, and ``contended`` if asked."""
        self._arms = arms if arms is not None else arms_for(plan.arms)
        if set(self._arms) != set(plan.arms):
            raise LoadEvalError(
                f"The pass's arms ({', '.join(self._arms)}) are not its plan's "
                f"({', '.join(plan.arms)})."
            )
        if metrics_file is not None:  # one log per arm the plan serves, never guessed
            metrics_files = side_paths(expand_path(metrics_file), plan.arms)
        self.steps = per_side
        """Steps per side (warm-up included), as for one run."""
        self.cache = ReplayCache(
            num_cached_batches, cache_on=cache_on, budget_bytes=cache_budget_bytes, device=device
        )
        self.cache_budget_bytes = cache_budget_bytes
        files = metrics_files or {}
        self._sides = {
            s: _Side(s, (label or s) if s == "real" else s, files.get(s)) for s in self.sides
        }
        # the real side's loader, started as a real run starts it (LogMode's LoaderStart)
        self.real_start = LoaderStart(
            EvaluatorConfig(
                dataloader=dataloader,
                clock=self.clock,
                steps=self.steps,
                warmup=warmup,
                auto_stop=auto_stop,
                worker_timing=self.worker_timing,
                num_cached_batches=num_cached_batches,
                cache_on=cache_on,
                cache_budget_bytes=cache_budget_bytes,
                device=device,
                first_batch=first_batch,
            )
        )
        # the variant arm's loader, started as the real one is, never timed in its workers
        self.variant_start: Optional[LoaderStart] = None
        """The variant's loader, as the pass starts it (None: no variant arm)."""
        if self._variant_loader is not None:
            self.variant_start = LoaderStart(
                replace(
                    self.real_start.ev,
                    dataloader=self._variant_loader,
                    worker_timing=False,
                    first_batch=None,
                )
            )
        self.variant_depth = queue_depth(self._variant_loader) if self.variant_start else 0
        self.representative = bool(representative)
        self.bound = epoch_bound(dataloader)
        """The loader's ``len()`` where it bounds an epoch; None: replayed steps are paid for
        ahead (see the module's notes)."""
        self.epoch_seen: Optional[int] = None
        """Batches the loader held, where a pass drew them all (it ran out)."""
        self.stream = Stream(self.cache, self.representative, self._served_real)
        """The real stream: what was drawn, a sample of its sizes, the cache's reservoir
        (the arms are given it)."""
        self._open: Optional[weakref.ref[Generator[Any, None, None]]] = None
        """The pass being served (weakly: a loop that drops it, by ``break`` or as a zip
        left behind, ends it, as a DataLoader's own iterator stops its workers then)."""
        self._closing = False
        """A pass is being closed by :meth:`close` or a new ``iter()`` (not finalized)."""
        self.workers_seen: dict[str, set[int]] = {}
        """The worker pids each loader of the pass started, by arm (``real``, ``variant``)."""
        self._blocks: list[tuple[str, EpochRecord]] = []
        """Every block served, in the pass's order: its arm and its record."""
        self._pass_token: Optional[object] = None
        self.block_now: Optional[tuple[str, int]] = None
        """The side and number (from 1) of the block being served, or last served."""

    # -- DataLoader look-alike -------------------------------------------------
    def __len__(self) -> int:
        if self.auto_stop is not None:  # at most: both sides' max_steps and the drains
            most = sum(a.most_steps(self) for a in self._arms.values())
            return most if self.loader_len is None else min(most, self.loader_len)
        return self.plan.total_steps

    @property
    def cached_batches(self) -> list[Any]:
        """The batches the ideal side replays (empty before the warm-up filled them), as
        :attr:`LoaderEvaluator.cached_batches`."""
        return self.cache.batches

    def __repr__(self) -> str:
        p = self.plan
        return (  # the wrapper a user holds in every mode
            f"LoaderEvaluator({type(self.dataloader).__name__}, mode='pair', arms "
            f"{', '.join(self.sides)}, {p.blocks} blocks of {p.block} steps an arm, "
            f"cached={len(self.cached_batches)})"
        )

    def __iter__(self) -> Iterator[Any]:
        old = self._open() if self._open is not None else None
        if old is not None and inspect.getgeneratorstate(old) != inspect.GEN_CREATED:
            self._closing = True
            try:
                old.close()  # a pass left open: its generator's finally closes it
            finally:
                self._closing = False
        # (one never started is left as it is: started later, it says what went wrong,
        # where closing it would have made it an empty loop, silently)
        token = object()
        self._pass_token = token
        gen = self._pass(token)
        self._open = weakref.ref(gen)
        return gen

    # -- the pass --------------------------------------------------------------
    def _pass(self, token: object) -> Generator[Any, None, None]:
        if self._pass_token is not token:
            raise LoadEvalError(
                "This pair was iterated twice at once (zip(ev, ev), or a second iter() before "
                "the first was used): one interleaved pass serves one loop; iterate it once "
                "per pass, or wrap each loader in an evaluator of its own."
            )
        clock, arms = self.clock, self._arms
        self._begin_pass()
        self.stream.restart()  # (a new start of the loader: nothing paid for yet)
        self._blocks = []
        first_pass = not self.cache.ready
        filling = first_pass and any(a.replays for a in arms.values())
        if filling:
            self.cache.start(self.dataloader)
        t = clock()
        src = self.real_start.open()
        setup = clock() - t
        # the variant's loader starts now too: its workers start while the warm-up runs
        st = PassState(src, filling=filling, first=first_pass)
        st.vsrc = self.variant_start.open() if self.variant_start is not None else None
        for name, start in (("real", self.real_start), (VARIANT, self.variant_start)):
            if start is not None:
                self.workers_seen.setdefault(name, set()).update(start.worker_pids())
        everything: list[int] = []  # every step's start, for the copy timer
        copies: Optional[CopyTimer] = None
        if cuda_in_use():
            copies = CopyTimer(everything, "cuda", None)
            copies.install()
        plan = self.plan
        blocks = plan.block_steps()
        rec: Optional[EpochRecord] = None
        side: Optional[_Side] = None
        first_index: dict[int, int] = {}
        edges: list[tuple[EpochRecord, dict[int, Any], Any]] = []  # CUDA: the GPU's spans
        status = "complete"
        exhausted = at_len = False
        reason = "stopped"
        k = n_steps = 0
        switch = sys.getswitchinterval()
        if any(a.threaded for a in arms.values()):  # (every arm alike: see DRAW_SWITCH_S)
            sys.setswitchinterval(min(switch, DRAW_SWITCH_S))
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
                    cycle_ = plan.block_steps(plan.cycle(), blocks[-1][0])
                    if self.loader_len is not None and sum(b[1] for b in blocks + cycle_) > (
                        self.loader_len
                    ):  # the epoch's end: the loop is never handed more than len(loader)
                        exhausted = at_len = True
                        break
                    blocks += cycle_  # one more A B B A cycle
                name, n_steps, skip = blocks[k]
                arm = arms[name]
                if (
                    arm.pays_ahead
                    and self.bound is None
                    and not self.stream.pay_ahead(src, n_steps)
                ):
                    exhausted = True  # the loader's epoch ends before this block's steps
                    break
                side = self._sides[name]
                self.block_now = (name, len(side.epochs) + 1)
                rec = EpochRecord(setup_ns=setup if k == 0 else 0, warmup=skip)
                rec.prepare(clock)  # the C path's stamp arrays, where it is there
                rec.expected = n_steps
                setup = 0
                first_index[id(rec)] = len(everything)
                side.epochs.append(rec)
                side.spans.append((clock(), None))
                self._blocks.append((name, rec))
                b = Block(k, n_steps, skip, rec)
                todo = n_steps
                if copies is None and not st.filling:
                    # the steady path: a block is one stamping iterator (C, or C-level
                    # iterators of the standard library), the pass resumes between blocks
                    exhausted = yield from arm.steady(self, st, b)
                    if exhausted:
                        if k == 0 and not len(rec.ready):
                            raise LoadEvalError(nothing_to_measure(self.dataloader))
                        break
                    todo = 0  # (served: the loop below is the filling and CUDA path)
                # CUDA: an event at each step where the block's steady steps may begin (a
                # real block after an ideal one decides at its end how many came early)
                marks: dict[int, Any] = {}
                first_steady = arm.first_steady(self, b, len(side.epochs) > 1)
                starts = rec.starts
                arm.open_steps(self, st, b, todo)
                try:
                    for i in range(todo):
                        if copies is not None and first_steady <= i <= skip:
                            marks[i] = copies.event()
                            marks[i].record()
                        now = clock()
                        starts.append(now)
                        everything.append(now)
                        try:
                            batch = arm.step(self, st, b, i)
                        except StopIteration:
                            if k == 0 and i == 0:
                                raise LoadEvalError(nothing_to_measure(self.dataloader)) from None
                            exhausted = True
                            break
                        yield batch
                finally:
                    exhausted = arm.close_steps(self, st, b) or exhausted
                if exhausted:
                    break
                # the run logs are written where the next block leaves out its first steps
                # anyway (a change of side), or at the end, never inside a side's stretch
                last = k + 1 >= len(blocks) and self.auto_stop is None
                if copies is not None and marks:
                    edges.append((rec, marks, copies.event()))
                    edges[-1][2].record()
                self._end_block(
                    side, rec, clock(), last or blocks[min(k + 1, len(blocks) - 1)][0] != name
                )
                rec = None
                k += 1
        except GeneratorExit:
            # a framework that stops asking once it has len() batches (Lightning) leaves
            # after the pass's last batch: the pass is complete, its last step's end unknown
            # (CUDA: the block's queued work is its, as an epoch's closing synchronise is)
            if copies is not None:
                cuda_synchronize()
            last = k == len(blocks) - 1 and self.auto_stop is None
            status = (
                "complete" if last and rec is not None and len(rec.starts) >= n_steps else "stopped"
            )
        except BaseException:
            status = "stopped" if self._sigint.at is not None else "source-error"
            raise
        finally:
            sys.setswitchinterval(switch)
            try:
                with interrupts_deferred():
                    if exhausted and not at_len:  # the loader ran out: its epoch, counted
                        self.epoch_seen = self.stream.drawn()
                    if self.auto_stop is not None:  # why the adaptive pass ended, on its blocks
                        why = "loader exhausted" if exhausted else reason
                        for s in self._sides.values():
                            for r in s.epochs:
                                r.auto_reason = r.auto_reason or why
                    self._end_pass(
                        side, rec, status, exhausted, st, copies, everything, first_index, edges
                    )
            except KeyboardInterrupt:
                held = self._open() if self._open is not None else None  # (no call of
                # ours here: a Ctrl-C at its return would be lost too)
                if self._closing or (held is not None and self._pass_token is token):
                    raise
                # the loop let go of the pass (a break, a zip left behind) and Python is
                # finalizing it: an exception cannot leave a finalizer (Python prints it as
                # "ignored" and drops it), so the Ctrl-C that came meanwhile ends here, the
                # finishing path above done (the first Ctrl-C, which let go of the loop, has
                # already gone up to the user)

    def _end_block(self, side: _Side, rec: EpochRecord, now: int, write: bool) -> None:
        """A block is over: its closing stamp is the next step's start (taken now)."""
        self._arms[side.name].end_block(self, rec, now)
        self._seal(side, rec, now, "complete", write)

    def _seal(self, side: _Side, rec: EpochRecord, now: int, status: str, write: bool) -> None:
        """A block ends at ``now`` with ``status``: its span closed, its run log written."""
        rec.end_ns = now
        rec.status = status
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
        st: PassState,
        copies: Optional[CopyTimer],
        everything: list[int],
        first_index: dict[int, int],
        edges: Optional[list[tuple[EpochRecord, dict[int, Any], Any]]] = None,
    ) -> None:
        now = self.clock()
        try:
            if cuda_in_use():
                cuda_synchronize()
            if side is not None and rec is not None and not rec.finished:
                self._seal(side, rec, now, "complete" if exhausted else status, True)
            for block, marks, end in edges or ():
                _gpu_tail(block, marks, end)
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
            self.real_start.end_pass(st.src, left_early=True)
            if self.variant_start is not None:  # the pass's own loader: its workers go with it,
                # persistent or not (the user's loader keeps its persistent ones)
                self.variant_start.end_pass(st.vsrc, left_early=True)
                st.vsrc = None
                shutdown_persistent_workers(self._variant_loader)
            if not self.cache.ready:
                self.cache.seal()
            else:
                self.cache.check_mutation()
        finally:
            self.real_start.src = None
            self._open = None
            self._sigint.uninstall()

    def _served_real(self) -> int:
        """The real loader's batches the loop was served."""
        return sum(
            len(r.ready)
            for n, a in self._arms.items()
            if a.serves_real
            for r in self._sides[n].epochs
        )

    def drained(self, rec: EpochRecord, depth: Optional[int] = None, most: int = 0) -> int:
        """Steps at the start of a real block that follows an ideal one, to leave out.

        The first ``prefetch_factor × num_workers`` came from the queue the workers filled
        while the ideal block ran; the workers also got ahead while those were served, so
        the next few come early too. The block is steady from its first step that waited
        for its batch (or, for a loader that keeps ahead of the loop, after the queue). The
        variant arm's blocks the same, with its loader's ``depth`` and at most ``most``."""
        depth = self.depth if depth is None else depth
        most = most or self.plan.drain
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
                return min(i, most)
        return depth  # no step waited: the loader keeps ahead, only the queue came early

    def epochs_of(self, arm: str) -> list[EpochRecord]:
        """The blocks ``arm`` has served so far, as its run's epochs."""
        return self._sides[arm].epochs

    def _side_steps(self, name: str) -> int:
        return sum(len(r.starts) for r in self._sides[name].epochs)

    def _converged(self) -> bool:
        """Adaptive: over two A B B A cycles at least, the :class:`AutoStop`'s ``until``
        says the runs so far settle the pair, or, without one, each side's step time is
        known to ± ``rel`` (as it asks of one run)."""
        assert self.auto_stop is not None
        # the pair's sides: the split's arm is measured alongside, its interval as it comes
        runs = [self._run(s) for s in SIDES]
        until = self.auto_stop.until
        mine = min(len(r.blocks) for r in runs) >= 2 * MIN_BLOCKS and (
            until(*runs)
            if until is not None  # (the pair's own rule: its interval tells)
            else all(self.auto_stop.precise_enough(r.steady_step_s()) for r in runs)
        )
        agreed = agree("adaptive stop of the interleaved pass", mine)
        # under a process group every rank stops at the same cycle: when all are precise
        return mine if agreed is None else all(agreed)

    def variant_settings(self) -> dict[str, Any]:
        """The variant's loader's settings, as its run log keeps them: the real loader's,
        with what the variant changed as the rebuilt loader took it (a loader rebuilt
        around the real one's batch sampler reports no ``batch_size`` of its own)."""
        built = loader_settings(self._variant_loader)
        return {**self._loader_info, **{k: built.get(k) for k in TUNABLE}}

    def _journal(self, side: _Side) -> None:
        if side.log is not None:
            side.log.epoch_ended(lambda e, t: self._run(side.name, first_epoch=e, first_tick=t))

    # -- results ----------------------------------------------------------------
    def spans(self) -> list[tuple[str, int, int]]:
        """Each whole block of the pass (the last one begun) served so far, in its order,
        as (arm, steady steps, their span in ns): the blocks up to the first one the loop
        left inside, or is inside now, or in which the loader ran out."""
        out = []
        for name, rec in self._blocks:
            n = rec.expected or 0
            if not rec.finished or rec.status != "complete" or len(rec.starts) < n:
                break
            if self._arms[name].live and len(rec.ready) < n:  # the loader ran out inside it
                break
            w = rec.warmup or 0
            end = rec.starts[n] if len(rec.starts) > n else rec.end_ns
            out.append((name, n - w, end - rec.starts[w] + rec.sync_ns))
        return out

    @property
    def total_steps(self) -> int:
        return sum(self._side_steps(s) for s in self.sides)

    def to_run(self, side: Optional[str] = None) -> Run:
        """``side``'s run (default: the real side's), its blocks as its epochs;
        :meth:`to_runs` gives both."""
        s = self._sides[side or "real"]
        return s.final if s.final is not None else self._run(s.name)

    def _run(self, name: str, first_epoch: int = 0, first_tick: int = 0) -> Run:
        s = self._sides[name]
        t0 = self._t0 or 0
        arm = self._arms[name]
        live = arm.live
        util = None
        if self._sampler is not None:
            util = ticks_within(self._sampler.series(t0), s.spans, t0, first_tick)
        plan = self.plan
        return self._build(
            s.epochs,
            first_epoch,
            mode="log" if live else "replay",
            measure_wait=live,
            label=s.label,
            loader=arm.loader_settings(self),
            settings=run_settings(
                num_cached_batches=self.num_cached_batches,
                steps=self.steps,
                auto_stop=self.auto_stop,
                cache_budget_bytes=self.cache_budget_bytes,
                cache=None if live else self.cache,
                cache_on=self.cache_on,
                batches_cached=len(self.cache.batches) if self.cache.ready else 0,
                method="blocks",
                interleaved={
                    "block": plan.block,
                    "blocks": plan.blocks,
                    "drain": plan.drain,
                    "settle": plan.settle,
                    "pass_steps": plan.total_steps if self.auto_stop is None else None,
                    "epoch": self.loader_len,
                    "epoch_seen": self.epoch_seen,
                    "ranks": self.ranks,
                    "arms": list(self.sides),
                    "epoch_limited": plan.epoch_limited,
                },
                **({"contention": self.contention} if self.contention else {}),
                **arm.log_settings(self),
            ),
            samples_per_batch=self.real_start.samples if live else self.cache.samples_per_batch,
            short_last_batch=False,
            util=util,
            worker_load_ns=self.real_start.worker_load_ns() if name == "real" else None,
        )

    # -- life cycle ------------------------------------------------------------------
    def close(self) -> None:
        """End a pass still open, stop the samplers and the workers this wrapper started,
        and fold each side's journal into its run log."""
        gen = self._open() if self._open is not None else None
        if gen is not None:
            self._closing = True
            try:
                gen.close()
            finally:
                self._closing = False
        if self._sampler is not None:
            self._sampler.stop()
        self.real_start.close()
        if self.variant_start is not None:
            self.variant_start.close()
        if not self._closed:
            self._closed = True
            for s in self._sides.values():
                s.final = self._run(s.name)
                if s.log is not None:
                    s.log.write_all(s.final)

    def release(self) -> None:
        """:meth:`close`, then let go of the replay cache."""
        self.close()
        self.cache.release()

    # -- DALI's methods, for both sides ----------------------------------------------
    @property
    def cache_ready(self) -> bool:
        return bool(self.cache.ready)

    @property
    def cache_bytes(self) -> Optional[int]:
        """Bytes held by the ideal side's cached batches."""
        return self.cache.nbytes

    def worker_load_ns(self) -> Optional[list[int]]:
        """The real side's per-batch production times in the workers (``worker_timing``)."""
        return self.real_start.worker_load_ns()

    def get_metrics(self) -> dict[str, Any]:
        """DALI's metrics (seconds) at the top level, as :meth:`LoaderEvaluator.get_metrics`
        gives them in every mode: the real arm's (the loader as it is), with the replay
        cache's ``cached_batches`` and ``cache_ready``; and each arm's beside them, by name
        (``m["real"]``, ``m["ideal"]``, ``m["contended"]``, ``m["variant"]``); ``{}`` before
        any batch."""
        arms = {}
        for side in self.sides:
            run = self.to_run(side)
            if run.n_steps:
                arms[side] = step_metrics(run, run.warmup)
        if not arms:
            return {}
        return {
            **arms.get("real", {}),
            "cached_batches": len(self.cached_batches),
            "cache_ready": self.cache_ready,
            **arms,
        }

    def save_metrics(self, filename: Optional[str] = None, *, quiet: bool = False) -> Optional[str]:
        """Write both sides' run logs: beside ``filename`` (``run.json``: ``run-real.json``
        and ``run-ideal.json``), or where ``metrics_files`` named them. Returns the real
        side's path, or None (with a message) if no name is known."""
        paths = side_paths(expand_path(filename), self.sides) if filename else None
        if paths is None:
            known = {s: self._sides[s].metrics_file for s in self.sides}
            paths = known if all(known.values()) else None
        if paths is None:
            print("No filename provided for saving metrics; pass save_metrics('run.json').")
            return None
        saved = {s: self.to_run(s).save(str(paths[s])) for s in self.sides}
        if not quiet:
            print(f"Metrics saved to: {saved['real']} and {saved['ideal']}")
        return saved["real"]

    def print_summary(self, file: Any = None) -> None:
        """Print each side's summary and the pass's plan."""
        p = self.plan
        lines = [
            "Loader Evaluator Summary:",
            "  Mode: pair (real and ideal steps interleaved in one loop)",
            f"  Plan: {p.blocks} blocks a side of {p.block} steady steps, A B B A",
            f"  Cache size: {len(self.cached_batches)}/{self.num_cached_batches}",
        ]
        m_all = self.get_metrics()
        for side in self.sides:
            m = m_all.get(side)
            if m is None:
                continue
            lines.append(
                f"  {side}: {m['total_batches']} steps ({m['steady_steps']} steady), "
                f"{m['total_time']:.2f}s"
            )
        # what the real side's workers spent their time on, as a real run's summary says it
        workers = resource_text(self.to_run("real").worker_resource)
        if workers:
            lines.append(f"  Workers: {workers}")
        print("\n".join(lines), file=file)

    def __enter__(self) -> InterleavedPass:
        return self

    # -- live reading ---------------------------------------------------------------
    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns`` (None: between blocks or outside the pass)."""
        for name, s in self._sides.items():
            for a, b in reversed(s.spans):
                if a <= t_ns and (b is None or t_ns <= b):
                    return name
        return None

    def worker_pids(self) -> set[int]:
        """The workers of the loader the block being served draws from: the variant's
        during its blocks, the real loader's otherwise (each arm's utilisation ticks, and
        the real run's reading of what its workers do, are its own loader's)."""
        now = self.block_now
        return self._arms[now[0] if now else "real"].loader(self).worker_pids()

    def _side_epochs(self, side: str) -> tuple[list[EpochRecord], bool]:
        return self._sides[side].epochs, self._arms[side].live


def _gpu_tail(rec: EpochRecord, marks: dict[int, Any], end: Any) -> None:
    """A block's steady span on the GPU (its event where its steady steps began to its
    closing event), read after the pass's closing synchronise: where it is longer than on
    the host's clock, the GPU was behind (work queued ahead), and the difference is the
    block's, charged to its last step. Never raises: an event the driver cannot time
    leaves the block as the host timed it."""
    w = rec.warmup or 0
    begin, starts = marks.get(w), rec.starts
    if begin is None or len(starts) < w + 2:  # (a sealed block has its closing stamp)
        return
    try:
        if hasattr(end, "query") and not end.query():
            return
        gpu = int(begin.elapsed_time(end) * 1e6)
    except Exception:
        return
    host = starts[len(starts) - 1] - starts[w]
    if gpu > host:
        rec.sync_ns += gpu - host


def side_paths(
    path: Optional[str], arms: tuple[str, ...] = SIDES
) -> Optional[dict[str, Optional[str]]]:
    """``run.json`` -> ``{"real": "run-real.json", "ideal": "run-ideal.json"}`` (and one
    for each further arm named)."""
    if path is None:
        return None
    base, dot, ext = path.rpartition(".")
    if not dot or "/" in ext:
        base, ext = path, "json"
    return {s: f"{base}-{s}.{ext}" for s in arms}
