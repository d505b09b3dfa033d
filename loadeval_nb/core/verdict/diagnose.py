"""The verdict: how much faster would training be with an ideal loader, and where the time goes.

See ``docs/verdict.md`` for the method and thresholds.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

import numpy as np

from .._errors import a_kind
from .._format import fmt_pct, fmt_seconds
from .._stats import bootstrap_ratio_ci, drift_slope, t975
from ..errors import LoadEvalError
from ..measure.loader import max_workers
from ..measure.resource import reading_of
from ..record.run import DEFAULT_STEPS, EPOCH_PAIR, VARIANT, Run, describe_steady
from ..record.runlog import load_run
from ..whatif.from_runs import predict_from_runs
from .diagnosis import (
    CI_LEVEL,
    CONTENTION,
    INPUT_BOUND,
    LARGE,
    MIN_STEADY_STEPS,
    NOT_ENOUGH_DATA,
    NOT_INPUT_BOUND,
    PARTLY_INPUT_BOUND,
    WORTH,
    Diagnosis,
    Note,
    Tried,
)

log = logging.getLogger("loadeval_nb")


RunLike = Union[Run, str, "os.PathLike[str]", Any]


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


def as_run(x: RunLike, name: str = "run") -> Run:
    """Accept a :class:`Run`, a path to a run log, or anything with ``to_run()`` (an evaluator)."""
    if isinstance(x, Run):
        return x
    if isinstance(x, (str, os.PathLike)):
        return load_run(x)
    to_run = getattr(x, "to_run", None)
    if callable(to_run):
        run = to_run()
        if isinstance(run, Run):
            return run
    raise LoadEvalError(
        f"{name} must be a LoaderEvaluator, a Run or the path of a run log, not {a_kind(x)}."
    )


def _gain(x: float) -> str:
    """``1.09`` → "9%"; ``0.97`` → "-3%" (the speed a speedup adds)."""
    return fmt_pct(x - 1.0) if x >= 1.0 else f"-{fmt_pct(1.0 - x)}"


def _verdict(
    n_real: int,
    n_ideal: int,
    headroom: Optional[float],
    ci: tuple[Optional[float], Optional[float]],
) -> tuple[str, str]:
    """The label and its reason, decided from the interval against the two lines (never
    from the point estimate): NOT INPUT-BOUND only when the whole interval is under the
    first, INPUT-BOUND only when it is over the second, PARTLY when it is over the first;
    an interval across the first line is NOT ENOUGH DATA, its range said in words."""
    if n_real < MIN_STEADY_STEPS or n_ideal < MIN_STEADY_STEPS:
        return NOT_ENOUGH_DATA, (
            f"only {min(n_real, n_ideal)} steady steps in one run; at least {MIN_STEADY_STEPS} "
            "are needed"
        )
    lo, hi = ci
    if headroom is None or lo is None or hi is None:
        return NOT_ENOUGH_DATA, (
            "the steps took no measurable time, so there is no speed to compare (check the "
            "clock, or that the loop does its work inside the steps)"
        )
    between = f"between {lo:.2f}× and {hi:.2f}× as fast"
    if hi < WORTH:
        if hi < 1.0:  # the interval wholly below 1: never "as fast"
            return NOT_INPUT_BOUND, (
                "the real loader measured faster than an ideal one, which is noise or a "
                "difference in the batches (the cached ones cost more than the average real "
                "one), not a gain to be had from loading"
            )
        return NOT_INPUT_BOUND, (
            f"an ideal loader would make steps {between}: at most {_gain(hi)} faster, under "
            f"the {_gain(WORTH)} a change is worth"
        )
    if lo >= LARGE:
        least = f": at least {_gain(lo)}" if lo < 2.0 else ""  # (2× and more: the range says it)
        return INPUT_BOUND, f"an ideal loader would make steps {between}{least}"
    if lo >= WORTH:
        more = "; possibly much more" if hi >= LARGE else ""
        return PARTLY_INPUT_BOUND, (
            f"an ideal loader would make steps {between}: at least {_gain(lo)}{more}"
        )
    if hi < LARGE:
        return NOT_ENOUGH_DATA, (
            f"an ideal loader would make steps {between}: at most {_gain(hi)} faster, but "
            f"whether by the {_gain(WORTH)} a change is worth cannot be told from these steps"
        )
    return NOT_ENOUGH_DATA, (
        f"an ideal loader would make steps {between}: too wide a range to tell whether "
        "loading holds training back"
    )


def steps_to_tell(
    n: int, ci: tuple[Optional[float], Optional[float]], fixed: float = 0.0
) -> Optional[int]:
    """About how many steady steps (or blocks) a side would put an interval that lies
    across a line on one side of it (:data:`WORTH`, or :data:`LARGE` when it lies across
    that one alone), where its width beyond ``fixed`` shrinks as one over the square root
    of the steps: ``fixed`` is the share either side that no number of steps narrows (the
    method's floor, the gap in other processes' load between the sides, the share between
    two processes). None when the interval lies across no line, when the fixed share alone
    reaches the line, or when a gain that close to the line would take more than
    :data:`MAX_TELL` times the steps."""
    lo, hi = ci
    if lo is None or hi is None or n <= 0 or hi <= lo:
        return None
    if lo < WORTH <= hi:
        line = WORTH
    elif lo < LARGE <= hi:
        line = LARGE
    else:
        return None
    mid, half = (math.log(lo) + math.log(hi)) / 2, (math.log(hi) - math.log(lo)) / 2
    gap = abs(mid - math.log(line))
    if gap <= math.log1p(max(fixed, 0.0)):
        return None
    # the interval is the union of the steps' (which shrinks) and the fixed share's (which
    # does not, and is under the gap): the steps' must come down to the gap
    times = (half / gap) ** 2
    if times > MAX_TELL:
        return None
    return int(math.ceil(n * times * 1.2))


MAX_TELL = 16.0
"""More than this many times the steps measured to tell a gain from its line: the gain
is too close to the line to place, and the verdict says so instead of a number."""


def diagnose(
    real: RunLike,
    ideal: RunLike,
    *,
    contended: Optional[RunLike] = None,
    variant: Optional[RunLike] = None,
    seed: int = 0,
) -> Diagnosis:
    r, i = as_run(real, "real"), as_run(ideal, "ideal")
    c = as_run(contended, "contended") if contended is not None else None
    gap = size_gap(r, i)
    if gap is not None and gap.matched is not None:
        i = gap.matched
        c_gap = size_gap(r, c) if c is not None else None
        if c_gap is not None and c_gap.matched is not None:
            c = c_gap.matched
    d = _diagnose(r, i, seed)
    if gap is not None:
        d.cache_size_gap = gap.served / gap.stream - 1 if gap.stream else None
        if gap.note:
            d.notes.append(Note(gap.note, "cache_size_gap"))
        if gap.matched is not None:
            d.ideal_measured_step_s = gap.measured_s
    if c is not None:
        split_headroom(d, r, c, i)
    else:
        why = (r.settings or {}).get("contention")
        if isinstance(why, str):
            d.notes.append(Note(why, "no_contention"))
    if variant is not None:
        d.tried = tried(r, as_run(variant, "variant"), seed)
    return d


def tried(r: Run, v: Run, seed: int = 0) -> Tried:
    """The variant arm ``v``'s gain over the real run ``r`` of the same pass: the real
    mean step over the variant's, its interval as the ideal's is taken (the bootstrap of
    the steps, the spread between blocks paired block by block, on a busy machine the
    gap in load between the arms and the blocks' correlation)."""
    g = _diagnose(r, v, seed)
    settings = (v.settings or {}).get(VARIANT)
    return Tried(
        settings=dict(settings) if isinstance(settings, dict) else {},
        speedup=g.speedup,
        speedup_ci=g.speedup_ci,
        speedup_ci_label=g.speedup_ci_label,
        step_s=g.ideal_step_s,
        steady_steps=g.ideal_steady_steps,
    )


SIZE_GAP = 0.05
"""Cached batches whose mean size is this far from the stream's (either way) make the
ideal step size-matched, and the verdict says so."""


@dataclass
class SizeGap:
    """The cached batches a replaying run served against the real stream, by size."""

    stream: float
    """Mean size of the real batches sampled across the pass."""
    served: float
    """Mean size of the batches served in the replaying run's steady steps."""
    measured_s: Optional[float]
    """The replaying run's mean steady step as measured."""
    matched: Optional[Run] = None
    """The run with each steady step moved to the stream's mean size (None: not needed,
    or not possible)."""
    note: Optional[str] = None


def stream_mean(sizes: list[Any], positions: Any, drawn: int) -> float:
    """The mean size of a stream of ``drawn`` batches from ``sizes`` sampled at
    ``positions`` (the batches drawn by then): each weighted by the stretch around it,
    half the way to each neighbour (the stream's ends to the first and the last); the
    plain mean without positions."""
    n = len(sizes)
    if not isinstance(positions, list) or len(positions) != n or n < 2:
        return sum(sizes) / n
    edges = [0.0] + [(positions[j] + positions[j + 1]) / 2 for j in range(n - 1)]
    edges.append(float(max(drawn, positions[-1])))
    weights = [max(edges[j + 1] - edges[j], 0.0) for j in range(n)]
    total = sum(weights)
    return sum(s * w for s, w in zip(sizes, weights)) / total if total else sum(sizes) / n


def size_gap(r: Run, i: Run) -> Optional[SizeGap]:
    """How far ``i``'s served batches are from ``r``'s stream (their sizes, in the runs'
    settings: ``stream_sizes``, ``served_sizes``), and, when more than
    :data:`SIZE_GAP`, ``i`` size-matched: the slope of step time on size, fitted over
    ``i``'s steady steps, moves each step to the stream's mean size (a step's cost linear
    in its tokens or elements). None: the runs do not carry the sizes."""
    stream = (r.settings or {}).get("stream_sizes")
    served = (i.settings or {}).get("served_sizes")
    if not stream or not isinstance(served, list) or len(served) != i.n_steps:
        return None
    idx = [k for k in i.steady_indices() if isinstance(served[k], int)]
    if not idx:
        return None
    # the stream drawn: the real steps' batches and any the contended arm dropped
    drawn = (r.settings or {}).get("stream_drawn")
    s_mean = stream_mean(
        stream,
        (r.settings or {}).get("stream_positions"),
        drawn if isinstance(drawn, int) else r.n_steps,
    )
    sizes = [float(served[k]) for k in idx]
    times = [float(i.step_ns[k]) for k in idx]
    c_mean = sum(sizes) / len(sizes)
    measured = sum(times) / len(times) / 1e9
    out = SizeGap(s_mean, c_mean, measured)
    if not s_mean or abs(c_mean / s_mean - 1) < SIZE_GAP:
        return out
    what = (
        f"the cached batches the {i.label or 'ideal'} run served average {c_mean:,.0f} "
        f"(non-padding tokens, else elements) a batch, the real stream {s_mean:,.0f} ("
        f"{len(stream)} batches sampled across the pass, each standing for the stretch "
        f"around it): {abs(c_mean / s_mean - 1):.0%} "
        f"{'smaller' if c_mean < s_mean else 'larger'}"
    )
    var = sum((x - c_mean) ** 2 for x in sizes)
    if var == 0:
        out.note = (
            f"{what}; they are all one size, so the ideal could not be size-matched: cache "
            "more batches (num_cached_batches)"
        )
        return out
    t_mean = sum(times) / len(times)
    slope = sum((x - c_mean) * (t - t_mean) for x, t in zip(sizes, times)) / var
    steps = list(i.step_ns)
    for k in range(len(steps)):
        if isinstance(served[k], int):
            steps[k] = max(0, int(round(steps[k] + slope * (s_mean - served[k]))))
    out.matched = replace(i, step_ns=steps)
    matched_s = measured + slope * (s_mean - c_mean) / 1e9
    out.note = (
        f"{what}; the ideal step is size-matched to the stream: {fmt_seconds(measured)} "
        f"measured, {fmt_seconds(matched_s)} at the stream's size (step time fitted on "
        f"size over the served batches, {slope:,.1f} ns a unit)"
    )
    return out


def split_headroom(d: Diagnosis, r: Run, c: Run, i: Run) -> None:
    """Fill ``d``'s split of the headroom from the contended arm ``c``: waiting for data
    (real minus contended) and CPU taken by loading (contended minus ideal), each a mean
    per step with a 95 % t-interval of the block-by-block differences (block *k* of one arm
    with block *k* of the other: a drift lands on both), their range with two blocks."""
    rm, cm, im = (describe_steady([x])["mean_s"] for x in (r, c, i))
    if rm is None or cm is None or im is None:
        d.notes.append(Note("no headroom split: the contended arm has no steady steps", "no_split"))
        return
    d.contended_step_s = cm
    d.waiting_s, d.contention_s = rm - cm, cm - im
    d.waiting_ci = _paired_interval(epoch_means(r), epoch_means(c))
    d.contention_ci = _paired_interval(epoch_means(c), epoch_means(i))
    share = d.contention_s / (rm - im) if rm > im else None
    if share is not None:
        d.notes.append(
            Note(
                f"of the {fmt_seconds(rm - im)} a step an ideal loader would save, "
                f"{fmt_seconds(d.waiting_s)} is waiting for data and "
                f"{fmt_seconds(d.contention_s)} ({share:.0%}) the CPU loading takes from the "
                "step (measured as a third arm: cached batches served while the loader kept "
                "producing)",
                "headroom_split",
            )
        )


def _paired_interval(
    a: dict[int, float], b: dict[int, float]
) -> tuple[Optional[float], Optional[float]]:
    """95 % t-interval of the mean of ``a[k] - b[k]`` over the blocks both have (their
    range with two; None with fewer)."""
    diffs = [a[k] - b[k] for k in sorted(set(a) & set(b))]
    if len(diffs) < 2:
        return (None, None)
    if len(diffs) < MIN_T_BLOCKS:
        return (min(diffs), max(diffs))
    m = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((x - m) ** 2 for x in diffs) / (len(diffs) - 1))
    half = t975(len(diffs) - 1) * sd / math.sqrt(len(diffs))
    return (m - half, m + half)


def _diagnose(real: RunLike, ideal: RunLike, seed: int = 0) -> Diagnosis:
    """Compare a real run with an ideal one.

    ``real`` and ``ideal`` may be :class:`LoaderEvaluator` objects, :class:`Run`
    objects, or paths of run logs. The verdict uses mean step times over each
    run's steady steps (mean step = 1 / throughput); medians and p90s are
    reported beside it. ``contended`` (the interleaved pair's third arm, cached batches
    while the loader kept producing) splits the headroom into waiting for data and the
    CPU loading takes from the step, each with its interval.
    """
    r = as_run(real, "real")
    i = as_run(ideal, "ideal")
    if r.mode == "replay" and i.mode == "log":
        raise LoadEvalError(
            "The real run is a replay and the ideal run a log: they look swapped; pass the "
            "log-mode run as real and the replay as ideal."
        )
    rs, is_ = r.steady_step_s(), i.steady_step_s()
    rd, idd = describe_steady([r]), describe_steady([i])
    k = _claim(r, i, rs, is_, rd["mean_s"], idd["mean_s"], seed)
    spe = r.steps_per_epoch()
    tell, epochs_to_tell = _to_tell(r, k, len(rs), len(is_), spe)
    wait_share, real_wait, real_other = _waiting(r, rd)
    copies = r.steady_h2d_s()
    endless = bool(
        spe
        and rd["mean_s"] is not None
        and spe > ENDLESS_STEPS * max(r.n_steps, 1)
        and spe * rd["mean_s"] > ENDLESS_EPOCH_S
    )
    saved = real_epoch = None
    if spe and rd["mean_s"] is not None and not endless:
        real_epoch = rd["mean_s"] * spe
        if idd["mean_s"] is not None:
            saved = (rd["mean_s"] - idd["mean_s"]) * spe
    limited = loader_limited(r)
    cuda = True if copies else r.environment.get("cuda_available")  # (copies: CUDA events)
    seen = _Seen(
        r=r, i=i, rs=rs, is_=is_, rd=rd, idd=idd, blocks=k.blocks, unit=k.unit,
        repeats=k.repeats, drift=k.terms.drift, load=k.terms.load, apart=k.terms.apart,
        speedup=k.speedup, verdict=k.verdict, reason=k.reason, real_wait=real_wait,
        real_other=real_other, spe=spe, endless=endless, limited=limited, cuda=cuda,
    )  # fmt: skip
    notes: list[str] = [
        Note(note, rule.__name__.lstrip("_")) for rule in NOTE_RULES for note in rule(seen)
    ]
    prediction, advised = _simulated(r, i, k.verdict, notes)
    workers = r.loader_settings.get("num_workers")
    pin = r.loader_settings.get("pin_memory")
    ci = k.terms.ci
    return Diagnosis(
        num_workers=workers if isinstance(workers, int) and not isinstance(workers, bool) else None,
        pin_memory=pin if isinstance(pin, bool) else None,
        cuda=cuda if isinstance(cuda, bool) else None,
        speedup_ci_label=k.ci_label,
        loader_limited=(
            None
            if limited is None
            else "interleaved"
            if isinstance(k.blocks, dict)
            else "sequential"
        ),
        epoch_endless=endless,
        steps_to_tell=tell,
        epochs_to_tell=epochs_to_tell,
        fixed_share=k.terms.fixed if ci[0] is not None else None,
        on_epochs=k.on_epochs,
        prediction=prediction,
        advised=advised,
        verdict=k.verdict,
        reason=seen.reason,
        real_step_s=rd["mean_s"],
        ideal_step_s=idd["mean_s"],
        speedup=k.speedup,
        headroom=k.headroom,
        speedup_ci=ci,
        real_median_s=rd["median_s"],
        ideal_median_s=idd["median_s"],
        real_p90_s=rd["p90_s"],
        ideal_p90_s=idd["p90_s"],
        real_samples_per_s=rd["samples_per_s"],
        ideal_samples_per_s=idd["samples_per_s"],
        real_steps_per_s=rd["steps_per_s"],
        ideal_steps_per_s=idd["steps_per_s"],
        wait_share=wait_share,
        real_wait_s=real_wait,
        real_other_s=real_other,
        steps_per_epoch=spe,
        time_saved_per_epoch_s=saved,
        real_epoch_s=real_epoch,
        real_gpu_util_pct=r.mean_gpu_util_pct(),
        ideal_gpu_util_pct=i.mean_gpu_util_pct(),
        real_steady_steps=len(rs),
        ideal_steady_steps=len(is_),
        notes=notes,
        real_startup_s=r.startup_s(),
        ideal_startup_s=i.startup_s(),
        disturbed=seen.disturbed,
        real_h2d_s=sum(copies) / len(copies) if copies else None,
        worker_resource=reading_of(r.worker_resource),
    )


@dataclass
class _Claim:
    """The speedup, its interval, and the label the interval supports."""

    speedup: Optional[float]
    headroom: Optional[float]
    terms: _Interval
    ci_label: str
    repeats: Optional[tuple[list[float], tuple[float, float]]]
    blocks: Any
    """The pass's plan as its run log keeps it (``settings.interleaved``), or None."""
    unit: str
    on_epochs: bool
    verdict: str
    reason: str


def _claim(
    r: Run,
    i: Run,
    rs: list[float],
    is_: list[float],
    real_mean: Optional[float],
    ideal_mean: Optional[float],
    seed: int,
) -> _Claim:
    """The speedup of ``r`` over ``i``, its interval (the steps' bootstrap, the blocks' or
    repeats' spread, and every term :func:`_widen` adds) and the verdict it supports."""
    speedup = headroom = None
    ci: tuple[Optional[float], Optional[float]] = (None, None)
    if real_mean and ideal_mean:
        speedup = real_mean / ideal_mean
        headroom = 1.0 - ideal_mean / real_mean
        if min(len(rs), len(is_)) >= MIN_STEADY_STEPS:  # (fewer: an interval of nothing,
            ci = bootstrap_ratio_ci(rs, is_, level=CI_LEVEL, seed=seed)  # 2.10–2.10×)
    blocks = r.settings.get("interleaved") if isinstance(r.settings, dict) else None
    unit = "block" if isinstance(blocks, dict) else "epoch"
    ci_label = f"{CI_LEVEL:.0%} CI"
    repeats = between_repeats(r, i)
    if repeats is not None and ci[0] is not None and ci[1] is not None:
        ratios, (blo, bhi) = repeats
        ci = (min(ci[0], blo), max(ci[1], bhi))  # the spread between repeats counts too
        if len(ratios) < MIN_T_BLOCKS:
            ci_label = f"range of {len(ratios)} {unit}s"
    terms = _widen(r, i, speedup, ci, repeats)
    verdict, reason = _verdict(len(rs), len(is_), headroom, terms.ci)
    on_epochs = isinstance((r.settings or {}).get(EPOCH_PAIR), dict)
    return _Claim(
        speedup, headroom, terms, ci_label, repeats, blocks, unit, on_epochs, verdict, reason
    )


def _to_tell(
    r: Run, k: _Claim, n_real: int, n_ideal: int, spe: Optional[int]
) -> tuple[Optional[int], Optional[int]]:
    """The steps a side (and, on the loop's epochs, the epochs a side) that would narrow
    an interval across a line; (None, None) where more steps would not tell."""
    if k.verdict not in (NOT_ENOUGH_DATA, PARTLY_INPUT_BOUND):
        return None, None
    ci, fixed = k.terms.ci, k.terms.fixed
    if k.on_epochs and k.repeats is not None and spe:
        # the pair's blocks are the loop's epochs: whole epochs a side, each spe steps
        epochs = steps_to_tell(len(k.repeats[0]), ci, fixed)
        if epochs is None:
            return None, None
        epochs = max(epochs, len(k.repeats[0]) + 1)
        if epochs * spe == DEFAULT_STEPS:  # (the default pairs 4 a side)
            epochs += 1
        return epochs * spe, epochs
    tell = steps_to_tell(min(n_real, n_ideal), ci, fixed)
    return (int(math.ceil((r.warmup + tell) / 50) * 50) if tell is not None else None), None


def _waiting(
    r: Run, rd: dict[str, Any]
) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """The real run's share of time waiting for data, its mean wait a step and the rest of
    its step (None where the run did not time ``next()``)."""
    waits = r.steady_wait_s()
    if waits is None or not rd["total_s"]:
        return None, None, None
    wait = sum(waits) / len(waits)
    return sum(waits) / rd["total_s"], wait, rd["mean_s"] - wait


def _simulated(
    r: Run, i: Run, verdict: str, notes: list[str]
) -> tuple[Optional[str], Optional[dict[str, Any]]]:
    """The simulator's prediction line and the workers it advises (where the verdict can
    be told); a failure there is a note, never a lost verdict."""
    prediction = None
    if verdict == NOT_ENOUGH_DATA:
        return None, None
    try:
        p = predict_from_runs(r, i)
        if p is None:
            return None, None
        prediction = p.line()
        w = p.advised()
        if w is not None:  # (never more workers than the tool itself would start)
            w = min(w, max_workers())
        if w is not None and w != r.loader_settings.get("num_workers"):
            return prediction, {"num_workers": w}
    except LoadEvalError as e:  # inputs the simulator cannot use
        notes.append(Note(f"no simulator prediction ({e})", "no_prediction"))
    except Exception as e:  # a bug there: a prediction is a bonus, never lose the verdict
        log.warning("loadeval_nb: the simulator failed; no prediction.", exc_info=True)
        notes.append(Note(f"no simulator prediction ({type(e).__name__}: {e})", "no_prediction"))
    return prediction, None


BUSY_SHARE = 0.2
"""Other processes using this share of the machine's cores (and half a core at least)
during a run make it disturbed."""


MIN_T_BLOCKS = 3
"""Fewest block (or epoch) speedups a t-interval is taken from: with two, Student's t of
one degree of freedom (12.7) makes an interval of nothing (1.12× and 1.40× give
0.31–5.15×), so two blocks give their own range instead."""

ENDLESS_STEPS = 10
"""A loader longer than this many times the steps measured ..."""
ENDLESS_EPOCH_S = 86400.0
"""... whose epoch would take longer than this (a day, at the real step) is no epoch
that will be run (a sampler that hardly ends): time saved is said per 1000 steps."""

DRIFT_MIN = 0.01
"""A drift between two runs measured one after the other counts when it moves the
speedup by this share at least (and is beyond the noise of the runs' segments)."""


@dataclass
class _Seen:
    """What the verdict's notes are said from: the two runs and what :func:`_diagnose`
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
    if isinstance(c.blocks, dict):
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
    if isinstance(c.blocks, dict):
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
    """Sides one after the other in two processes: the interval widened by what changes
    between them."""
    apart = c.apart
    if apart is None or apart[0] < 0.005:
        return
    yield (
        "the sides ran one after the other in two processes, so what changes between two "
        "processes (a start, memory and threads, the machine's clock) is in the difference, "
        f"beyond what either run shows: the interval holds the speedup give or take "
        f"{apart[0]:.0%} (measured between two processes on a quiet machine)"
    )


def _disagree(c: _Seen) -> Iterator[str]:
    """Blocks (or epochs) that disagree beyond their noise."""
    disagree = blocks_disagree(c.r, c.i)
    if disagree is not None:
        yield (
            f"the {'blocks' if isinstance(c.blocks, dict) else 'epochs'} disagree beyond "
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
        sides = "the real and the ideal " + (
            "blocks" if isinstance(c.blocks, dict) else "epochs" if c.repeats else "runs"
        )
        widened = (
            f"; their load differed by {abs(gap.cores):.2f} cores (± {gap.error:.2f}) between "
            f"{sides}, which could move the speedup by {gap.share:.0%} either way on "
            f"{gap.cpus} cores: the interval holds that"
        )
    alike = ""
    if c.repeats is not None and len(c.repeats[0]) >= 4:
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
    if isinstance(c.blocks, dict):
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


def epoch_means(run: Run) -> dict[int, float]:
    """Mean steady step of each epoch that has steady steps (seconds), by epoch."""
    return {e: sum(v) / len(v) for e, v in run.steady_by_block().items()}


@dataclass
class _Interval:
    """The speedup's interval and the terms that widened it beyond the steps' (and the
    blocks') own spread."""

    ci: tuple[Optional[float], Optional[float]]
    drift: Optional[tuple[float, float, float]] = None
    """One run after the other, a drift within them: :func:`sequential_drift`."""
    load: Optional[LoadGap] = None
    """A busy machine: the gap in other processes' load between the sides
    (:func:`load_gap`)."""
    apart: Optional[tuple[float, Optional[float]]] = None
    """One run after the other: :func:`between_runs` (the share, the cores taken)."""

    @property
    def fixed(self) -> float:
        """The share either side that no number of steps narrows: the method's floor, the
        gap in other processes' load between the sides, what changes between two runs."""
        return max(
            METHOD_FLOOR,
            self.load.share if self.load else 0.0,
            self.apart[0] if self.apart else 0.0,
        )


def _widen(
    r: Run,
    i: Run,
    speedup: Optional[float],
    ci: tuple[Optional[float], Optional[float]],
    repeats: Optional[tuple[list[float], tuple[float, float]]],
) -> _Interval:
    """Every term that widens the speedup's interval ``ci`` (the steps' bootstrap, united
    with the blocks' or repeats' t-interval), in one place, each where its design calls
    for it and each measured from the runs: a drift within runs measured one after the
    other, what changes between two processes, the gap in other processes' load between
    the sides on a busy machine, and the method's floor under every interval."""
    out = _Interval(ci)
    if ci[0] is None or ci[1] is None or not speedup:
        return out
    lo, hi, mid = ci[0], ci[1], speedup

    def around(share: float) -> None:
        nonlocal lo, hi
        lo, hi = min(lo, mid / (1 + share)), max(hi, mid * (1 + share))

    # other processes' load, measured on each side: where the sides saw different loads,
    # the difference can have moved the speedup by as much as that load could do (a bias,
    # not noise: both ends move)
    out.load = load_gap(r, i)
    if out.load is not None:
        lo, hi = lo / (1 + out.load.share), hi * (1 + out.load.share)
    if repeats is None:
        # one run after the other: a drift within the runs is a drift between them too
        out.drift = sequential_drift(r, i)
        if out.drift is not None:
            lo, hi = min(lo, lo * out.drift[1]), max(hi, hi * out.drift[2])
        # and what changed between two processes (a start, memory and threads, the
        # machine's clock) is in the difference, beyond what either run can see
        out.apart = between_runs(r, i)
        around(out.apart[0])
    # the method's own error against a stopwatch of the same loop, quiet: never a
    # narrower claim than that (bench/coverage.py)
    around(METHOD_FLOOR)
    out.ci = (lo, hi)
    return out


@dataclass(frozen=True)
class LoadGap:
    """The gap in other processes' load between the two sides of a pair on a busy
    machine, measured by the CPU sampler on each side (:func:`load_gap`)."""

    cores: float
    """Other processes' mean load during the real side less theirs during the ideal side
    (cores; positive: the real side saw more)."""
    error: float
    """That gap's 95 % sampling error (cores): the sampler's readings vary tick by tick."""
    share: float
    """The share either way the speedup is held to for it: ``(|cores| + error) / cpus``."""
    cpus: int


def load_gap(r: Run, i: Run) -> Optional[LoadGap]:
    """On a busy machine (:func:`busy_cores` on either side): the gap in other processes'
    load between the sides and what it could do to the speedup; None on a quiet machine
    or without two readings a side.

    Other processes' CPU (``other_pct``, one reading per sampler tick) is averaged over
    each side's ticks. Under a fair scheduler a side's step time can grow with other
    processes' load by at most ``d(load) / cpus`` in log terms (its threads' share of
    ``cpus`` falls from at most ``cpus / (own + load)``), so a gap of ``g`` cores between
    the sides moves their ratio by at most ``g / cpus`` either way: the interval holds the
    speedup that much either side, with the gap's own 95 % sampling error added. A load
    that lands on both sides alike (a process spinning throughout) is no gap: its effect
    is in both sides' steps, the same in the measurement as in the training it stands
    for, and in the blocks' spread."""
    if busy_cores(r) is None and busy_cores(i) is None:
        return None
    sides = []
    for run in (r, i):
        cpu = (run.util or {}).get("cpu") or {}
        v = [x / 100 for x in cpu.get("other_pct") or [] if x is not None]
        if len(v) < 2:
            return None
        sides.append(np.asarray(v, dtype=float))
    a, b = sides
    gap = float(a.mean() - b.mean())
    error = 1.96 * math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    cpus = _cores(r)
    return LoadGap(gap, error, (abs(gap) + error) / cpus, cpus)


def between_repeats(r: Run, i: Run) -> Optional[tuple[list[float], tuple[float, float]]]:
    """For a pair measured in blocks or repeats (one epoch of each side per block): the
    speedup of each block and an interval of their geometric mean: a 95 % t-interval from
    ``MIN_T_BLOCKS`` blocks on, the blocks' own range below; None with fewer than two.

    On a busy machine the load moves the loop's speed between states that outlast a block
    (a step of 3.5 or 5.2 ms by turns, its process at a full core either way: the sibling
    hyperthread's, the caches'), so neighbouring blocks agree more than blocks apart: the
    t-interval counts the blocks as the fewer independent ones their lag-one correlation
    leaves (:func:`blocks_alike`): their mean's variance is taken over that many."""
    a, b = epoch_means(r), epoch_means(i)
    ratios = [a[e] / b[e] for e in sorted(set(a) & set(b)) if a[e] > 0 and b[e] > 0]
    if len(ratios) < 2:
        return None
    if len(ratios) < MIN_T_BLOCKS:
        return ratios, (min(ratios), max(ratios))
    logs = [math.log(x) for x in ratios]
    m = sum(logs) / len(logs)
    sd = math.sqrt(sum((v - m) ** 2 for v in logs) / (len(logs) - 1))
    n = len(logs)
    worth = float(n)
    if busy_cores(r) is not None or busy_cores(i) is not None:
        worth = blocks_alike(logs) or worth
    # (the blocks' variance scaled to the fewer independent ones; the degrees of freedom
    # stay the blocks': a t of one degree for two spells would be an interval of nothing)
    half = t975(n - 1) * sd / math.sqrt(worth)
    return ratios, (math.exp(m - half), math.exp(m + half))


ALIKE_MAX = 0.8
"""The lag-one correlation :func:`blocks_alike` takes at most (a few blocks estimate it
roughly; beyond this the blocks would count as under a ninth of their number)."""


def blocks_alike(logs: list[float]) -> Optional[float]:
    """How many independent blocks ``logs`` (the blocks' log speedups, in time order) are
    worth when neighbours agree: ``n (1 - rho) / (1 + rho)`` for their lag-one
    correlation ``rho`` (an AR(1) series' effective sample size; ``rho`` at most
    :data:`ALIKE_MAX`, two blocks at least); None where they do not agree (``rho <= 0``)
    or there are fewer than four."""
    n = len(logs)
    if n < 4:
        return None
    m = sum(logs) / n
    d = [v - m for v in logs]
    var = sum(x * x for x in d)
    if var <= 0:
        return None
    rho = sum(d[k] * d[k + 1] for k in range(n - 1)) / var
    if rho <= 0:
        return None
    rho = min(rho, ALIKE_MAX)
    return max(2.0, n * (1 - rho) / (1 + rho))


def sequential_drift(r: Run, i: Run) -> Optional[tuple[float, float, float]]:
    """For a pair measured one run after the other: how a drift within the runs moves
    their speedup, as factors ``(estimate, low, high)`` on it; None when the runs show no
    drift beyond the noise of their segments, or one under ``DRIFT_MIN``.

    Each run's steady steps are cut into segments in time and one slope is fitted to the
    log of the segments' means (:func:`drift_slope`); the runs are taken to be back to back,
    so the ideal run's middle comes the real run's second half and the ideal run's first
    half after the real run's middle. A drift seen within the runs over that time is
    between them too: the speedup corrected for it is ``exp(slope × gap)`` times the
    measured one, give or take the slope's 95 % interval."""
    sides = []
    for run in (r, i):
        idx = run.steady_indices()
        if not idx:
            return None
        start = np.asarray(run.start_ns, dtype=float)[idx] / 1e9
        step = np.asarray(run.step_ns, dtype=float)[idx] / 1e9
        sides.append((start, step))
    fit = drift_slope(sides)
    if fit is None:
        return None
    slope, se, df = fit
    (rstart, rstep), (istart, istep) = sides
    r_mid, i_mid = float((rstart + rstep / 2).mean()), float((istart + istep / 2).mean())
    r_end = (r.start_ns[-1] + r.step_ns[-1]) / 1e9
    gap = (r_end - r_mid) + (i_mid - i.start_ns[0] / 1e9)
    t = t975(df)
    if gap <= 0 or abs(slope) <= t * se or abs(math.expm1(slope * gap)) < DRIFT_MIN:
        return None
    half = t * se * gap
    return math.exp(slope * gap), math.exp(slope * gap - half), math.exp(slope * gap + half)


BETWEEN_RUNS = 0.10
"""How far the speedup of two runs of one loop measured one after the other may be off
on a quiet machine, beyond each run's own noise and drift (a second process's start,
memory and threads; the machine's clock): the sequential pair's interval holds the
speedup give or take this share (``bench/coverage.py``: the short-epoch workload,
measured in two processes)."""


METHOD_FLOOR = 0.02
"""The interval is never narrower than the speedup give or take this share: on a quiet
machine the tool's reading of a loop and a stopwatch's of the same loop in one process
differ by up to 2 % beyond the steps' noise (``bench/coverage.py``: the blocks' edges,
the cached batches' cost, the sampler's thread)."""


def _cores(run: Run) -> int:
    return int(run.environment.get("cpu_count") or os.cpu_count() or 1)


def between_runs(r: Run, i: Run) -> tuple[float, Optional[float]]:
    """For a pair measured one run after the other: the share the interval is widened by
    either way for what changes between the runs beyond what either shows
    (:data:`BETWEEN_RUNS` where the runs were two processes), and the cores other
    processes took when they made the machine busy (:func:`busy_cores`; None when it was
    quiet). The gap in their load between the runs is :func:`load_gap`'s."""
    busy = max(busy_cores(r) or 0.0, busy_cores(i) or 0.0) or None
    return (BETWEEN_RUNS if two_processes(r, i) else 0.0), busy


def two_processes(r: Run, i: Run) -> bool:
    """Whether the two runs were measured in two processes (their logs' ``pid``s)."""
    a, b = r.environment.get("pid"), i.environment.get("pid")
    return isinstance(a, int) and isinstance(b, int) and a != b


def busy_cores(run: Run) -> Optional[float]:
    """The cores other processes took during ``run``, when that makes the machine busy
    (:data:`BUSY_SHARE` of its cores, and half a core at least); None otherwise."""
    other = run.mean_cpu_pct("other_pct")
    cores = _cores(run)
    if other is None or other < 50 or other / 100 < BUSY_SHARE * cores:
        return None
    return other / 100


def loader_limited(r: Run) -> Optional[tuple[int, int]]:
    """``(steps asked, the loader's batches)`` when the loader's epoch, not the steps asked,
    limited what the real run measured; None otherwise."""
    settings = r.settings or {}
    asked, got = settings.get("steps"), r.steps_per_epoch()
    if not isinstance(asked, int) or not got or r.status != "complete":
        return None
    plan = settings.get("interleaved")
    if isinstance(plan, dict):
        # the loader's epoch as the plan knew it (its len()); a block is no epoch: a loader
        # without len() limits nothing
        got = plan.get("epoch_seen") or plan.get("epoch") or (r.loader_settings or {}).get("len")
        if not isinstance(got, int) or isinstance(got, bool) or got <= 0:
            return None
        if plan.get("epoch_limited") is True:  # the plan's own word (a loader that ran
            return (asked, got)  # out, with no len() to plan by, is told below)
        # one pass serves both sides: the cache fill, then each side's steady steps
        cached = settings.get("num_cached_batches")
        first = max(r.warmup, cached if isinstance(cached, int) else 0, 1)
        need = first + 2 * max(asked - r.warmup, 0)
        return (asked, got) if got < need else None
    return (asked, got) if got < asked else None


def _signed_pct(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{fmt_pct(abs(x), 1)}"


BLOCKS_DISAGREE_REL = 0.10
"""Blocks of a pair whose speedups differ by less than this never disagree, whatever
their noise (block to block, the steps after a change of side differ a little)."""
Z99 = 2.3263
"""The standard normal's 99th percentile."""


def blocks_disagree(r: Run, i: Run) -> Optional[tuple[float, float]]:
    """The lowest and highest speedup of the blocks (or epochs) of a pair whose blocks
    disagree by more than their steps' noise allows (Cochran's Q over the blocks' log
    speedups against a chi-square 99th percentile) and by ``BLOCKS_DISAGREE_REL`` at
    least; None when they agree or there are fewer than three."""
    a, b = _epoch_stats(r), _epoch_stats(i)
    keys = [e for e in sorted(set(a) & set(b)) if a[e][0] > 0 and b[e][0] > 0]
    if len(keys) < 3:
        return None
    xs, ws = [], []
    for e in keys:
        (ma, va, na), (mb, vb, nb) = a[e], b[e]
        var = va / (na * ma * ma) + vb / (nb * mb * mb)
        if var <= 0:
            return None  # steps of no spread (a fake clock): nothing to weigh them by
        xs.append(math.log(ma / mb))
        ws.append(1.0 / var)
    mean = sum(w * x for w, x in zip(ws, xs)) / sum(ws)
    q = sum(w * (x - mean) ** 2 for w, x in zip(ws, xs))
    df = len(xs) - 1
    # Wilson and Hilferty's chi-square quantile
    limit = df * (1 - 2 / (9 * df) + Z99 * math.sqrt(2 / (9 * df))) ** 3
    # a spread of a few per cent between blocks is what the first steps after a change of
    # side leave (a queue drained, workers catching up): not worth a note by itself
    if q <= limit or max(xs) - min(xs) < math.log(1 + BLOCKS_DISAGREE_REL):
        return None
    return math.exp(min(xs)), math.exp(max(xs))


def _epoch_stats(run: Run) -> dict[int, tuple[float, float, int]]:
    """Mean, variance and count of each epoch's steady steps (two or more)."""
    out = {}
    for e, v in run.steady_by_block().items():
        if len(v) >= 2:
            m = sum(v) / len(v)
            out[e] = (m, sum((x - m) ** 2 for x in v) / (len(v) - 1), len(v))
    return out


def busy_load(run: Run) -> Optional[str]:
    """What other work took of the machine during ``run``, in words (``1.0 of 2 cores in
    other processes``, ``other processes' work on the GPU (up to 2 at a time)``), where it
    made the machine busy; None otherwise."""
    procs = [
        n for n in ((run.util or {}).get("gpu") or {}).get("other_procs") or [] if n is not None
    ]
    if procs and sum(1 for n in procs if n > 0) >= 0.3 * len(procs):
        return f"other processes' work on the GPU (up to {max(procs)} at a time)"
    other = busy_cores(run)
    if other is None:
        return None
    return f"{other:.1f} of {_cores(run)} cores in other processes"


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
