"""The verdict's notes: one rule each, reading what was seen (``_Seen``) and saying its
note or nothing, in the order they are said (as TraceML's rules). See
``docs/verdict.md``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from .._format import fmt_pct, fmt_seconds
from ..record.run import Run
from .diagnosis import (
    CI_LEVEL,
    CONTENTION,
    INPUT_BOUND,
    NOT_ENOUGH_DATA,
    PARTLY_INPUT_BOUND,
)
from .interval import (
    BETWEEN_RUNS,
    MIN_T_BLOCKS,
    LoadGap,
    blocks_alike,
    blocks_disagree,
    busy_load,
    two_processes,
)


def _as_long(slower: float) -> str:
    """``0.35`` → "35% longer than"; ``2.06`` → "3.1× as long as" (a share past 100 % reads
    badly as "206% slower")."""
    return f"{slower:.0%} longer than" if slower < 1 else f"{1 + slower:.1f}× as long as"


SETUP_KEYS = ("host", "platform", "cpu_count", "devices", "torch_version")
"""What of a run log's environment tells two machines or setups apart."""


def setup_differences(a: Run, b: Run) -> list[str]:
    """What of the two runs' machines and setups differs (host, platform, CPUs, GPUs,
    torch)."""
    return [
        k
        for k in SETUP_KEYS
        if k in a.environment and k in b.environment and a.environment[k] != b.environment[k]
    ]


def setup_changes(a: Run, b: Run) -> str:
    """The differences of :func:`setup_differences` with their values: ``host gpu-a →
    gpu-b, cpu_count 2 → 64``; empty when the setups agree (or are not recorded)."""

    def said(v: Any) -> str:
        return ", ".join(map(str, v)) or "none" if isinstance(v, list) else str(v)

    return "; ".join(
        f"{k} {said(a.environment[k])} → {said(b.environment[k])}" for k in setup_differences(a, b)
    )


@dataclass
class _Seen:
    """What the verdict's notes are said from: the two runs and what the diagnosis
    worked out of them. A rule may add to the reason (``reason``) and name a run the
    machine disturbed (``disturbed``)."""

    r: Run
    i: Run
    rs: list[float]
    is_: list[float]
    rd: dict[str, Any]
    idd: dict[str, Any]
    blocks: Any
    unit: str
    repeats: Optional[tuple[list[float], tuple[float, float]]]
    drift: Optional[tuple[float, float, float]]
    load: Optional[LoadGap]
    apart: Optional[tuple[float, Optional[float]]]
    speedup: Optional[float]
    verdict: str
    reason: str
    real_wait: Optional[float]
    real_other: Optional[float]
    spe: Optional[int]
    endless: bool
    limited: Optional[tuple[int, int]]
    cuda: Any
    disturbed: list[str] = field(default_factory=list)


def _modes(c: _Seen) -> Iterator[str]:
    """A run recorded in another mode than its side's."""
    if c.r.mode != "log":
        yield f"the 'real' run was recorded in {c.r.mode!r} mode"
    if c.i.mode != "replay":
        yield f"the 'ideal' run was recorded in {c.i.mode!r} mode"


def _setups(c: _Seen) -> Iterator[str]:
    """Runs recorded on different machines or setups."""
    differ = setup_differences(c.r, c.i)
    if differ:
        yield (
            f"the runs were recorded on different machines or setups ({', '.join(differ)} "
            f"differ): {setup_changes(c.r, c.i)}; the comparison mixes them"
        )


def _epoch_seen(c: _Seen) -> Iterator[str]:
    """A loader whose epoch ended before its ``len()`` said."""
    if c.r.method == "blocks":
        said, seen = c.blocks.get("epoch"), c.blocks.get("epoch_seen")
        if isinstance(said, int) and isinstance(seen, int) and seen < said:
            yield (
                f"the loader's len() says {said} batches, but its epoch ended after {seen}: "
                "the pass stopped there (the loop was handed no more than the loader held); "
                "a per-epoch figure here uses the batches it held"
            )


def _design(c: _Seen) -> Iterator[str]:
    """How the sides were paired: interleaved blocks, or repeats, and their spread."""
    if c.repeats is None:
        return
    ratios, unit = c.repeats[0], c.unit
    few = (
        f"{len(ratios)} {unit}s a side are too few for a {CI_LEVEL:.0%} interval between "
        f"them, so the interval is the {unit}s' range widened by the steps' noise"
        if len(ratios) < MIN_T_BLOCKS
        else "the interval holds the spread between them"
    )
    if c.r.method == "blocks":
        yield (
            f"real and ideal steps interleaved in {len(ratios)} blocks each (A B B A, "
            f"{c.blocks.get('block')} steady steps a block), so a drift of the machine lands "
            f"on both sides; speedup per block {min(ratios):.2f}–{max(ratios):.2f}×; " + few
        )
    else:
        each = ", ".join(f"{x:.2f}×" for x in ratios)
        yield (
            f"each run holds {len(ratios)} epochs (a pair repeated in A B B A order, or a "
            f"loop of several epochs): speedup per epoch {each}; " + few
        )


def _drifted(c: _Seen) -> Iterator[str]:
    """Sides one after the other whose steps drifted within each run."""
    if c.drift is not None:
        yield (
            "the sides ran one after the other and their steps drifted within each run "
            f"({_signed_pct(c.drift[0] - 1)} between the runs' middles, beyond the noise of "
            "each run's segments in time): the drift between the runs is in the difference, "
            "so the interval also holds the speedup corrected for it (about "
            f"{(c.speedup or 0.0) * c.drift[0]:.2f}×); interleaved, the default, a drift "
            "lands on both sides"
        )


def _sides_apart(c: _Seen) -> Iterator[str]:
    """Sides one after the other: the interval widened by what changes between them
    (two processes, and on a busy machine the share of the cores other processes took)."""
    apart = c.apart
    if apart is None or apart[0] < 0.005:
        return
    two = two_processes(c.r, c.i)
    load = apart[0] - (BETWEEN_RUNS if two else 0.0)
    parts = [f"{BETWEEN_RUNS:.0%} between two processes on a quiet machine"] if two else []
    if load >= 0.005:
        parts.append(
            f"{load:.0%}, the share of its cores other processes took: as far as a run's "
            "process can have landed in another state than the other's (a full core in "
            "one, a shared one in the next)"
        )
    yield (
        "the sides ran one after the other"
        + (" in two processes" if two else "")
        + ", so what changed on the machine between them is in the difference, beyond "
        f"what either run shows: the interval holds the speedup give or take "
        f"{apart[0]:.0%} (" + "; ".join(parts) + ")"
    )


def _disagree(c: _Seen) -> Iterator[str]:
    """Blocks (or epochs) that disagree beyond their noise."""
    disagree = blocks_disagree(c.r, c.i)
    if disagree is not None:
        yield (
            f"the {'blocks' if c.r.method == 'blocks' else 'epochs'} disagree beyond "
            f"their noise (speedup {disagree[0]:.2f}× to {disagree[1]:.2f}×): the machine's "
            "speed or the workload changed while the pair ran; the interval holds that "
            "spread, and a longer run (more blocks) narrows it"
        )


def _busy_runs(c: _Seen) -> Iterator[str]:
    """The machine busy with other work during the runs (named in ``disturbed``), said
    once: what the load was in each run it disturbed and what it did to the interval."""
    said = []
    for name, run in (("real", c.r), ("ideal", c.i)):
        load = busy_load(run)
        if load:
            c.disturbed.append(name)
            said.append(f"{load} during the {name} run")
    if not said:
        return
    gap = c.load
    widened = ""
    if gap is not None:
        sides = "the real and the ideal " + ("blocks" if c.r.method == "blocks" else "epochs")
        widened = (
            f"; their load differed by {abs(gap.cores):.2f} cores (± {gap.error:.2f}) between "
            f"{sides}, which could move the speedup by {gap.share:.0%} either way on "
            f"{gap.cpus} cores: the interval holds that"
        )
    alike = ""
    if c.repeats is not None:
        n = blocks_alike([math.log(x) for x in c.repeats[0]])
        if n is not None and n < len(c.repeats[0]) - 0.5:
            alike = (
                f"; the load moved the loop's speed in spells longer than a {c.unit}, so "
                f"neighbouring {c.unit}s agree: the interval counts the "
                f"{len(c.repeats[0])} {c.unit}s as {n:.1f} independent ones"
            )
    yield (
        f"the machine was busy with other work: {' and '.join(said)}{widened}{alike}; "
        "rerun when the machine is quiet for a narrower interval"
    )


def _adaptive(c: _Seen) -> Iterator[str]:
    """What the adaptive stop did, and a run it stopped before it converged (said in the
    reason too)."""
    used = [
        f"{name} {run.n_steps} steps ({_auto_reasons(run)})"
        for name, run in (("real", c.r), ("ideal", c.i))
        if (run.settings or {}).get("auto_stop")
    ]
    if used:
        yield "adaptive stop: " + ", ".join(used)
    for name, run in (("real", c.r), ("ideal", c.i)):
        auto = (run.settings or {}).get("auto_stop")
        stops = [e.get("auto_stop") for e in run.blocks] if auto else []
        if not stops or "converged" in stops:
            continue
        said = ", ".join(dict.fromkeys(map(str, stops)))
        rel = auto.get("rel") if isinstance(auto, dict) else None
        known = f"±{rel * 100:g} %" if isinstance(rel, (int, float)) else "the precision asked"
        if isinstance(auto, dict) and auto.get("until") and c.r.method == "blocks":
            # a pair in blocks that goes on until its interval tells: one pass, said once
            wide = f" and at most {4 * rel * 100:g} % wide" if isinstance(rel, float) else ""
            ended = set(stops) == {"loader exhausted"}
            more = (
                "the loader's epoch is the limit, not the number of steps: measure more "
                "epochs or use a longer loader"
                if ended
                else "a larger max_steps for the adaptive stop would narrow it"
            )
            yield (
                f"not settled: the pass stopped ({said}) before its interval decided the "
                f"label{wide}; {more}"
            )
            c.reason = f"{c.reason} (the pass stopped before its interval could tell)"
            return
        if set(stops) == {"loader exhausted"}:  # every epoch ran out of batches first
            yield (
                f"not converged: the {name} run stopped ({said}) before its step time was "
                f"known to {known}: the loader's epoch ended first, so the epoch is the "
                "limit, not the number of steps; for a tighter interval, measure more "
                "epochs or use a longer loader"
            )
            c.reason = f"{c.reason} (the {name} run did not converge: the epoch is the limit)"
        else:
            yield (
                f"not converged: the {name} run stopped ({said}) before its step time was "
                f"known to {known}, so the interval is wider than that; give it a longer "
                "loader or more steps"
            )
            c.reason = f"{c.reason} (the {name} run did not converge)"


def _short_loader(c: _Seen) -> Iterator[str]:
    """A loader with fewer batches an epoch than the steps asked."""
    if c.limited is None:
        return
    asked, got = c.limited
    if c.r.method == "blocks":
        yield (
            f"the loader has {got} batches an epoch, fewer than the {asked} steps asked "
            f"a side need in one interleaved pass: the real side measured {len(c.rs)} "
            f"steady steps in its blocks and the ideal side {len(c.is_)} (warm-up and "
            "drained steps left out)"
        )
    else:
        yield (
            f"the loader has {got} batches an epoch, fewer than the {asked} steps asked: "
            f"the real run measured {len(c.rs)} steady steps and the ideal run {len(c.is_)} "
            "(warm-up left out)"
        )


def _endless(c: _Seen) -> Iterator[str]:
    """A loader's length that is no epoch that will be run."""
    if c.endless and c.spe:
        yield (
            f"the loader's length, {c.spe:,} batches, is no epoch that will be run (about "
            f"{fmt_seconds(c.spe * (c.rd['mean_s'] or 0.0))} of steps: a sampler that hardly "
            "ends): the time saved is said per 1000 steps"
        )


def _cache(c: _Seen) -> Iterator[str]:
    """A cache smaller than asked, or of batches of different shapes."""
    settings = c.i.settings or {}
    cached, want = settings.get("batches_cached"), settings.get("num_cached_batches")
    if isinstance(cached, int) and isinstance(want, int) and 0 < cached < want:
        yield (
            f"the ideal run replayed {cached} cached batches, fewer than the {want} asked: "
            "the loader had no more"
        )
    if settings.get("cached_shapes_differ"):
        yield (
            "the cached batches differ in shape (padded or variable-length batches), so the "
            "ideal step depends on which batches were cached: cache more batches, or make "
            "batches of one shape, to tell the ideal apart from that choice"
        )


def _ended_early(c: _Seen) -> Iterator[str]:
    """A run that ended early."""
    for name, run in (("real", c.r), ("ideal", c.i)):
        if run.status != "complete":
            yield f"the {name} run ended early ({run.status}); its last step is left out"


def _apart_from_waiting(c: _Seen) -> Iterator[str]:
    """Real steps longer than ideal ones by more than their wait for data: the causes."""
    rm, im = c.rd["mean_s"], c.idd["mean_s"]
    if c.verdict == NOT_ENOUGH_DATA or c.real_other is None or c.real_wait is None:
        return
    if not im or not rm:
        return
    slower = c.real_other / im - 1.0
    longer = rm - im
    # waiting explains less than half the difference: the rest needs saying too
    unexplained = c.verdict in (INPUT_BOUND, PARTLY_INPUT_BOUND) and c.real_wait < longer / 2
    if slower > CONTENTION or (unexplained and slower > 0):
        workers = c.r.loader_settings.get("num_workers")
        causes = [
            "the loading, which runs inside the training process"
            if workers == 0
            else "the loader's workers taking CPU from the step",
            *(["host-to-device copies the cache avoided"] if c.cuda is not False else []),
            "cached batches that cost less than real ones",
        ]
        yield (
            f"real steps are {fmt_seconds(longer)} longer than ideal ones, but only "
            f"{fmt_seconds(c.real_wait)} of that is waiting for data: apart from waiting "
            f"they take {_as_long(slower)} ideal ones; the rest is "
            + (", ".join(causes[:-1]) + ", or " + causes[-1])
        )


NOTE_RULES: tuple[Callable[[_Seen], Iterator[str]], ...] = (
    _modes,
    _setups,
    _epoch_seen,
    _design,
    _drifted,
    _sides_apart,
    _disagree,
    _busy_runs,
    _adaptive,
    _short_loader,
    _endless,
    _cache,
    _ended_early,
    _apart_from_waiting,
)
"""The verdict's notes, one rule each, in the order they are said (as TraceML's rules:
each reads what was seen and says its note, or nothing)."""


def _signed_pct(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_pct(abs(x), 1)}"


def busy_note(run: Run, name: str) -> Optional[str]:
    """The sentence for a run during which the machine was busy with other work, or None."""
    load = busy_load(run)
    if load is None:
        return None
    return (
        f"the machine was busy with other work during the {name} run: {load}; the "
        "comparison is disturbed: rerun when the machine is quiet"
    )


def _auto_reasons(run: Run) -> str:
    reasons = [e.get("auto_stop") or "stopped" for e in run.blocks]
    return ", ".join(dict.fromkeys(reasons)) or "n/a"
