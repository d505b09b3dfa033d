"""The caching ladder: where the input pipeline's time goes, stage by stage.

The same training loop runs against progressively less cached inputs:

====================  ==============================================  ========================
rung                  the loop gets                                   adds over the rung above
====================  ==============================================  ========================
``device``            cached batches already on the GPU               (compute only)
``host``              cached batches in host memory                   host-to-device copy
``samples``           the real DataLoader (sampler, workers,          workers + collation
                      collation, pinning) over a Dataset that
                      serves already-produced samples
``real``              the real DataLoader                             per-sample loading and
                                                                      transforms
====================  ==============================================  ========================

Each stage's cost is the difference of mean step times between neighbouring rungs
that ran; it counts as real only when the block-bootstrap interval of the ratio of
the two means lies above 1 and the difference is at least 5 % of the real step.
Rungs that cannot run are skipped with the reason (no CUDA device; an
IterableDataset, which has no per-item access to cache). After the rungs, the real
rung's per-sample work is split by transform step when the dataset has a pipeline
(:mod:`.transforms.split`). The stage's resource is named from the operating system:
what the workers of the rung that holds it (else the real rung's) spent their time on
(:mod:`..measure.resource`: on a CPU, waiting for one, blocked on I/O, idle).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .._env import loader_settings
from .._facts import Fact, Facts
from .._format import fmt_bytes, fmt_pct, fmt_seconds
from .._stats import blocks_disagree, bootstrap_ratio_ci
from ..errors import LoadEvalError
from ..measure.batches import batch_nbytes
from ..measure.evaluator import LoaderEvaluator
from ..measure.loader import shutdown_persistent_workers
from ..measure.resource import WorkerResource
from ..record.ladderlog import LadderLog, RungLog
from ..record.run import Run, describe_steady
from ..verdict.diagnosis import PARTLY_HEADROOM, ladder_advice
from .result import Result
from .runner import (
    Runner,
    check_many_runs,
    check_run_args,
    evaluator_for,
)
from .samples import sample_rung_loader
from .settings import RunHooks, RunSettings
from .transforms.split import TransformSplit, check_ladder_transforms, ladder_split

RUNGS = ("device", "host", "samples", "real")
RUNG_TITLES = {
    "device": "batches cached on the GPU (compute only)",
    "host": "batches cached in host memory",
    "samples": "real loader over cached samples",
    "real": "the real loader",
}
STAGES = {
    "host": "host-to-device copy",
    "samples": "workers + collation",
    "real": "per-sample loading and transforms",
}
"""What each rung adds over the one above it."""
MIN_STAGE_SHARE = PARTLY_HEADROOM
"""A stage smaller than this share of the real step counts as negligible even when
significant (the verdict's PARTLY INPUT-BOUND threshold)."""


@dataclass
class Rung:
    """One rung: its run, or why it was skipped."""

    name: str
    run: Optional[Run] = None
    skipped: Optional[str] = None
    error: Optional[BaseException] = None

    @property
    def title(self) -> str:
        return RUNG_TITLES[self.name]

    def steady_s(self) -> list[float]:
        return self.run.steady_step_s() if self.run is not None else []

    def stats(self) -> dict[str, Any]:
        return describe_steady([self.run] if self.run is not None else [])

    def blocks(self) -> list[list[float]]:
        """The steady step times of each block (the run's epochs), in order."""
        per = self.run.steady_by_block() if self.run is not None else {}
        return [per[e] for e in sorted(per)]

    def disagrees(self) -> bool:
        """Its blocks (measured at different times) differ beyond their steps' noise."""
        return blocks_disagree(self.blocks())


@dataclass
class Stage:
    """The cost one rung adds over the measured rung above it."""

    name: str  # the rung that adds it
    what: str  # e.g. "host-to-device copy"
    added_s: Optional[float]
    ratio_ci: tuple[Optional[float], Optional[float]]
    significant: bool
    share_of_real: Optional[float]
    within_noise: bool = False
    """A rung's blocks disagreed beyond their noise: the stage is not told apart from
    the machine's drift, never the largest."""


@dataclass
class LadderResult(Result):
    rungs: list[Rung] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    largest: Optional[Stage] = None
    notes: list[str] = field(default_factory=list)
    transforms: Optional[TransformSplit] = None
    """The real rung's per-sample time split by transform step, when there was a split."""

    def rung(self, name: str) -> Optional[Rung]:
        return next((r for r in self.rungs if r.name == name), None)

    def to_log(self) -> LadderLog:
        """The ladder as a record (each rung's run log, its split) that :meth:`save`
        writes and ``compare_runs`` reads."""
        rungs = [
            RungLog(
                r.name,
                r.title,
                STAGES.get(r.name),
                r.run,
                r.skipped,
                f"{type(r.error).__name__}: {r.error}" if r.error is not None else None,
            )
            for r in self.rungs
        ]
        return LadderLog(
            rungs,
            self.label,
            dict(self.loader_settings),
            self.transforms.to_log() if self.transforms is not None else None,
            list(self.notes),
            f"{type(self.error).__name__}: {self.error}" if self.error is not None else None,
        )

    def save(self, path: Any) -> str:
        """Write the ladder as versioned JSON, each rung's run log inside (the layout:
        ``record/ladderlog.py``), for ``python -m loadeval_nb compare`` to read.
        Returns the path."""
        return self.to_log().save(path)

    def resource(self) -> Optional[tuple[str, WorkerResource]]:
        """What the workers spent their time on, and the rung they ran in: the rung of
        the largest stage when that stage is the workers' (samples, real), else the real
        rung; None without workers or a reading of them."""
        names = ["real", "samples"]
        if self.largest is not None and self.largest.name in names:
            names.remove(self.largest.name)
            names.insert(0, self.largest.name)
        for name in names:
            r = self.rung(name)
            reading = r.run.worker_resource if r is not None and r.run is not None else None
            if reading:
                return name, WorkerResource.from_dict(reading)
        return None

    def _cuda(self) -> Optional[bool]:
        """Whether the rungs could use CUDA (None: unknown): the device rung ran, or the
        runs' logs say so."""
        device = self.rung("device")
        if device is not None and device.run is not None:
            return True
        for r in self.rungs:
            said = r.run.environment.get("cuda_available") if r.run is not None else None
            if isinstance(said, bool):
                return said
        return None

    def table(self) -> list[dict[str, Any]]:
        """One row per rung: step statistics and the stage it adds (None when skipped)."""
        stages = {s.name: s for s in self.stages}
        rows = []
        for r in self.rungs:
            st = r.stats()
            s = stages.get(r.name)
            rows.append(
                {
                    "rung": r.name,
                    "title": r.title,
                    "skipped": r.skipped,
                    "steps": st["n"],
                    "mean_step_s": st["mean_s"],
                    "median_step_s": st["median_s"],
                    "steps_per_s": st["steps_per_s"],
                    "samples_per_s": st["samples_per_s"],
                    "adds": s.what if s else STAGES.get(r.name),
                    "added_s": s.added_s if s else None,
                    "significant": s.significant if s else None,
                }
            )
        return rows

    def conclusion(self) -> str:
        """One sentence: the stage that adds the most, or that differences are noise."""
        if self.error is not None:
            return f"The ladder stopped at the {self.failed} rung ({type(self.error).__name__}: {self.error})."
        if not self.stages:
            return "Fewer than two rungs ran, so there is nothing to compare."
        if self.largest is None:
            return (
                "Every stage's cost is within noise (or under 5% of the real step): caching more "
                "of the pipeline would not make steps measurably faster."
            )
        s = self.largest
        share = f" ({fmt_pct(s.share_of_real)} of the real step)" if s.share_of_real else ""
        top = self.transforms.costliest(1) if self.transforms and s.name == "real" else []
        step = f"; {top[0].name} takes {fmt_pct(top[0].share)} of a sample's time" if top else ""
        return f"Largest stage: {s.what}, +{fmt_seconds(s.added_s)} per step{share}{step}."

    def _facts(self) -> tuple[Fact, ...]:
        top = self.transforms.costliest(1) if self.transforms else []
        pin = self.loader_settings.get("pin_memory")
        what = ladder_advice(
            self.largest.name if self.largest else None,
            top[0].name if top else None,
            pin_memory=pin if isinstance(pin, bool) else None,
            cuda=self._cuda(),
        )
        split = (self.transforms.ladder_fact(),) if self.transforms else ()
        found = self.resource()
        resource: tuple[Fact, ...] = ()
        if found is not None:
            name, reading = found
            resource = (Fact.of("resource", f"the {name} rung's workers", [reading.text()]),)
        advice = (Fact.of("advice", "what to do", what),) if what and not self.error else ()
        return split + resource + advice

    def facts(self) -> Facts:
        """The ladder's facts, once: :meth:`text` and the notebook's card render this."""
        rows = []
        for r in self.table():
            if r["skipped"]:
                rows.append((r["rung"], r["title"], "skipped", "", r["skipped"]))
                continue
            add = ""
            if r["added_s"] is not None:
                sign = "+" if r["added_s"] >= 0 else "−"  # a faster rung: "−2.1 ms", not "+-2.1"
                add = f"{sign}{fmt_seconds(abs(r['added_s']))} {r['adds'] or ''}"
                if not r["significant"]:
                    add += " (within noise or under 5%)"
            rate = f"{r['samples_per_s']:,.0f}/s" if r["samples_per_s"] else "n/a"
            rows.append((r["rung"], r["title"], fmt_seconds(r["mean_step_s"]), rate, add))
        return Facts(
            kind="ladder",
            title=f"Caching ladder{' ' + self.label if self.label else ''}",
            headline=self.conclusion(),
            facts=self._facts(),
            columns=("rung", "the loop gets", "mean step", "samples/s", "adds over the rung above"),
            rows=tuple(rows),
            notes=tuple(self.notes),
        )


def compare_rungs(result: LadderResult) -> None:
    """Fill ``stages`` and ``largest`` from the rungs that ran."""
    ran = [r for r in result.rungs if r.run is not None and r.error is None and r.steady_s()]
    real = result.rung("real")
    real_mean = real.stats()["mean_s"] if real is not None and real.run is not None else None
    result.stages = []
    for upper, lower in zip(ran[1:], ran[:-1]):
        a, b = upper.steady_s(), lower.steady_s()
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        lo, hi = bootstrap_ratio_ci(a, b)
        added = ma - mb
        share = added / real_mean if real_mean else None
        what = STAGES[upper.name]
        skipped_between = [
            r.name
            for r in result.rungs
            if RUNGS.index(lower.name) < RUNGS.index(r.name) < RUNGS.index(upper.name)
        ]
        if skipped_between:
            what = " + ".join([STAGES[n] for n in skipped_between] + [what])
        # the blocks of each rung, taken at different times, widen the interval: a stage
        # is the ratio of each block pair too, and it must hold across them
        for ba, bb in zip(upper.blocks(), lower.blocks()):
            if len(ba) >= 2 and len(bb) >= 2:
                blo, bhi = bootstrap_ratio_ci(ba, bb)
                if blo is not None and lo is not None:
                    lo = min(lo, blo)
                if bhi is not None and hi is not None:
                    hi = max(hi, bhi)
        noisy = [r for r in (upper, lower) if r.disagrees()]
        significant = (
            not noisy
            and lo is not None
            and lo > 1.0
            and (share is None or share >= MIN_STAGE_SHARE)
        )
        result.stages.append(
            Stage(upper.name, what, added, (lo, hi), significant, share, within_noise=bool(noisy))
        )
        for r in noisy:
            means = ", ".join(fmt_seconds(sum(b) / len(b)) for b in r.blocks() if b)
            note = (
                f"The {r.name} rung's blocks read {means} a step: they disagree beyond their "
                "noise (the machine's speed changed during the ladder), so the stages next to "
                "it are within noise, never the largest; rerun on a quiet machine."
            )
            if note not in result.notes:
                result.notes.append(note)
        if hi is not None and hi < 1.0 and (share is None or -share >= MIN_STAGE_SHARE):
            # a rung with less cached ran faster than one with more: that is noise or
            # outside load, never a stage that saves time; say so rather than rank it
            result.notes.append(
                f"The {upper.name} rung ran faster than the {lower.name} rung "
                f"({fmt_seconds(ma)} against {fmt_seconds(mb)} a step), which caching more "
                "cannot explain: the machine's load changed during the ladder; rerun it "
                "on a quiet machine before trusting its stages."
            )
    real_stages = [s for s in result.stages if s.significant and (s.added_s or 0) > 0]
    result.largest = max(real_stages, key=lambda s: s.added_s or 0.0, default=None)


def run_ladder(
    loader: Any,
    run_once: Callable[[LoaderEvaluator], None],
    settings: Optional[RunSettings] = None,
    *,
    hooks: Optional[RunHooks] = None,
    label: str = "",
    loader_name: str = "the loader",
    rungs: tuple[str, ...] = RUNGS,
    transforms: Any = "auto",
) -> LadderResult:
    """Run ``run_once`` once per rung (device, host, samples, real) and say which stage of
    the input pipeline costs the most. Like :func:`run_pair`, never raises for a failure
    inside a run: the error is kept in the result with the partial run.

    After the rungs, ``transforms`` splits the real rung's per-sample time by step (see
    :func:`split_transforms`): ``"auto"`` when the dataset has a pipeline, a list of the
    callables to time, or None for no split."""
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown or not rungs:
        raise LoadEvalError(f"rungs must be some of {', '.join(RUNGS)}, not {rungs!r}.")
    check_ladder_transforms(loader, transforms, rungs)
    settings = check_run_args(loader, run_once, settings)
    if not settings.checked:
        check_ladder(loader, settings, loader_name, "keywords")
    hooks = hooks or RunHooks()
    result = LadderResult(label=label, loader_settings=loader_settings(loader), settings=settings)
    order = [r for r in RUNGS if r in rungs]
    torch = _torch()
    has_cuda = torch is not None and torch.cuda.is_available()
    runnable = sum(1 for r in order if r != "device" or has_cuda)
    # two blocks in A B B A order (device, host, samples, real; then back), half the steps
    # each: a burst of outside load lands on every rung instead of being named a stage
    steps = settings.steps
    blocks = 2 if isinstance(steps, int) and steps >= 2 * (settings.warmup + 20) else 1
    if blocks == 2:
        settings = dataclasses.replace(settings, steps=-(-settings.steps // 2))
        result.notes.append(
            f"Rungs measured in two blocks ({', '.join(order)}, then back), "
            f"{settings.steps} steps each, so that load on the machine lands on every rung."
        )
    runner = Runner(result, run_once, settings, hooks, loader_name, runnable * blocks)
    sample_loader: Any = None
    try:
        for name in order:
            rung = Rung(name)
            result.rungs.append(rung)
            source = loader
            if name == "device" and not has_cuda:
                rung.skipped = (
                    "no CUDA device: nothing to cache on; the host rung is the fastest measured"
                )
                continue
            if name == "samples":
                hooks.progress("ladder: making samples for the sample rung")
                sample_loader, why, spent_ns = sample_rung_loader(
                    loader, settings.num_cached_batches, hooks.progress
                )
                if sample_loader is None:
                    rung.skipped = why
                    continue
                samples = sample_loader.dataset.samples
                result.notes.append(
                    f"samples rung: {len(samples)} samples "
                    f"({fmt_bytes(batch_nbytes(samples[0]) * len(samples))}) "
                    f"produced in {fmt_seconds(spent_ns / 1e9)} before it ran."
                )
                source = sample_loader
            make = functools.partial(_rung_evaluator, source, name, settings)
            error = runner.measure(name, make, log_label=label or "ladder")
            rung.error = error
            if name == "samples":  # its workers are not needed while the real rung runs
                shutdown_persistent_workers(sample_loader)
                if error is not None and not isinstance(error, KeyboardInterrupt):
                    # a loader we built failed, not necessarily the user's: go on without it
                    result.error = result.failed = None
                    rung.skipped = f"it failed ({type(error).__name__}: {error})"
                    result.notes.append(
                        "samples rung failed and is left out; the host-to-real difference "
                        "then holds workers, collation, loading and transforms together."
                    )
                    continue
            if error is not None:
                break
        if blocks == 2 and result.error is None:
            for rung in reversed(result.rungs):
                if rung.error is not None or rung.skipped:
                    continue
                error = runner.again(rung.name)
                if error is None:
                    continue
                if rung.name == "samples" and not isinstance(error, KeyboardInterrupt):
                    # as in the first block: a loader we built failed; its first block stands
                    result.error = result.failed = None
                    result.notes.append(
                        f"samples rung failed in its second block ({type(error).__name__}: "
                        f"{error}); its first block is kept."
                    )
                    continue
                break
    finally:
        if sample_loader is not None:
            shutdown_persistent_workers(sample_loader)
        runs = runner.take_all()
        for rung in result.rungs:
            rung.run = runs.get(rung.name)
            if rung.name == "samples" and rung.skipped:
                rung.run = None
    if result.error is None and "real" in order:
        result.transforms, notes = ladder_split(
            loader, transforms, settings.num_cached_batches, hooks.progress
        )
        result.notes += notes
    compare_rungs(result)
    return result


def check_ladder(loader: Any, settings: RunSettings, loader_name: str, spelling: str) -> None:
    """The checks a ladder needs before anything runs, made once (see :func:`plan_run`)."""
    check_many_runs(
        loader, settings, loader_name, spelling, "ladder", "rung",
        "it measures its rungs in two blocks (A B B A) itself; drop repeat, or run a pair.",
        "it measures every rung; drop only.",
    )  # fmt: skip


def _rung_evaluator(
    source: Any, name: str, settings: RunSettings, metrics_file: Optional[str]
) -> LoaderEvaluator:
    """The wrapper for one rung: device and host replay cached batches from there; samples
    and real log the loader they are given (samples: one built on cached samples)."""
    if name in ("device", "host"):
        return evaluator_for(
            source, name, settings, mode="replay", cache_on=name, metrics_file=metrics_file
        )
    # the samples rung's loader is ours: its worker records would only time the cache
    timed = None if name == "real" else False
    return evaluator_for(
        source, name, settings, mode="log", metrics_file=metrics_file, worker_timing=timed
    )


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return torch
