"""The wait-skew test: every rank's pair as it travels (:class:`RankResult`), the
ranks' result (:class:`RanksResult`: the slowest rank, the runner-up, whether the top one
is a straggler by its wait and its loader's delivery) and its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .._facts import Fact, Facts, Reported
from .._format import fmt_pct, fmt_seconds, fmt_times
from .._stats import bootstrap_mean_ci
from ..record.run import Run, describe_steady
from ..verdict.diagnose import diagnose
from ..verdict.diagnosis import PARTLY_HEADROOM, Diagnosis
from .proof import StragglerProof

MIN_SKEW_SHARE = PARTLY_HEADROOM
"""A wait difference under this share of the mean step is not called a straggler (the
verdict's smallest headroom worth naming)."""
MAX_GATHERED_STEPS = 5000
"""Steps per run a rank sends (evenly thinned past this): the intervals need no more."""


def _thin(xs: list[int], n: int = MAX_GATHERED_STEPS) -> list[int]:
    """At most ``n`` of ``xs``, evenly spread."""
    if len(xs) <= n:
        return xs
    step = len(xs) / n
    return [xs[int(i * step)] for i in range(n)]


@dataclass
class RankResult:
    """One rank's pair, as it travels to the others: plain data, steady steps thinned."""

    rank: int
    host: str
    real: Optional[dict[str, Any]]
    ideal: Optional[dict[str, Any]]
    error: Optional[str] = None
    """Why this rank has no runs (for results gathered by other means; ``gather_pair``
    raises a rank's error instead)."""
    contended: Optional[dict[str, Any]] = None
    """The contended arm's run, where the pair had it (``contention``): the rank's
    headroom split into waiting for data and CPU taken by loading."""
    variant: Optional[dict[str, Any]] = None
    """The variant arm's run, where the pair had it (``--try``): what the change bought
    on this rank."""

    def run(self, which: str) -> Optional[Run]:
        doc = getattr(self, which)
        return Run.from_dict(doc, f"rank {self.rank}'s {which} run") if doc else None


def _payload(run: Optional[Run]) -> Optional[dict[str, Any]]:
    if run is None:
        return None
    sel = _thin(run.steady_indices())
    thin = Run(
        mode=run.mode,
        start_ns=[run.start_ns[i] for i in sel],
        step_ns=[run.step_ns[i] for i in sel],
        wait_ns=[run.wait_ns[i] for i in sel] if run.wait_ns is not None else None,
        samples=[run.samples[i] for i in sel],
        block=[run.block[i] for i in sel],
        warmup=0,
        label=run.label,
        status=run.status,
        loader_settings=run.loader_settings,
        settings=run.settings,
        # the steps sent are steady already: no block leaves any out again
        blocks=[{**b, "warmup": 0} if isinstance(b, dict) else b for b in run.blocks],
        util=run.util,  # a sample every 0.1 s: small next to the steps
        worker_load_ns=_thin(run.worker_load_ns) if run.worker_load_ns else None,
        worker_resource=run.worker_resource,
    )
    return thin.to_dict()


@dataclass
class RanksResult(Reported):
    """Every rank's pair, gathered: per-rank verdicts, the slowest rank and a straggler."""

    ranks: list[RankResult]
    diagnoses: dict[int, Diagnosis] = field(default_factory=dict)
    slowest: Optional[int] = None
    """The rank whose loader is slowest: the longest mean wait for data in the real run
    (the longest mean real step when waits are unknown). Under DDP every rank's step lasts
    as long as the slowest rank's, so the step alone cannot tell."""
    runner_up: Optional[int] = None
    """The rank next to ``slowest`` (the skew test's comparison, the proof's control)."""
    straggler: Optional[int] = None
    """The rank whose input waits hold the others at the all-reduce (None: no such rank)."""
    skew_s: Optional[float] = None
    """Mean wait per step of the rank that waits most, minus the runner-up's (paired by
    step)."""
    skew_ci: tuple[Optional[float], Optional[float]] = (None, None)
    skew_share: Optional[float] = None
    """``skew_s`` over that rank's mean real step."""
    phase_note: Optional[str] = None
    """Why a wait skew was not called a straggler (the loaders deliver alike)."""
    job: Optional[str] = None
    """The log names' common start of the job gathered from files (:func:`gather_logs`);
    None for ranks gathered over ``torch.distributed``."""
    left_out: tuple[str, ...] = ()
    """Other jobs whose logs were in the same folder and were not gathered."""
    proof: Optional[StragglerProof] = None
    """The straggler proof run after the pair (``python -m loadeval_nb run
    --prove-straggler``; read by :func:`gather_logs` from the job's ``...-proof.json``):
    when there, its verdict is the report's headline and its steps are columns of the
    ranks' table."""

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def ranks_by_number(self) -> dict[int, RankResult]:
        return {r.rank: r for r in self.ranks}

    @property
    def suspect(self) -> Optional[int]:
        """The rank :func:`prove_straggler` puts to the proof: the straggler, else the rank
        that waits most (None: no rank has a real run)."""
        return self.straggler if self.straggler is not None else self.slowest

    def diagnosis(self) -> Optional[Diagnosis]:
        """The slowest rank's diagnosis: its loader sets the pace every rank trains at."""
        return self.diagnoses.get(self.slowest) if self.slowest is not None else None

    def facts(self) -> Facts:
        """The gathered facts, once: :meth:`text` and the notebook's card render this."""
        split = any(d.waiting_s is not None for d in self.diagnoses.values())
        tried = self.tried_words()
        proof = self.proof
        arms = proof.arms if proof is not None else ()
        rows = []
        for r in self.ranks:
            d = self.diagnoses.get(r.rank)
            extra: tuple[str, ...] = ()
            if split:
                extra += (_split_cell(d),)
            if tried:
                extra += (_tried_cell(d),)
            if proof is not None:
                steps = proof.rank_step_s.get(r.rank, {})
                extra += tuple(fmt_seconds(steps.get(a)) if a in steps else "" for a in arms)
            if d is None:
                side = "real run only" if r.real else "ideal run only" if r.ideal else "no runs"
                rows.append((str(r.rank), r.host, "", "", "", "", *extra, r.error or side))
                continue
            mark = " (straggler)" if r.rank == self.straggler else ""
            rows.append(
                (
                    f"{r.rank}{mark}",
                    r.host,
                    fmt_seconds(d.real_step_s),
                    fmt_seconds(d.ideal_step_s),
                    fmt_times(d.speedup),
                    fmt_seconds(d.real_wait_s),
                    *extra,
                    d.verdict,
                )
            )
        slow = self.diagnosis()
        facts = []
        if slow is not None:
            facts.append(
                Fact(
                    "slowest",
                    "slowest rank",
                    f"{self.slowest} (its loader waits most): {fmt_seconds(slow.real_step_s)} a "
                    f"step, {fmt_times(slow.speedup)} as fast with an ideal loader",
                )
            )
        if tried and slow is not None and slow.tried is not None:
            facts.append(
                Fact(
                    "tried",
                    f"with {tried}",
                    f"on the slowest rank ({self.slowest}), {slow.tried.text()}; every "
                    "rank's in the table",
                )
            )
        if self.skew_s is not None:
            lo, hi = self.skew_ci
            ci = f" (95% CI {fmt_seconds(lo)} to {fmt_seconds(hi)})" if lo is not None else ""
            facts.append(
                Fact(
                    "skew",
                    "rank skew",
                    f"{fmt_seconds(self.skew_s)} more wait for data per step than any other "
                    f"rank{ci}, {fmt_pct(self.skew_share)} of a step",
                )
            )
        if proof is not None:
            facts += [
                Fact(f"proof_{f.key}", f"proof: {f.label}", f.text) for f in proof.facts().facts
            ]
        columns: tuple[str, ...] = ("rank", "host", "real step", "ideal step", "speedup", "wait")
        if split:
            columns += ("waiting / CPU taken",)
        if tried:
            columns += (f"with {tried}",)
        if proof is not None:
            columns += tuple(proof.arm_names())
        return Facts(
            kind="ranks",
            title=f"{self.world_size} ranks",
            headline=self.headline(),
            facts=tuple(facts),
            columns=(*columns, "verdict"),
            rows=tuple(rows),
            notes=tuple(n for n in (self.phase_note, self._left_out_note()) if n),
        )

    def tried_words(self) -> Optional[str]:
        """The variant the ranks' pass measured (``--try``), as a user writes it (None:
        none did)."""
        for d in self.diagnoses.values():
            if d.tried is not None:
                return d.tried.words
        return None

    def _left_out_note(self) -> Optional[str]:
        if not self.left_out:
            return None
        n = len(self.left_out)
        return (
            f"gathered the newest job, {self.job}; the folder also holds the logs of {n} "
            f"other job{'s' if n > 1 else ''} ({', '.join(self.left_out)})"
        )

    def headline(self) -> str:
        if self.proof is not None:  # the counterfactual's word, over the skew's
            return self.proof.headline()
        if self.straggler is not None:
            return (
                f"rank {self.straggler} is a straggler: its input waits hold the other ranks at "
                "the gradient all-reduce."
            )
        slow = self.diagnosis()
        verdict = slow.verdict if slow is not None else "no verdict (a pair needs both runs)"
        return f"{verdict} on the slowest rank; no rank holds the others back."


def _split_cell(d: Optional[Diagnosis]) -> str:
    """A rank's headroom split (the contended arm): waiting for data / CPU taken."""
    if d is None or d.waiting_s is None or d.contention_s is None:
        return ""
    return f"{fmt_seconds(d.waiting_s)} / {fmt_seconds(d.contention_s)}"


def _tried_cell(d: Optional[Diagnosis]) -> str:
    """A rank's variant against its real loader: its speedup and interval."""
    t = d.tried if d is not None else None
    if t is None or t.speedup is None:
        return ""
    lo, hi = t.speedup_ci
    ci = f" ({lo:.2f}–{hi:.2f}×)" if lo is not None and hi is not None else ""
    return f"{fmt_times(t.speedup)}{ci}"


def ranks_result(ranks: list[RankResult]) -> RanksResult:
    """Compare gathered ranks: per-rank diagnoses, the slowest rank, a straggler."""
    out = RanksResult(sorted(ranks, key=lambda r: r.rank))
    waits: dict[int, list[float]] = {}
    steps: dict[int, float] = {}
    for r in out.ranks:
        real, ideal = r.run("real"), r.run("ideal")
        if real is not None:  # the skew needs the real runs only (only="real" has no ideal)
            stats = describe_steady([real])
            if stats["mean_s"] is not None:
                steps[r.rank] = stats["mean_s"]
            w = real.steady_wait_s()
            if w:
                waits[r.rank] = w
        if real is not None and ideal is not None:
            out.diagnoses[r.rank] = diagnose(
                real, ideal, contended=r.run("contended"), variant=r.run("variant")
            )
    mean = {k: sum(v) / len(v) for k, v in waits.items()}
    pace = mean or steps
    order = sorted(pace, key=lambda k: pace[k], reverse=True)
    out.slowest = order[0] if order else None
    out.runner_up = order[1] if len(order) > 1 else None
    if len(waits) >= 2:
        top, second = sorted(mean, key=lambda k: mean[k], reverse=True)[:2]
        n = min(len(waits[top]), len(waits[second]))
        diff = [a - b for a, b in zip(waits[top][:n], waits[second][:n])]
        out.skew_s = sum(diff) / n if n else None
        out.skew_ci = bootstrap_mean_ci(diff)
        step = steps.get(top)
        out.skew_share = out.skew_s / step if step and out.skew_s is not None else None
        lo = out.skew_ci[0]
        if lo is not None and lo > 0 and (out.skew_share or 0) >= MIN_SKEW_SHARE:
            d_top, d_second = (delivery_s(out.ranks_by_number[k]) for k in (top, second))
            if d_top is None or d_second is None or d_top > d_second * (1 + MIN_SKEW_SHARE):
                out.straggler = top
            else:  # equal loaders: the skew is a phase of the all-reduce, not a slow rank
                out.phase_note = (
                    f"rank {top} waited {fmt_seconds(out.skew_s)} more per step than rank "
                    f"{second}, but its workers made batches as fast ({fmt_seconds(d_top)} "
                    f"vs {fmt_seconds(d_second)} a batch): a phase of the gradient "
                    "all-reduce, not a slower loader"
                )
    return out


def delivery_s(r: RankResult) -> Optional[float]:
    """How often a rank's loader can hand out a batch: the median time to make one inside
    its workers over the number of workers (None: no worker timings, e.g. no workers)."""
    real = r.run("real")
    if real is None or not real.worker_load_ns:
        return None
    nw = real.loader_settings.get("num_workers")
    if isinstance(nw, bool) or not isinstance(nw, int) or nw < 1:
        return None
    loads = sorted(real.worker_load_ns)
    return loads[len(loads) // 2] / 1e9 / nw
