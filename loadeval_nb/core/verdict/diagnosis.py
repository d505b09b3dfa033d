"""The verdict as a record: its words and thresholds, :class:`Diagnosis`, and what it
says (its facts, once, for the text and the notebook's card, and its advice)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from .._facts import Action, Fact, Facts, Piece, Reported
from .._format import fmt_pct, fmt_seconds, fmt_times
from ..measure.resource import REMEDIES, WorkerResource

INPUT_BOUND = "INPUT-BOUND"
PARTLY_INPUT_BOUND = "PARTLY INPUT-BOUND"
NOT_INPUT_BOUND = "NOT INPUT-BOUND"
NOT_ENOUGH_DATA = "NOT ENOUGH DATA"

MIN_STEADY_STEPS = 10
"""Fewer steady steps than this in either run gives NOT ENOUGH DATA."""
INPUT_BOUND_HEADROOM = 0.20
"""Headroom (1 - ideal/real) at or above this, significantly, is INPUT-BOUND (speedup >= 1.25x)."""
PARTLY_HEADROOM = 0.05
"""Headroom at or above this, significantly, is PARTLY INPUT-BOUND (speedup >= ~1.05x)."""
CI_LEVEL = 0.95
SPLIT_SHARE = 1 / 3
"""A part of the headroom split (waiting, CPU taken by loading) under this share is not
what the advice is about; both parts at least this share: the advice names both."""
CONTENTION = 0.15
"""Real steps slower than ideal ones by this share apart from waiting: a cost besides data."""
WORTH = 1.0 / (1.0 - PARTLY_HEADROOM)
"""The first line (≈1.053×): a gain under it is not worth a change."""
LARGE = 1.0 / (1.0 - INPUT_BOUND_HEADROOM)
"""The second line (1.25×): a gain over it is large."""
PER_STEPS = 1000
"""Time saved is said per this many steps when the loader's epoch is no epoch that will
be run (:attr:`Diagnosis.epoch_endless`)."""


@dataclass
class Tried:
    """A variant arm's gain over the real loader, measured in the same pass (its blocks
    interleaved with the real ones): ``speedup`` is the real mean step over the variant's,
    its interval taken as the ideal's is (block by block, widened where the machine was
    busy)."""

    settings: dict[str, Any]
    """The settings the variant changed (``{"num_workers": 4}``)."""
    speedup: Optional[float]
    speedup_ci: tuple[Optional[float], Optional[float]] = (None, None)
    speedup_ci_label: str = "95% CI"
    step_s: Optional[float] = None
    """The variant's mean steady step."""
    steady_steps: int = 0
    advised: bool = False
    """What the first pass's advice named (``--try advice``)."""

    @property
    def words(self) -> str:
        """``num_workers=4, pin_memory=True``, as a user writes it."""
        return ", ".join(f"{k}={v!r}" for k, v in self.settings.items())

    @property
    def too_few(self) -> bool:
        """Whether the variant had too few blocks for a 95 % interval (its interval is the
        range of two blocks): a range of two is no claim to rank or advise on."""
        return self.speedup_ci_label.startswith("range of")

    @property
    def outcome(self) -> str:
        """``"faster"`` (the whole interval above 1), ``"slower"`` (below 1), or
        ``"unclear"`` (across 1, no interval, or too few blocks for one: :attr:`too_few`)."""
        lo, hi = self.speedup_ci
        if self.too_few:
            return "unclear"
        if lo is not None and lo > 1.0:
            return "faster"
        if hi is not None and hi < 1.0:
            return "slower"
        return "unclear"

    def text(self) -> str:
        """``1.42× faster (95% CI 1.35–1.50×), measured in this pass``."""
        if self.speedup is None:
            return f"not measured: {self.steady_steps} steady steps"
        lo, hi = self.speedup_ci
        ci = f" ({self.speedup_ci_label} {lo:.2f}–{hi:.2f}×)" if lo is not None else ""
        said = {
            "faster": f"{fmt_times(self.speedup)} faster{ci}",
            "slower": f"slower: {fmt_times(self.speedup)} the speed{ci}",
            "unclear": f"{fmt_times(self.speedup)}{ci}: not told apart from the loader as it is"
            + (
                " (too few blocks a side for a 95% interval: a longer pass gives it more)"
                if self.too_few
                else ""
            ),
        }[self.outcome]
        return f"{said}, measured in this pass"


class Note(str):
    """One of the verdict's notes: the sentence, and which rule said it (``rule``: the name
    of its rule in the verdict's rules, such as ``busy_runs`` or ``short_loader``; ``""``
    for a note said elsewhere). A ``str`` everywhere a note is read or saved."""

    rule: str

    def __new__(cls, text: str, rule: str = "") -> Note:
        note = super().__new__(cls, text)
        note.rule = rule
        return note


@dataclass
class Diagnosis(Reported):
    """The comparison of a real run with an ideal (replayed-cache) run. Times in seconds."""

    verdict: str
    reason: str
    real_step_s: Optional[float]
    ideal_step_s: Optional[float]
    speedup: Optional[float]
    headroom: Optional[float]
    speedup_ci: tuple[Optional[float], Optional[float]]
    real_median_s: Optional[float]
    ideal_median_s: Optional[float]
    real_p90_s: Optional[float]
    ideal_p90_s: Optional[float]
    real_samples_per_s: Optional[float]
    ideal_samples_per_s: Optional[float]
    real_steps_per_s: Optional[float]
    ideal_steps_per_s: Optional[float]
    wait_share: Optional[float]
    """Fraction of the real run's steady time spent waiting inside ``next()``."""
    real_wait_s: Optional[float]
    """Mean wait for data per real step."""
    real_other_s: Optional[float]
    """Mean rest of a real step (compute, host-to-device copy, Python): step minus wait."""
    steps_per_epoch: Optional[int]
    time_saved_per_epoch_s: Optional[float]
    real_epoch_s: Optional[float]
    real_gpu_util_pct: Optional[float]
    ideal_gpu_util_pct: Optional[float]
    real_steady_steps: int
    ideal_steady_steps: int
    notes: list[str] = field(default_factory=list)
    real_h2d_s: Optional[float] = None
    """Mean host-to-device copy time (GPU, CUDA events) of a real step; None without CUDA."""
    disturbed: list[str] = field(default_factory=list)
    """The runs ("real", "ideal") during which other processes took a material share of
    the machine's CPU: their times, and the comparison, may be off."""
    real_startup_s: Optional[float] = None
    """``iter()`` to the first batch of the real run (worker spawn, first fetch): reported
    apart, never in the step times."""
    ideal_startup_s: Optional[float] = None
    prediction: Optional[str] = None
    """The simulator's one line on other ``num_workers`` ("with num_workers=6: about 1.8×
    faster"); None when the pair lacks worker timings."""
    num_workers: Optional[int] = None
    """The real run's loader's ``num_workers`` (None: not a DataLoader), so that advice
    about workers fits the loader."""
    pin_memory: Optional[bool] = None
    """The real run's loader's ``pin_memory`` (None: unknown), so that advice never asks
    for what is on already."""
    cuda: Optional[bool] = None
    """Whether the real run's process could use CUDA (its run log's environment; None:
    unknown): without it, pinned memory and host-to-device copies are not advice."""
    speedup_ci_label: str = "95% CI"
    """What ``speedup_ci`` is: a 95 % interval, or with two blocks (or repeats) a side,
    too few for one, their range widened by the steps' noise (``"range of 2 blocks"``)."""
    loader_limited: Optional[str] = None
    """``"interleaved"`` or ``"sequential"`` when the loader's epoch, not the steps asked,
    limited what was measured (in one interleaved pass, or in each run): more steps cannot
    come from one pass over it; None otherwise."""
    steps_to_tell: Optional[int] = None
    """For an interval that lies across a line (NOT ENOUGH DATA, or PARTLY across the
    second): about how many steps a side (warm-up included) would put it on one side; None
    when it lies across none, or the gain is too close to its line to place."""
    epochs_to_tell: Optional[int] = None
    """Where the pair's blocks were the loop's own epochs: the whole epochs a side that
    ``steps_to_tell`` stands for (``--steps`` measures that many of them); None otherwise."""
    on_epochs: bool = False
    """The pair was measured on the loop's own epochs (its run logs' ``epoch_pair``)."""
    fixed_share: Optional[float] = None
    """The share either side of the speedup that no number of steps narrows (the method's
    floor, the gap in other processes' load between the sides, what changes between two
    runs), as the interval holds it; None without an interval."""
    epoch_endless: bool = False
    """The loader's length is no epoch that will be run (a sampler that hardly ends: many
    times the steps measured, and days of steps): time saved is said per 1000 steps."""
    cache_size_gap: Optional[float] = None
    """How far the cached batches the ideal served are from the real stream, by what a
    step's cost grows with (non-padding tokens, else elements): their mean size over the
    stream's, minus 1 (-0.38: 38 % smaller); None: not known."""
    ideal_measured_step_s: Optional[float] = None
    """The ideal step as measured, when the ideal was size-matched to the stream (then
    ``ideal_step_s`` is the matched one); None otherwise."""
    contended_step_s: Optional[float] = None
    """Mean step of the contended arm (cached batches while the loader kept producing);
    None: the pair had no such arm."""
    waiting_s: Optional[float] = None
    """Of the real step's headroom, the time a step spends waiting for data: real minus
    contended (seconds a step)."""
    waiting_ci: tuple[Optional[float], Optional[float]] = (None, None)
    contention_s: Optional[float] = None
    """Of the headroom, the CPU (and the batches' hand-over) loading takes from the step
    while it runs beside it: contended minus ideal (seconds a step)."""
    contention_ci: tuple[Optional[float], Optional[float]] = (None, None)
    tried: Optional[Tried] = None
    """The variant arm's gain (``--try``), measured in the same pass; None without one."""
    advised: Optional[dict[str, Any]] = None
    """The settings the advice names as worth a try (the simulator's ``num_workers``, at
    most the 4 a CPU the tool starts), what ``--try advice`` measures; None where it names
    none."""
    worker_resource: Optional[WorkerResource] = None
    """What the real run's workers spent their time on, read from the operating system
    (its run log's ``worker_resource``: on a CPU, blocked on I/O, idle, ...); None: no
    workers (``num_workers=0``), or no reading of them (an older log)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("speedup_ci", "waiting_ci", "contention_ci"):
            d[k] = list(getattr(self, k))
        if self.worker_resource is not None:  # as the run log keeps it
            d["worker_resource"] = self.worker_resource.to_dict()
        if self.tried is not None:
            d["tried"]["speedup_ci"] = list(self.tried.speedup_ci)
        return d

    @property
    def noted(self) -> list[str]:
        """The rules that said the notes, in order (``["design", "busy_runs"]``): what a
        program reads where a person reads :attr:`notes`."""
        return [n.rule for n in self.notes if isinstance(n, Note) and n.rule]

    @property
    def resource(self) -> Optional[str]:
        """The real run's workers' resource (``cpu``, ``threads``, ``storage``,
        ``waiting``, ``idle``), when one was named; None otherwise (``unknown`` too)."""
        r = self.worker_resource
        return r.kind if r is not None and r.kind in REMEDIES else None

    @property
    def contention_bound(self) -> Optional[bool]:
        """True when the CPU loading takes from the step is most of the headroom (and not
        noise), False when waiting for data is, None without the contended arm."""
        if self.waiting_s is None or self.contention_s is None:
            return None
        lo = self.contention_ci[0]
        return self.contention_s > self.waiting_s and (lo is None or lo > 0)

    @property
    def headroom_split(self) -> Optional[str]:
        """What the headroom is, by the contended arm: ``"waiting"`` (for data; the CPU
        loading takes under a third of it, or not beyond noise), ``"contention"`` (the CPU
        loading takes, two thirds of it or more, beyond noise), ``"both"`` (each a third
        or more, each beyond noise); None without the contended arm or the headroom."""
        w, c = self.waiting_s, self.contention_s
        if w is None or c is None or w + c <= 0:
            return None
        share = c / (w + c)
        c_real = self.contention_ci[0] is None or self.contention_ci[0] > 0
        w_real = self.waiting_ci[0] is None or self.waiting_ci[0] > 0
        if share < SPLIT_SHARE or not c_real:
            return "waiting"
        if share > 1 - SPLIT_SHARE or not w_real:
            return "contention"
        return "both"

    def facts(self) -> Facts:
        """The diagnosis's facts, once: :meth:`text` and the notebook's verdict card
        render this."""
        return diagnosis_facts(self)


def _rate(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:,.0f} samples/s"


def _step_fact(d: Diagnosis, which: str) -> Fact:
    mean, median, p90 = (getattr(d, f"{which}_{k}") for k in ("step_s", "median_s", "p90_s"))
    rate, n = getattr(d, f"{which}_samples_per_s"), getattr(d, f"{which}_steady_steps")
    return Fact(
        f"{which}_step",
        f"{which} step",
        f"{fmt_seconds(mean)} mean (median {fmt_seconds(median)}, p90 {fmt_seconds(p90)}), "
        f"{_rate(rate)}, {n} steady steps",
    )


def diagnosis_facts(d: Diagnosis) -> Facts:
    """See :meth:`Diagnosis.facts`."""
    facts = [_step_fact(d, "real"), _step_fact(d, "ideal")]
    if d.speedup is not None:
        lo, hi = d.speedup_ci
        few = min(d.real_steady_steps, d.ideal_steady_steps)
        ci = (
            f" ({d.speedup_ci_label} {lo:.2f}–{hi:.2f}×)"
            if lo is not None and hi is not None
            else f" (no interval from {few} steady steps)"
            if few < MIN_STEADY_STEPS
            else ""
        )
        facts.append(
            Fact(
                "speedup",
                "speedup with an ideal loader",
                f"{fmt_times(d.speedup)}{ci}; headroom {fmt_pct(d.headroom, 1)}",
            )
        )
    if d.wait_share is not None:
        facts.append(
            Fact(
                "wait",
                "waiting for data",
                f"{fmt_seconds(d.real_wait_s)} per step ({fmt_pct(d.wait_share)} of the time), "
                f"the rest {fmt_seconds(d.real_other_s)} (ideal step {fmt_seconds(d.ideal_step_s)})",
            )
        )
    if d.real_h2d_s is not None and d.real_wait_s is not None and d.real_step_s is not None:
        rest = max(0.0, d.real_step_s - d.real_wait_s - d.real_h2d_s)
        facts.append(
            Fact(
                "step_split",
                "a real step, split",
                f"input wait {fmt_seconds(d.real_wait_s)}, host-to-device copies "
                f"{fmt_seconds(d.real_h2d_s)} (GPU time; non_blocking copies overlap compute), "
                f"compute and the rest {fmt_seconds(rest)}",
            )
        )
    lo = d.speedup_ci[0]
    gain = lo is not None and lo > 1.0  # something to save: the interval clears 1
    if gain and d.epoch_endless and d.real_step_s is not None and d.ideal_step_s is not None:
        facts.append(
            Fact(
                "saved",
                f"time saved per {PER_STEPS} steps",
                f"{fmt_seconds((d.real_step_s - d.ideal_step_s) * PER_STEPS)} of "
                f"{fmt_seconds(d.real_step_s * PER_STEPS)}",
            )
        )
    if gain and d.time_saved_per_epoch_s is not None and d.steps_per_epoch:
        facts.append(
            Fact(
                "saved",
                f"time saved per epoch of {d.steps_per_epoch} steps",
                f"{fmt_seconds(d.time_saved_per_epoch_s)} of {fmt_seconds(d.real_epoch_s)}"
                if d.time_saved_per_epoch_s >= 1e-9  # less is said in words, never "0 ns"
                else f"none: an ideal loader would not shorten the {fmt_seconds(d.real_epoch_s)} "
                "epoch",
            )
        )
    if d.real_startup_s is not None:
        # a replay starts from memory: its start-up is worth a mention only when it took time
        slow = d.ideal_startup_s is not None and d.ideal_startup_s >= 1e-3
        ideal = f", ideal {fmt_seconds(d.ideal_startup_s)}" if slow else ""
        facts.append(
            Fact(
                "startup",
                "start-up (to the first batch)",
                f"real {fmt_seconds(d.real_startup_s)}{ideal}; not in the step times",
            )
        )
    if d.real_gpu_util_pct is None and d.ideal_gpu_util_pct is None:
        gpu = "n/a (no NVIDIA GPU readings)"
    else:
        gpu = f"real {_gpu(d.real_gpu_util_pct)}, ideal {_gpu(d.ideal_gpu_util_pct)}"
    if d.waiting_s is not None and d.contention_s is not None:
        facts.append(Fact("headroom_split", "headroom split", _split_text(d)))
    if d.worker_resource is not None:
        facts.append(Fact("resource", "the real run's workers", d.worker_resource.text()))
    facts.append(Fact("gpu", "GPU utilisation", gpu))
    if d.prediction:
        facts.append(Fact("prediction", "simulator", d.prediction))
    if d.tried is not None:
        ceiling = f"; an ideal loader: {fmt_times(d.speedup)}" if d.speedup is not None else ""
        advised = " (what the first pass advised)" if d.tried.advised else ""
        facts.append(Fact("tried", f"with {d.tried.words}{advised}", f"{d.tried.text()}{ceiling}"))
    facts.append(Fact.of("advice", "what to do", advice(d)))
    return Facts(
        kind="verdict",
        title="Verdict",
        badge=d.verdict,
        headline=f"{d.reason}.",
        facts=tuple(facts),
        notes=tuple(d.notes),
    )


def _gpu(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.0f}%"


def _interval(x: float, ci: tuple[Optional[float], Optional[float]]) -> str:
    lo, hi = ci
    if lo is None or hi is None:
        return fmt_seconds(x)
    return f"{fmt_seconds(x)} (95% CI {fmt_signed(lo)} to {fmt_signed(hi)})"


def fmt_signed(x: float) -> str:
    return ("-" if x < 0 else "+") + fmt_seconds(abs(x))


def _split_text(d: Diagnosis) -> str:
    """``waiting for data 3.3 ms a step (95% CI ...), CPU taken by loading 0.2 ms (...)``."""
    assert d.waiting_s is not None and d.contention_s is not None
    return (
        f"waiting for data {_interval(d.waiting_s, d.waiting_ci)} a step; CPU taken by "
        f"loading {_interval(d.contention_s, d.contention_ci)} a step (ideal while loading "
        f"{fmt_seconds(d.contended_step_s or 0.0)})"
    )


def _split_advice(d: Diagnosis) -> list[Piece]:
    """What the split says to do, after the rest of the advice."""
    split = d.headroom_split
    if split is None or d.verdict not in (INPUT_BOUND, PARTLY_INPUT_BOUND):
        return []
    if split == "contention":
        return [
            " Most of the headroom is CPU that loading takes from the step, not waiting: a "
            f"faster loader will not buy it back. {_LESS_CPU}"
        ]
    faster = _FASTER.get(d.resource or "", _FASTER[""])
    if split == "both":
        return [
            f" The headroom is both: {fmt_seconds(d.waiting_s or 0.0)} a step waiting for "
            f"data, which a faster or more parallel loader ({faster}) buys, and "
            f"{fmt_seconds(d.contention_s or 0.0)} of CPU that loading takes from the step, "
            f"which it does not. For that part: {_LESS_CPU}"
        ]
    if d.resource == "idle":  # the workers are not the limit: the hand-over said above is
        return [
            " Most of the headroom is waiting for data, not CPU taken from the step: handing "
            "the batches over faster buys it, not more workers."
        ]
    return [
        " Most of the headroom is waiting for data, not CPU taken from the step: a faster or "
        f"more parallel loader ({faster}) buys it."
    ]


_FASTER = {
    "": "more workers, cheaper transforms, faster storage",
    "cpu": "more workers where cores are free, cheaper transforms",
    "storage": "faster storage, reading ahead, caching the files",
    "waiting": "more workers, to overlap the workers' waits",
    "idle": "a faster hand-over of its batches, not more workers",
}
"""What makes the loader faster, by its workers' resource (the rest: any of it)."""


_OFF_CPU = ("idle", "waiting", "storage")
"""The workers' resources that keep them off the CPU: they take none from the step."""


_LESS_CPU = (
    "Use fewer or cheaper workers, pin them to cores the step does not use, lower the "
    "step's intra-op threads (torch.set_num_threads), or move the loading work off the CPU "
    "(GPU decoding and augmentation)."
)


def advice(d: Diagnosis) -> list[Piece]:
    """The next step, from what was measured: the cause named, then what to try (text and
    :class:`Action` pieces, which each front end spells its way). On a busy machine, the
    advice to rerun when it is quiet comes beside it, never instead of it."""
    out = [*_tried_advice(d), *_advice(d), *_split_advice(d)]
    if d.disturbed:
        runs = " and ".join(d.disturbed) + (" runs" if len(d.disturbed) > 1 else " run")
        out = [
            *out,
            " Rerun when the machine is quiet to confirm it: other processes were using it "
            f"during the {runs}, so these numbers may be off.",
        ]
    return out


def _tried_advice(d: Diagnosis) -> list[Piece]:
    """What the variant measured, first: the advice the pass proved or disproved."""
    t = d.tried
    if t is None or t.speedup is None:
        return []
    v_lo, ideal_hi = t.speedup_ci[0], d.speedup_ci[1]
    if t.outcome == "faster" and v_lo is not None and ideal_hi is not None and v_lo > ideal_hi:
        # the ideal loader is the ceiling of any loader setting: past it, the pass was
        # disturbed, and no advice rests on it
        return [
            f"{t.words} measured faster than an ideal loader ({fmt_times(t.speedup)} against "
            f"{fmt_times(d.speedup)}), which no loader setting can be: something else changed "
            "the steps between its blocks and the others' (another process, the machine's "
            "clock); rerun the pass before acting on it. "
        ]
    if t.outcome == "faster":
        return [
            f"Set {t.words}: it made the steps {fmt_times(t.speedup)} faster, measured in "
            "this pass. "
        ]
    if t.outcome == "slower":
        return [f"Leave out {t.words}: it made the steps slower, measured in this pass. "]
    if t.too_few:
        return [
            f"{t.words} had too few blocks a side to tell ({fmt_times(t.speedup)}, "
            f"{t.speedup_ci_label}): a longer pass (more steps, or more batches an epoch) "
            "gives it the blocks to. "
        ]
    return [f"{t.words} made no difference that these steps can tell ({fmt_times(t.speedup)}). "]


FLOOR_SHARE = 0.0201
"""A fixed share above the method's floor (±2 %): the gap in load between the sides, or two runs'."""


def _not_enough_advice(d: Diagnosis) -> list[Piece]:
    """NOT ENOUGH DATA's advice: what would tell the difference from noise (more steps,
    more epochs, another loader), or why nothing would."""
    if "the epoch is the limit" in (d.reason or "") or d.loader_limited:
        out: list[Piece] = [
            "The loader's epoch is the limit, not the number of steps: more steps cannot "
            "come from one pass over it. Use a longer loader, or loop over several epochs "
            "of it, so that the difference can be told from noise"
        ]
        if d.loader_limited == "interleaved":  # one pass held both sides: give each its own
            return [
                *out,
                "; or measure the sides one after the other, a whole pass each (",
                Action("interleave", False),
                ").",
            ]
        return [*out, "."]
    lo, hi = d.speedup_ci
    if d.steps_to_tell is not None and d.epochs_to_tell is not None:
        return [
            "Measure more of the loop's epochs (",
            Action("steps", d.steps_to_tell),
            f": {d.epochs_to_tell} epochs a side) to tell it: about that many would "
            "narrow the interval to one side of the line.",
        ]
    if d.steps_to_tell is not None:
        return [
            "Run more steps (",
            Action("steps", d.steps_to_tell),
            ", or ",
            Action("steps", "auto"),
            ") to tell it: about that many a side would narrow the interval to one "
            "side of the line.",
        ]
    if lo is not None and hi is not None and hi < LARGE:
        return [
            f"The gain is at most {fmt_pct(hi - 1.0)}, too close to the "
            f"{fmt_pct(WORTH - 1.0)} line to place with a number of steps worth running: "
            "little either way; make the step itself faster first (model, batch size, "
            "mixed precision)."
        ]
    if d.fixed_share is not None and d.fixed_share > FLOOR_SHARE:
        # the part of the interval that steps do not narrow reaches the line
        return [
            "No number of steps narrows this interval: the gap in other processes' load "
            f"between the sides (or what changes between two runs) keeps it the speedup give or "
            f"take {fmt_pct(d.fixed_share)} whatever the steps. Measure on a quiet "
            "machine, the sides interleaved in one process (the default)."
        ]
    if d.on_epochs and d.steps_per_epoch:
        return [
            "Measure more of the loop's epochs (",
            Action("steps", 16 * d.steps_per_epoch),
            ": 16 epochs a side) so that the difference can be told from noise.",
        ]
    return [
        "Run more steps (",
        Action("steps", 400),
        ", or ",
        Action("steps", "auto"),
        ") so that the difference can be told from noise.",
    ]


def _advice(d: Diagnosis) -> list[Piece]:
    if d.verdict == NOT_ENOUGH_DATA:
        return _not_enough_advice(d)
    if d.verdict == NOT_INPUT_BOUND:
        return [
            "The loader is not what holds training back: make the step itself faster (model, "
            "batch size, mixed precision); other loader settings will not buy much."
        ]
    out: list[Piece] = []
    step = d.real_step_s or 0.0
    if d.real_h2d_s and step and d.real_h2d_s / step >= CONTENTION:
        share = f"Host-to-device copies take {fmt_pct(d.real_h2d_s / step)} of a step (GPU time): "
        out += [
            share
            + (
                "the loader pins memory already; unless they already are, make the copies "
                ".to(device, non_blocking=True) so they overlap compute"
                if d.pin_memory
                else "unless they already are, make them pin_memory=True with "
                ".to(device, non_blocking=True) so they overlap compute"
            )
            + ", or keep the data on the GPU (",
            Action("cache_on", "device"),
            " shows what that buys).",
        ]
    waits = d.wait_share is not None and d.wait_share >= 0.1
    if waits:
        out += [f"The loop waits for data {fmt_pct(d.wait_share)} of the time", *_waits(d)]
    slower = (
        d.real_other_s / d.ideal_step_s - 1.0
        if d.real_other_s is not None and d.ideal_step_s
        else None
    )
    if slower is not None and slower > CONTENTION and not out:
        if d.num_workers == 0 and (tried := _tried_workers(d)):
            out += [  # workers were measured in this pass, and bought nothing
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits, "
                f"and num_workers={tried}, measured in this pass, made them no faster: the "
                "loading in the loop's thread is not what slows the step. Try fewer "
                "intra-op threads (",
                Action("sweep", "num_threads=1,2"),
                "), or measure the stages of a batch (",
                Action("ladder"),
                ").",
            ]
        elif d.num_workers == 0:  # no workers to compete: loading runs in the step itself
            out += [
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits: "
                "with num_workers=0 the loading runs inside the training process, between "
                "the steps' work. Try DataLoader workers, or fewer intra-op threads (",
                Action("sweep", "num_workers=0,1,2; num_threads=1,2"),
                ").",
            ]
        elif (
            (r := d.worker_resource) is not None
            and r.close_call()
            and d.num_workers
            and _tried_workers(d) is None
        ):
            # on a CPU and off it within a few points: which holds them is not told, so
            # the advice is the measurement that tells, the same for either side of it
            off = max(r.blocked_io or 0.0, r.waiting or 0.0)
            out += [
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits, "
                f"and the workers were read about as long on a CPU ({fmt_pct(r.on_cpu)}) as "
                f"off it ({fmt_pct(off)}): whether fewer of them would give the step its CPU "
                "back is not told by that reading. Measure it in the same pass (",
                Action("variants", f"num_workers={max(d.num_workers - 1, 0)}"),
                ").",
            ]
        elif d.resource in _OFF_CPU:  # read to be off the CPU: not what takes it
            out += [
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits, "
                f"but the workers were read to be off the CPU ({d.resource}): they are not "
                "what takes it from the step, so fewer workers would not buy it back; the "
                "rest is host-to-device copies, cached batches that cost less than real "
                "ones, or the machine. Measure the stages of a batch (",
                Action("ladder"),
                ").",
            ]
        elif (tried := _tried_workers(d)) is not None and tried < (d.num_workers or 0):
            out += [  # fewer workers were measured in this pass, and bought nothing
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits, "
                f"and fewer workers (num_workers={tried}, measured in this pass) made them no "
                "faster: the CPU the step lacks is not the workers'. Try fewer intra-op "
                "threads (",
                Action("sweep", "num_threads=1,2"),
                "), or measure the stages of a batch (",
                Action("ladder"),
                ").",
            ]
        else:
            out += [
                f"Steps take {_longer(slower)} ideal ones although the loop hardly waits: "
                "the loader's workers compete with training for CPU cores. Try fewer "
                "workers or fewer intra-op threads (",
                Action("sweep", "num_workers=1,2; num_threads=1,2"),
                ").",
            ]
    if not out and d.num_workers == 0 and (tried := _tried_workers(d)):
        # workers were measured in this pass and bought nothing: never advise them again
        return [
            f"With num_workers=0 every batch is loaded in the loop's own thread, but "
            f"num_workers={tried}, measured in this pass, did not make the steps measurably "
            "faster: the loading is not what holds the step back. Measure the stages of a "
            "batch (",
            Action("ladder"),
            ") before you change the loader.",
        ]
    if not out and d.num_workers == 0:
        # no workers: every batch is loaded in the loop's own thread, between the steps
        gist = _sim_gist(d)
        return [
            "With num_workers=0 every batch is loaded in the training loop's own thread, "
            "between the steps: add DataLoader workers"
            + (f" (the simulator: {gist})" if gist else "")
            + " (",
            Action("sweep", "num_workers=0,1,2"),
            ").",
        ]
    if not out and d.resource != "idle":
        # nothing measured names the cost: say so, and how to find it
        copies = (
            "host-to-device copies (pin_memory=True with .to(device, non_blocking=True) "
            "overlaps them), "
            if d.cuda and d.pin_memory is not True
            else "host-to-device copies, "
            if d.cuda
            else ""
        )
        return [
            "Neither the wait for data nor the workers' use of the CPU accounts for the "
            f"difference: it may be {copies}cached batches that cost less than real ones, "
            "or the machine between the blocks. Measure the stages of a batch (",
            Action("ladder"),
            ") before you change the loader.",
        ]
    if not out:  # the workers keep their queue full: handing the batches over is the cost
        # pinned memory is advice only where there is a GPU to copy to and it is off
        tries = [
            *(["pin_memory"] if d.cuda and d.pin_memory is not True else []),
            "a lighter collate_fn",
            "larger batches with fewer steps",
        ]
        return [
            "Collation and handing batches over cost time in the training process: try "
            + ", ".join(tries[:-1])
            + (", or " if len(tries) > 2 else " or ")
            + tries[-1]
            + "."
        ]
    # two causes are two sentences
    return [p for i, part in enumerate(_sentences(out)) for p in ([" "] if i else []) + part]


def _sentences(pieces: list[Piece]) -> list[list[Piece]]:
    """``pieces`` cut after each text piece that ends a sentence."""
    out: list[list[Piece]] = [[]]
    for p in pieces:
        out[-1].append(p)
        if isinstance(p, str) and p.endswith("."):
            out.append([])
    return [s for s in out if s]


_PER_SAMPLE: list[Piece] = [
    "make it cheaper, do it once ahead of training, or move it to the GPU (",
    Action("ladder"),
    " says which stage costs most, and which step of the pipeline).",
]


def _longer(slower: float) -> str:
    return f"{slower:.0%} longer than" if slower < 1 else f"{1 + slower:.1f}× as long as"


def _waits(d: Diagnosis) -> list[Piece]:
    """What to do about the loop's wait for data: by the resource the real run's workers
    were read to spend their time on, when one was named (its words and remedies are
    measure.resource's, the ladder's too); else more workers, then the per-sample work."""
    r, kind = d.worker_resource, d.resource
    if r is None or kind is None:
        return [": ", *_workers(d)]
    said = f", and {r.headline()}: {r.gist()}. "
    if kind == "cpu" and not r.contended():
        return [said, *_capital(_workers(d))]
    if kind == "cpu":  # other processes hold the cores: more workers queue behind them
        return [
            said,
            "More workers will not help while other processes hold the cores: rerun when "
            "they are done; if the loop still waits, the per-sample work is the cost: ",
            *_PER_SAMPLE,
        ]
    if kind == "threads":
        return [
            said,
            f"More workers would make it worse. Try {REMEDIES['threads']} (",
            Action("sweep", "num_workers=1,2; num_threads=1,2"),
            ").",
        ]
    tried = _tried_workers(d)
    if kind in ("storage", "waiting") and tried is not None and tried > (d.num_workers or 0):
        # more workers were measured in this pass and bought nothing: what they wait on
        return [
            said,
            f"More workers did not shorten the wait (num_workers={tried}, measured in this "
            "pass): "
            + (
                "faster storage or caching the files (in memory, on a local disk, or packed "
                "into fewer, larger files) is what is left."
                if kind == "storage"
                else "remove what they wait on (a sleep, a lock, the network)."
            ),
        ]
    if kind == "storage":
        return [said, f"Cheaper transforms will not help; try {REMEDIES['storage']}."]
    if kind == "waiting":
        gist = _sim_gist(d)
        sim = f"; the simulator: {gist}" if gist else ""
        return [said, f"Try {REMEDIES['waiting']}{sim}."]
    # idle: the workers keep their queue full, yet the loop waits
    return [
        f", yet {r.headline()}: {r.gist()}. The workers are not the limit: more of them, or "
        "cheaper transforms, will not shorten the wait. What is left is handing the batches "
        "over to the training process (taking them off the workers' queue, pinning): hand "
        "over fewer, larger batches, or smaller ones (uint8 rather than float).",
    ]


def _capital(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` as the start of a sentence."""
    if pieces and isinstance(pieces[0], str):
        return [pieces[0][:1].upper() + pieces[0][1:], *pieces[1:]]
    return pieces


def _sim_gist(d: Diagnosis) -> Optional[str]:
    """The simulator's line's gist (``"with num_workers=4: about 2.0× faster"``) when it
    finds a number of workers that helps; None otherwise."""
    line = d.prediction or ""
    if line.startswith("with num_workers="):
        return line.split(" (")[0].split(", still")[0]
    return None


def _tried_workers(d: Diagnosis) -> Optional[int]:
    """The ``num_workers`` the pass's variant measured, where it made the steps no faster
    (None: no such variant): advice never asks for more of what the pass just measured."""
    t = d.tried
    if t is None or t.speedup is None or t.outcome == "faster" or t.too_few:
        return None  # (too few blocks to tell: the pass measured nothing either way)
    w = t.settings.get("num_workers")
    return w if isinstance(w, int) and not isinstance(w, bool) else None


def _workers(d: Diagnosis) -> list[Piece]:
    """Whether more workers are the answer, as the simulator's line says (its gist only:
    the whole line is the fact above the advice) — or as the pass's own variant measured."""
    line = d.prediction or ""
    tried = _tried_workers(d)
    if tried is not None and tried > (d.num_workers or 0):
        return [
            f"more workers are not the answer here: num_workers={tried}, measured in this "
            "pass, did not make the steps measurably faster. The per-sample work is the cost: ",
            *_PER_SAMPLE,
        ]
    gist = _sim_gist(d)
    if gist:
        return [
            f"add DataLoader workers ({gist}). If more workers do not help, the per-sample "
            "work is the cost: ",
            *_PER_SAMPLE,
        ]
    if line:  # the simulator finds no number of workers that helps
        slower = (
            d.real_other_s / d.ideal_step_s - 1.0
            if d.real_other_s is not None and d.ideal_step_s
            else None
        )
        if slower is not None and slower > CONTENTION:  # the cores are short, not workers
            return [
                "more workers would not help (see the simulator's line), and steps take "
                f"{_longer(slower)} ideal ones apart from waiting: the cores are short. Try "
                "fewer intra-op threads (",
                Action("sweep", "num_threads=1,2"),
                "); then the per-sample work: ",
                *_PER_SAMPLE,
            ]
        return [
            "more workers would not help (see the simulator's line); the per-sample work "
            "is the cost: ",
            *_PER_SAMPLE,
        ]
    return [
        "add DataLoader workers. If more workers do not help, the per-sample work is the cost: ",
        *_PER_SAMPLE,
    ]


_STAGE_ADVICE: dict[str, list[Piece]] = {
    "samples": [
        "Handing batches over is the cost (workers and collation): add DataLoader workers, "
        "lighten collate_fn, or hand over fewer, larger batches."
    ],
    "real": [
        "The per-sample work is the cost (reading, decoding, tokenising, transforms): make "
        "it cheaper, do it once ahead of training and store the result, or move it to the GPU."
    ],
}


def _copy_advice(pin_memory: Optional[bool], cuda: Optional[bool]) -> list[Piece]:
    """The host stage's advice, like the pair's: pinned memory only where it is off and
    there is a GPU to copy to."""
    if pin_memory:
        how = (
            "the loader pins memory already; unless they already are, make the copies "
            ".to(device, non_blocking=True) so they overlap compute"
        )
    elif cuda:
        how = (
            "unless they already are, make them pin_memory=True with "
            ".to(device, non_blocking=True) so they overlap compute"
        )
    else:
        how = "make fewer, larger copies"
    return [
        f"Host-to-device copies are the cost: {how}, or keep the data on the GPU (",
        Action("cache_on", "device"),
        ").",
    ]


def ladder_advice(
    stage: Optional[str],
    costliest: Optional[str] = None,
    *,
    pin_memory: Optional[bool] = None,
    cuda: Optional[bool] = None,
) -> Optional[list[Piece]]:
    """What to do about the ladder's largest stage (None: no stage stands out); for the
    per-sample stage, the costliest transform step is where to start. ``pin_memory`` (the
    user's loader's) and ``cuda`` (whether the runs could use CUDA; None: unknown) keep
    the copy advice to what can be followed, as :class:`Diagnosis`' advice does."""
    if stage == "host":
        return _copy_advice(pin_memory, cuda)
    pieces = _STAGE_ADVICE.get(stage or "")
    if pieces is None:
        return None
    if stage == "real" and costliest:
        return [*pieces, f" Start with {costliest}, the costliest step."]
    return list(pieces)
