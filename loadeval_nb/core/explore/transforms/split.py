"""Where the per-sample time goes: the real rung's loading split by transform.

:func:`split_transforms` reads a few batches through a copy of the loader (same
dataset, sampler, workers, ``collate_fn``; ``persistent_workers`` off, so its workers
end with it) while each step of the dataset's pipeline is timed where it runs: in
the worker processes, or in the main process with ``num_workers=0``. The result says
what share of the per-sample time each step takes and how long it takes a sample;
``collate_fn`` is timed per batch and shown apart (the ladder counts it in the
*workers + collation* stage, not in per-sample loading).

The user's loader is not touched; the dataset's pipeline objects are swapped for
timed stand-ins only while the copy runs (see :mod:`.pipeline` and :mod:`.timed_data`) and put back in a
``finally``. :func:`~loadeval_nb.core.explore.run_ladder` runs a split after its rungs when the
dataset has a pipeline (``transforms="auto"``) or when steps are named.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..._env import is_dataloader
from ..._errors import a_kind, check_int, check_number
from ..._facts import Fact, Facts, Reported
from ..._format import fmt_pct, fmt_seconds
from ...errors import LoadEvalError
from ...measure.loader import rebuild_loader, rng_kept, shutdown_source
from ...record.ladderlog import PartLog, SplitLog
from .pipeline import COLLATE, ROOT, Pipeline, Table, Timed, find_transforms, timed_transforms

LADDER_MAX_S = 10.0
"""The most a ladder's split reads batches for (it reads at most ``cache`` batches)."""


@dataclass(frozen=True)
class TransformPart:
    """One step's share of the per-sample time. ``seconds`` is its own time (timed steps
    called inside it excluded) summed over every sample and process."""

    name: str
    calls: int
    seconds: float
    per_sample_s: Optional[float]
    share: Optional[float]
    rest: bool = False
    """True for the part of the per-sample call outside every timed step."""
    sum_sq_s2: Optional[float] = None
    """Each sample's time in this step squared, summed (seconds²): the spread behind an
    interval when two splits are compared (None: not kept)."""


@dataclass
class TransformSplit(Reported):
    """The per-sample time split by step, the costliest first (see :func:`split_transforms`)."""

    parts: list[TransformPart]
    samples: int
    batches: int
    num_workers: int
    processes: int
    """How many processes made samples (workers that got no batch are not counted)."""
    collate_s: Optional[float] = None
    """``collate_fn``'s mean time a batch (not part of the split)."""
    notes: list[str] = field(default_factory=list)

    @property
    def per_sample_s(self) -> Optional[float]:
        """The whole per-sample call's mean time (the parts added up)."""
        total = sum(p.seconds for p in self.parts)
        return total / self.samples if self.samples else None

    def costliest(self, n: int = 3) -> list[TransformPart]:
        return [p for p in self.parts if p.seconds > 0][:n]

    def summary(self, top: int = 6) -> str:
        """``"RandomResizedCrop 41% (2.5 ms), ColorJitter 33% (2.0 ms), ..."`` (per sample)."""
        shown = self.costliest(top)
        text = ", ".join(
            f"{p.name} {fmt_pct(p.share)} ({fmt_seconds(p.per_sample_s)})" for p in shown
        )
        more = [p for p in self.parts if p.seconds > 0][top:]
        if more:
            share = sum(p.share or 0.0 for p in more)
            text += f", {len(more)} more {fmt_pct(share)}"
        return text or "nothing measured"

    def where(self) -> str:
        procs = (
            "the main process" if self.num_workers == 0 else f"{self.processes} worker processes"
        )
        if self.processes == 1 and self.num_workers:
            procs = "1 worker process"
        return (
            f"{self.samples:,} samples ({self.batches:,} batches) in {procs}, "
            f"{fmt_seconds(self.per_sample_s)} a sample"
        )

    def headline(self) -> str:
        top = self.costliest(3)
        if not top:
            return "No time was measured in the timed steps."
        listed = ", ".join(f"{p.name} {fmt_pct(p.share)}" for p in top)
        return f"{listed} of each sample's time."

    def facts(self) -> Facts:
        """The split's facts, once: :meth:`text` and an HTML card render this."""
        facts = [Fact("measured", "measured on", self.where())]
        if self.collate_s is not None:
            facts.append(
                Fact("collate", "collate_fn", f"{fmt_seconds(self.collate_s)} a batch (not split)")
            )
        rows = tuple(
            (
                p.name,
                fmt_pct(p.share, 1),
                fmt_seconds(p.per_sample_s),
                f"{p.calls:,}" if p.calls or p.rest else "never called",
            )
            for p in self.parts
        )
        return Facts(
            kind="transforms",
            title="Per-sample time by step",
            headline=self.headline(),
            facts=tuple(facts),
            columns=("step", "share", "per sample", "calls"),
            rows=rows,
            notes=tuple(self.notes),
        )

    def ladder_fact(self) -> Fact:
        """The ladder card's line for the split."""
        return Fact("transform-split", "per-sample time by step", self.summary())

    def table(self) -> list[dict[str, Any]]:
        """One dict per step, the costliest first: ``name``, ``share``, ``per_sample_s``,
        ``seconds``, ``calls``, ``rest``."""
        return [
            {
                "name": p.name,
                "share": p.share,
                "per_sample_s": p.per_sample_s,
                "seconds": p.seconds,
                "calls": p.calls,
                "rest": p.rest,
            }
            for p in self.parts
        ]

    def to_log(self) -> SplitLog:
        """The split as a record that :meth:`save` writes and ``compare_runs`` reads."""
        parts = [PartLog(p.name, p.calls, p.seconds, p.sum_sq_s2, p.rest) for p in self.parts]
        return SplitLog(
            parts,
            self.samples,
            self.batches,
            self.num_workers,
            self.processes,
            self.collate_s,
            list(self.notes),
        )

    def save(self, path: Any) -> str:
        """Write the split as versioned JSON (the layout: ``record/ladderlog.py``), for
        ``python -m loadeval_nb compare`` to read. Returns the path."""
        return self.to_log().save(path)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return {
            "samples": self.samples,
            "batches": self.batches,
            "num_workers": self.num_workers,
            "processes": self.processes,
            "per_sample_s": self.per_sample_s,
            "collate_s": self.collate_s,
            "parts": self.table(),
            "notes": list(self.notes),
        }


def _result(pipeline: Pipeline, table: Table, rest: str, num_workers: int) -> TransformSplit:
    totals = table.totals()
    samples, root_ns = totals[ROOT]
    batches, collate_ns = totals[COLLATE]
    kept = table.squares()
    squares: list[Optional[float]] = list(kept) if kept is not None else [None] * len(totals)
    raw = [(rest, samples, root_ns, True, squares[ROOT])]
    raw += [
        (n, c, ns, False, sq) for n, (c, ns), sq in zip(pipeline.names, totals[2:], squares[2:])
    ]
    whole = sum(max(r[2], 0) for r in raw)
    parts = [
        TransformPart(
            name,
            calls,
            max(ns, 0) / 1e9,
            max(ns, 0) / 1e9 / samples if samples else None,
            max(ns, 0) / whole if whole else None,
            is_rest,
            sq / 1e18 if sq is not None else None,
        )
        for name, calls, ns, is_rest, sq in raw
    ]
    parts.sort(key=lambda p: -p.seconds)
    split = TransformSplit(
        parts,
        samples,
        batches,
        num_workers,
        table.rows_used(),
        collate_ns / 1e9 / batches if batches else None,
    )
    never = [p.name for p in parts if not p.calls and not p.rest]
    if never:
        split.notes.append(
            f"{', '.join(never)} never ran while {samples:,} samples were made: the dataset "
            "does not call it, a random choice skipped it, or (a module-level function under "
            "spawn) the workers import their own copy."
        )
    return split


def measure_split(
    loader: Any,
    pipeline: Pipeline,
    batches: int,
    max_s: float,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> TransformSplit:
    """Read up to ``batches`` batches (stopping after ``max_s`` seconds) through a copy of
    ``loader`` with ``pipeline``'s steps timed; the steps are put back afterwards."""
    from .timed_data import timed_dataset

    table = Table.for_loader(loader, 2 + len(pipeline.fns), clock)
    dataset = timed_dataset(loader.dataset, table)
    copy = rebuild_loader(loader, dataset=dataset, persistent_workers=False)
    copy.collate_fn = Timed(copy.collate_fn, COLLATE, table)
    # the user's next epoch draws the same batches as if no split had run
    with rng_kept(loader), timed_transforms(pipeline, table):
        it = iter(copy)  # workers start here, with the timed steps in their copy
        try:
            deadline = time.monotonic() + max_s
            for done, _ in enumerate(it, 1):
                if done >= batches or time.monotonic() >= deadline:
                    break
        finally:
            shutdown_source(it)
    split = _result(pipeline, table, type(dataset).rest, loader.num_workers)
    if not split.samples:
        raise LoadEvalError("The loader made no sample, so there is no per-sample time to split.")
    return split


def split_transforms(
    loader: Any,
    transforms: Any = "auto",
    *,
    batches: int = 8,
    max_s: float = 30.0,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> TransformSplit:
    """Time each step of the dataset's transform pipeline where it runs (inside the worker
    processes, or the main process with ``num_workers=0``) over ``batches`` batches (or
    ``max_s`` seconds, whichever ends first), and say what share of the per-sample time
    each step takes, the costliest first.

    ``transforms="auto"`` finds the pipeline in the dataset's ``transform``,
    ``transforms`` or ``target_transform`` (torchvision ``Compose`` and ``transforms.v2``
    containers are opened step by step; wrapped datasets such as ``Subset`` are searched
    through ``.dataset``); a list names the callables to time instead (transform objects,
    functions, bound methods of the dataset). The rest of the per-sample call (reading,
    decoding) is its own part. ``loader`` is not modified and the pipeline's objects are
    put back as they were, on error and Ctrl-C too; an exception from your dataset
    passes through.

    Raises :class:`LoadEvalError` when ``loader`` is not a DataLoader, a named step is
    not callable or cannot be found, or ``"auto"`` finds no pipeline.
    """
    if not is_dataloader(loader):
        raise LoadEvalError(
            "split_transforms times the steps inside a DataLoader's workers, so it needs a "
            f"torch.utils.data.DataLoader, not {a_kind(loader)}."
        )
    check_int("batches", batches, 1)
    check_number("max_s", max_s, "a time in seconds")
    pipeline = find_transforms(loader.dataset, transforms)
    if not pipeline.fns:
        raise LoadEvalError(
            f"No transform pipeline was found on the loader's dataset "
            f"({a_kind(loader.dataset)} and the datasets it wraps have no transform, "
            "transforms or target_transform); name the callables it calls with transforms=[...]."
        )
    return measure_split(loader, pipeline, batches, max_s, clock)


def check_ladder_transforms(loader: Any, transforms: Any, rungs: tuple[str, ...]) -> None:
    """Before a ladder runs: named steps that cannot be timed get one sentence."""
    if transforms is None or (isinstance(transforms, str) and transforms == "auto"):
        return
    if "real" not in rungs:
        raise LoadEvalError(
            "transforms= splits the real rung's per-sample time; add 'real' to rungs or leave "
            "transforms out."
        )
    if not is_dataloader(loader):
        raise LoadEvalError(
            "transforms= times steps inside a DataLoader's workers, so it needs a "
            f"torch.utils.data.DataLoader, not {a_kind(loader)}."
        )
    find_transforms(loader.dataset, transforms)


def ladder_split(
    loader: Any, transforms: Any, batches: int, progress: Callable[[str], None]
) -> tuple[Optional[TransformSplit], list[str]]:
    """The ladder's split after its rungs, and its notes for the ladder (how it was
    measured, or why it failed); (None, []) when there is nothing to split. Never raises."""
    if transforms is None or not is_dataloader(loader):
        return None, []
    try:
        pipeline = find_transforms(loader.dataset, transforms)
        if not pipeline.fns:
            return None, []
        progress("ladder: timing each transform step")
        split = measure_split(loader, pipeline, batches, LADDER_MAX_S)
    except (Exception, KeyboardInterrupt) as e:  # the rungs are measured: keep them
        return None, [f"per-transform split failed ({type(e).__name__}: {e}); the rungs stand."]
    collate = (
        f"; collate_fn {fmt_seconds(split.collate_s)} a batch, not split"
        if split.collate_s is not None
        else ""
    )
    return split, [
        f"per-transform split, measured after the rungs: {split.where()}{collate}.",
        *split.notes,
    ]
