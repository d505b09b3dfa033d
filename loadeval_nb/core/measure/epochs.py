"""A pair measured on the training loop's own epochs: for a loader whose epoch is too short
for blocks within it (a few dozen batches with workers: the cache fill and each change of
side's drained queue leave no steady steps), the loop's epochs are the blocks. Epoch by
epoch, one process serves the real loader (log mode) or a replay of cached batches of the
same length (replay mode) in A B B A order, so that a drift of the machine lands on both
sides, as the interleaved pass's blocks do within one epoch; the two run logs hold an
epoch per block, and the verdict pairs them (its interval: the blocks' t-interval united
with the steps' bootstrap).

Each epoch hands the loop exactly the loader's ``len()`` batches: the loop's own epoch,
its learning-rate schedule and its progress counters are kept (an ideal epoch trains on
replayed batches, as the ideal run always does).

With a variant (``--try``), a third side's epochs are the rebuilt loader's (log mode, its
own run log), in A B C C B A order: real, ideal, variant, variant, ideal, real, so that a
drift lands on all three; the verdict's ``tried`` pairs the variant's epochs with the real
ones as it pairs an interleaved pass's blocks.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, Optional

from .._env import safe_len
from ..record.run import DEFAULT_STEPS, EPOCH_PAIR, VARIANT, Run

ORDER = ("real", "ideal", "ideal", "real")
"""The sides of four epochs in turn (A B B A: a drift linear in time lands on both)."""
ORDER_VARIANT = ("real", "ideal", VARIANT, VARIANT, "ideal", "real")
"""With a variant: the three sides of six epochs in turn (A B C C B A)."""
EPOCHS = 8
"""Epochs in the schedule: 4 a side, the fewest a t-interval of their speedups is taken
from with some confidence (3 degrees of freedom)."""
PER_SIDE = EPOCHS // 2
MIN_EPOCHS = 4
"""Fewer epochs measured than this (the loop ended first): too few to pair, 2 a side."""
MIN_EPOCH_STEADY = 8
"""Fewest steady steps an epoch must leave after the warm-up to be a block of the pair
measured on the loop's epochs."""


def pair_epochs(steps: Any, epoch_len: int, sides: int = 2) -> int:
    """Epochs in the schedule for ``steps`` steps a side over an epoch of ``epoch_len``
    batches, ``sides`` sides (3 with a variant): whole epochs a side holding at least
    ``steps`` steps, never fewer than :data:`PER_SIDE` a side (``--steps N`` measures more
    of the loop's epochs, as the advice to narrow an interval asks). The default
    (:data:`DEFAULT_STEPS`), ``"auto"`` or anything else: :data:`PER_SIDE` a side."""
    if (
        isinstance(steps, bool)
        or not isinstance(steps, int)
        or steps <= 0
        or steps == DEFAULT_STEPS
        or epoch_len <= 0
    ):
        return PER_SIDE * sides
    return sides * max(PER_SIDE, math.ceil(steps / epoch_len))


class EpochPair:
    """Real and ideal epochs of one loader in A B B A order (see the module's notes).
    ``real`` and ``ideal`` are the two sides' wrappers (log and replay mode
    :class:`~.evaluator.LoaderEvaluator`, or their engines) over the same loader, each
    measuring whole epochs; each ``iter()`` is the loop's next epoch.
    ``variant`` (with ``settings``, what it changed): a log-mode wrapper of the loader
    rebuilt with other settings, a third side (A B C C B A)."""

    mode = "pair"

    def __init__(
        self,
        real: Any,
        ideal: Any,
        epochs: int = EPOCHS,
        variant: Optional[Any] = None,
        settings: Optional[dict[str, Any]] = None,
    ) -> None:
        self.order = ORDER if variant is None else ORDER_VARIANT
        self.wrappers = {"real": real, "ideal": ideal}
        """Each side's wrapper, by side."""
        if variant is not None:
            self.wrappers[VARIANT] = variant
            variant.log_settings[VARIANT] = dict(settings or {})
        self.epochs = epochs
        words = "".join("ABC"[("real", "ideal", VARIANT).index(s)] for s in self.order)
        self.order_words = words
        for side in self.wrappers.values():  # the logs say their blocks are the loop's epochs
            side.log_settings[EPOCH_PAIR] = {"epochs": epochs, "order": words}
            side.log_settings["method"] = "epochs"
        self.started = 0
        """Epochs handed out so far."""
        self.completed = dict.fromkeys(self.wrappers, 0)
        """Each side's epochs that ran to their end, or that the loop left past the warm-up
        (its own epoch, shorter than the loader's)."""
        self.handed = 0
        """Batches handed to the loop so far, over every epoch."""
        self._open: Optional[str] = None
        self._sampler: Optional[SidesSampler] = None

    def side_of(self, k: int) -> str:
        """The side of epoch ``k`` (from 0)."""
        return self.order[k % len(self.order)]

    @property
    def block_now(self) -> Optional[tuple[str, int]]:
        """(side, its block from 1) of the epoch being served; None between epochs."""
        if self._open is None:
            return None
        k = self.started - 1
        return self._open, sum(1 for j in range(k + 1) if self.side_of(j) == self._open)

    @property
    def last(self) -> bool:
        """The epoch being served (or last served) completes the schedule."""
        return self.started >= self.epochs

    @property
    def enough(self) -> bool:
        """Every side ran half of :data:`MIN_EPOCHS` epochs to their end (2 a side)."""
        return min(self.completed.values()) * 2 >= MIN_EPOCHS

    def __len__(self) -> int:
        return len(self.wrappers["real"])

    def __iter__(self) -> Iterator[Any]:
        side = self.side_of(self.started)
        self.started += 1
        self._open = side
        return self._epoch(side, iter(self.wrappers[side]))

    def _epoch(self, side: str, it: Iterator[Any]) -> Iterator[Any]:
        n = 0
        try:
            for batch in it:
                self.handed += 1
                n += 1
                yield batch
        except GeneratorExit:  # the loop left the epoch: past the warm-up, the loop's own
            # epoch is shorter than the loader's (a step limit an epoch), and it counts
            if n > getattr(self.wrappers[side], "warmup", 0):
                self.completed[side] += 1
            raise
        finally:
            self._open = None
        self.completed[side] += 1

    # -- live reading (:class:`~.live.LiveRun`: what a dashboard reads while it runs) --
    @property
    def sides(self) -> tuple[str, ...]:
        """The sides it measures: ``("real", "ideal")`` (and the variant's)."""
        return tuple(self.wrappers)

    @property
    def label(self) -> Optional[str]:
        return getattr(self.wrappers["real"], "label", None)

    @property
    def total_steps(self) -> int:
        """Steps measured so far, every side's."""
        return sum(int(w.total_steps) for w in self.wrappers.values())

    def to_run(self, side: Optional[str] = None) -> Run:
        """``side``'s run so far (default: the real side's)."""
        return self.wrappers[side or "real"].to_run()

    def to_runs(self) -> dict[str, Run]:
        """Each side's run so far."""
        return {s: w.to_run() for s, w in self.wrappers.items()}

    def steps_since(
        self, side: Any = None, cursor: Optional[tuple[int, int]] = None
    ) -> tuple[list[int], tuple[int, int]]:
        """``side``'s step times (ns) completed since ``cursor`` (its epoch, step), and the
        new cursor; ``steps_since(cursor)``: the real side's."""
        if not isinstance(side, str):
            side, cursor = "real", side if side is not None else cursor
        out: tuple[list[int], tuple[int, int]] = self.wrappers[side].steps_since(cursor)
        return out

    @property
    def started_ns(self) -> Optional[int]:
        """The clock value the first side's first epoch began at (None before)."""
        t = [x for w in self.wrappers.values() if (x := w.started_ns) is not None]
        return min(t) if t else None

    @property
    def util_sampler(self) -> Optional[SidesSampler]:
        """Every side's utilisation ticks as one series (each side samples during its own
        epochs only); None where sampling is off."""
        samplers = {s: w.util_sampler for s, w in self.wrappers.items()}
        if any(x is None for x in samplers.values()):
            return None
        if self._sampler is None:
            self._sampler = SidesSampler(samplers)
        return self._sampler

    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns``: the side whose sampler took that tick (the
        ticks :attr:`util_sampler` handed out), else the side whose epochs began last
        before it."""
        if self._sampler is not None:
            side = self._sampler.side_of(t_ns)
            if side is not None:
                return side
        began = [(t, s) for s, w in self.wrappers.items() if (t := w.started_ns) is not None]
        before = [x for x in began if x[0] <= t_ns]
        return max(before)[1] if before else None

    def worker_pids(self) -> set[int]:
        """The pids of the DataLoader worker processes of the epoch running now."""
        return set().union(*(w.worker_pids() for w in self.wrappers.values()))

    def release(self) -> None:
        """Let go of every side's replay cache (after :meth:`close`)."""
        for w in self.wrappers.values():
            w.release()

    # -- the engine of LoaderEvaluator(mode="pair") over a loader too short for blocks ---
    @property
    def cached_batches(self) -> list[Any]:
        """The batches the ideal side replays."""
        out: list[Any] = self.wrappers["ideal"].cached_batches
        return out

    @property
    def cache_ready(self) -> bool:
        return bool(self.wrappers["ideal"].cache_ready)

    @property
    def cache_bytes(self) -> Optional[int]:
        out: Optional[int] = self.wrappers["ideal"].cache_bytes
        return out

    @property
    def warmup(self) -> int:
        return int(getattr(self.wrappers["real"], "warmup", 0))

    def worker_load_ns(self) -> Optional[list[int]]:
        """The real side's per-batch times inside its workers (``worker_timing``)."""
        out: Optional[list[int]] = self.wrappers["real"].worker_load_ns()
        return out

    def get_metrics(self) -> dict[str, Any]:
        """DALI's metrics at the top level (the real side's), and each side's by name;
        ``{}`` before any batch."""
        sides = {s: m for s, w in self.wrappers.items() if (m := w.get_metrics())}
        if not sides:
            return {}
        return {**sides.get("real", {}), **sides}

    def save_metrics(self, filename: Optional[str] = None, *, quiet: bool = False) -> Optional[str]:
        """Write every side's run log: beside ``filename`` (``run.json``: ``run-real.json``,
        ``run-ideal.json``), or where they were named. Returns the real side's path."""
        if filename:
            base, dot, ext = filename.rpartition(".")
            if not dot or "/" in ext:
                base, ext = filename, "json"
            paths = [
                w.save_metrics(f"{base}-{s}.{ext}", quiet=quiet) for s, w in self.wrappers.items()
            ]
        else:
            paths = [w.save_metrics(None, quiet=quiet) for w in self.wrappers.values()]
        return paths[0]

    def print_summary(self, file: Any = None) -> None:
        """Each side's summary, after a line on the schedule."""
        print(
            f"Pair on the loop's epochs: {self.epochs} epochs, whole epochs a side in "
            f"{self.order_words} order",
            file=file,
        )
        for w in self.wrappers.values():
            w.print_summary(file)

    def __repr__(self) -> str:
        return (
            f"<LoaderEvaluator mode=pair on the loop's epochs ({self.epochs}, "
            f"{self.order_words}) of {len(self)} batches>"
        )

    def real_alone(self) -> None:
        """Before :meth:`close`: the real side's log is written as a run of its own (whole
        epochs of the loader measured, paired with none), for a pair that goes on in turn
        from there (a script that ended after too few epochs to pair)."""
        self.wrappers["real"].log_settings.pop(EPOCH_PAIR, None)
        self.wrappers["real"].log_settings["method"] = "runs"

    def close(self) -> None:
        """Close every side's wrapper, real first (the variant's stops the workers it
        started), each even if one before it raised."""
        with ExitStack() as stack:  # (its callbacks run last in, first out)
            for wrapper in reversed(list(self.wrappers.values())):
                stack.callback(wrapper.close)


class SidesSampler:
    """The sides' utilisation samplers read as one (for a live view: ``since(k)`` as
    :class:`~.sampler.UtilSampler`'s): each side samples during its own epochs only, so
    their ticks, merged in time, are the pass's; :meth:`side_of` says whose a tick was."""

    def __init__(self, samplers: dict[str, Any]) -> None:
        self.samplers = samplers
        self._owner: dict[int, str] = {}
        self._lock = threading.Lock()

    def since(self, k: Any) -> tuple[dict[str, list[Any]], dict[str, int]]:
        """Every side's ticks from cursor ``k`` (0 at first: a cursor per side after),
        merged in time order; the columns every side has."""
        cursors: dict[str, int] = dict(k) if isinstance(k, dict) else {}
        rows: list[tuple[int, str, dict[str, Any]]] = []
        columns: Optional[set[str]] = None
        for side, sampler in self.samplers.items():
            data, cursors[side] = sampler.since(cursors.get(side, 0))
            times = data.pop("t_ns")
            columns = set(data) if columns is None else columns & set(data)
            rows += [(t, side, {c: v[j] for c, v in data.items()}) for j, t in enumerate(times)]
        rows.sort(key=lambda row: row[0])
        with self._lock:
            self._owner.update((t, side) for t, side, _ in rows)
        out: dict[str, list[Any]] = {"t_ns": [t for t, _, _ in rows]}
        for c in sorted(columns or ()):
            out[c] = [row[c] for _, _, row in rows]
        return out, cursors

    def side_of(self, t_ns: int) -> Optional[str]:
        """The side whose sampler took the tick at ``t_ns`` (one handed out by
        :meth:`since`), or None."""
        with self._lock:
            return self._owner.get(t_ns)


def epochs_fit(loader: Any, warmup: int, steps: Any = None) -> Optional[int]:
    """The loader's epoch where the pair is measured on the loop's epochs: a length that
    leaves :data:`MIN_EPOCH_STEADY` steady steps after the warm-up, and an epoch that is
    what limits a side (no ``steps`` asked, the default, or at least the epoch's length:
    fewer steps than an epoch are measured within one, as asked); None otherwise."""
    n = safe_len(loader)
    if not n or n < warmup + MIN_EPOCH_STEADY:
        return None
    if isinstance(steps, int) and not isinstance(steps, bool) and steps != DEFAULT_STEPS:
        return n if steps >= n else None
    return n
