"""The verdict: how much faster would training be with an ideal loader, and where the time
goes. The claim and its interval are :mod:`.interval`'s, the notes :mod:`.notes`' rules;
this module runs them over two runs (``diagnose``) and splits the headroom.

See ``docs/verdict.md`` for the method and thresholds.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

from .._errors import a_kind
from .._format import fmt_seconds
from .._stats import t975
from ..errors import LoadEvalError
from ..measure.loader import max_workers
from ..measure.resource import reading_of
from ..record.run import VARIANT, Run, describe_steady
from ..record.runlog import load_run
from ..whatif.from_runs import predict_from_runs
from .diagnosis import (
    NOT_ENOUGH_DATA,
    Diagnosis,
    Note,
    Tried,
)
from .interval import (
    BETWEEN_RUNS,
    BUSY_SHARE,
    METHOD_FLOOR,
    MIN_T_BLOCKS,
    _claim,
    _to_tell,
    _verdict,
    blocks_alike,
    epoch_means,
    loader_limited,
    steps_to_tell,
)
from .notes import (
    NOTE_RULES,
    _Seen,
    busy_note,
    setup_changes,
    setup_differences,
)

log = logging.getLogger("loadeval_nb")


RunLike = Union[Run, str, "os.PathLike[str]", Any]


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
    gap in load between the arms and the blocks' correlation): the claim alone, no notes
    and no prediction."""
    rs, vs = r.steady_step_s(), v.steady_step_s()
    mean_v = describe_steady([v])["mean_s"]
    k = _claim(r, v, rs, vs, describe_steady([r])["mean_s"], mean_v, seed)
    settings = (v.settings or {}).get(VARIANT)
    return Tried(
        settings=dict(settings) if isinstance(settings, dict) else {},
        speedup=k.speedup,
        speedup_ci=k.terms.ci,
        speedup_ci_label=k.ci_label,
        step_s=mean_v,
        steady_steps=len(vs),
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
            None if limited is None else "interleaved" if r.method == "blocks" else "sequential"
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


ENDLESS_STEPS = 10
"""A loader longer than this many times the steps measured ..."""


ENDLESS_EPOCH_S = 86400.0
"""... whose epoch would take longer than this (a day, at the real step) is no epoch
that will be run (a sampler that hardly ends): time saved is said per 1000 steps."""


__all__ = [
    "BETWEEN_RUNS",
    "BUSY_SHARE",
    "METHOD_FLOOR",
    "MIN_T_BLOCKS",
    "NOTE_RULES",
    "RunLike",
    "SIZE_GAP",
    "SizeGap",
    "_Seen",
    "_claim",
    "_to_tell",
    "_verdict",
    "as_run",
    "blocks_alike",
    "busy_note",
    "diagnose",
    "epoch_means",
    "loader_limited",
    "setup_changes",
    "setup_differences",
    "size_gap",
    "split_headroom",
    "steps_to_tell",
    "stream_mean",
    "tried",
]
