"""Many ranks (torchrun, DDP): every rank measures its own pair; the ranks' results meet
through the user's process group (``torch.distributed.all_gather_object``), never a
transport of ours, and nothing here assumes the ranks share a host.

In data-parallel training every step ends at the gradient all-reduce, so every rank's
step lasts as long as the slowest rank's: a rank whose loader is slow holds the others
waiting inside their step, not in ``next()``. A straggler therefore shows as one rank
waiting for data much longer than the others, while step times match.

The test: take the rank that waits most and the runner-up (the rank that waits most
of the rest), pair their steps by index (DDP keeps the ranks in step), and take the
block-bootstrap interval of the mean per-step difference. The top rank is a straggler
when that interval lies above zero and the difference is at least 5 % of its mean step.
Comparing with the runner-up, not with the others pooled, is what keeps equal ranks
from producing a "straggler" just because one of them had to come out on top: the
more ranks, the larger the top one's lead over the pooled mean by chance alone.

Wait skew alone does not tell a slow loader from a late phase: under DDP, with workers,
the rank whose batch happens to arrive later waits in ``next()`` while the other waits
in the all-reduce, and that phase can hold for a whole run. So where both ranks' workers
were timed, the top rank is named only when its loader also delivers batches more slowly
(its median batch time inside the workers over its worker count) than the runner-up's,
by at least the same 5 %.

Skew is still only a sign. :func:`prove_straggler` puts the suspect (rank 0's straggler,
else the rank that waits most) to a counterfactual: one more pass of the loop, on every
rank the same plan of blocks, in which the suspect alone serves its cached batches in
some blocks (its loader taken out of the job), the runner-up alone in others (the
control), while every other rank keeps its real loader. If the whole job's step falls
with the suspect's loader free, and further than with the runner-up's (block-paired
t-intervals above zero, each gain at least 5 % of the step), the suspect is proven the
straggler and the gain is what freeing its loader buys every rank; if not, it is not
one, whatever the skew says.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from ._env import agree, dist_rank, safe_len
from ._facts import Fact, Facts, Reported
from ._files import expand_path, write_text_atomic
from ._format import fmt_pct, fmt_seconds, fmt_times
from ._stats import bootstrap_mean_ci, t975
from .errors import LoadEvalError, RunLogError
from .explore.settings import RunSettings
from .explore.straggler import (
    ARMS,
    CONTROL,
    FREE,
    BlockSpan,
    StragglerPass,
    plan_proof,
    run_pass,
)
from .measure.blocks import BlockPlan, queue_depth
from .record.lognames import is_proof_name, parse_log_name, proof_name
from .record.run import Run, describe_steady
from .record.runlog import load_run
from .verdict.diagnose import diagnose
from .verdict.diagnosis import PARTLY_HEADROOM, Diagnosis

__all__ = [
    "ProvingPass",
    "RankResult",
    "RanksResult",
    "StragglerProof",
    "gather_logs",
    "gather_pair",
    "gather_runs",
    "load_proof",
    "plan_proof_after",
    "proof_path",
    "prove_straggler",
]

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
        proof = self.proof
        arms = proof.arms if proof is not None else ()
        rows = []
        for r in self.ranks:
            d = self.diagnoses.get(r.rank)
            extra: tuple[str, ...] = ()
            if split:
                extra += (_split_cell(d),)
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


def gather_pair(result: Any, group: Any = None, timeout_s: Optional[float] = None) -> RanksResult:
    """Every rank's pair, gathered over ``torch.distributed`` (``all_gather_object`` on
    ``group``, default the world): call it on every rank after :func:`run_pair`. Every rank
    gets the same :class:`RanksResult`; rank 0 usually prints it.

    A rank whose pair failed re-raises its error here, before any collective, so the
    process exits and torchrun stops the other ranks, instead of leaving them waiting
    (they may be blocked in the training step's all-reduce). Every rank must arrive within
    ``timeout_s`` (default 300 s) of the first: a rank that does not (its loop stuck in
    another collective, a crash) is named in a :class:`~loadeval_nb.LoadEvalError` instead
    of a job waiting for ever. Raises :class:`~loadeval_nb.LoadEvalError` when
    ``torch.distributed`` is not initialised.
    """
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "gather_pair needs torch.distributed: call dist.init_process_group() first (torchrun "
            "sets up the environment it reads)."
        )
    if result.error is not None:
        first = str(result.error).splitlines()[0] if str(result.error) else ""
        print(
            f"loadeval_nb: rank {where[0]} stops: its {result.failed} run failed "
            f"({type(result.error).__name__}: {first}); if another rank failed first, its "
            "traceback holds the cause.",
            file=sys.stderr,
        )
        raise result.error
    return gather_runs(result.runs(), group, timeout_s)


def gather_runs(
    runs: Mapping[str, Optional[Run]], group: Any = None, timeout_s: Optional[float] = None
) -> RanksResult:
    """Every rank's runs (``{"real": Run, "ideal": Run}``, and ``"contended"`` where the
    pair had the arm), gathered over ``torch.distributed`` as :func:`gather_pair` gathers
    a pair's (which calls it): every rank calls it, every rank gets the same
    :class:`RanksResult`. Raises :class:`~loadeval_nb.LoadEvalError` when
    ``torch.distributed`` is not initialised or a rank does not arrive in ``timeout_s``."""
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "gather_runs needs torch.distributed: call dist.init_process_group() first "
            "(torchrun sets up the environment it reads)."
        )
    import torch.distributed as dist

    mine = RankResult(
        rank=where[0],
        host=socket.gethostname(),
        real=_payload(runs.get("real")),
        ideal=_payload(runs.get("ideal")),
        contended=_payload(runs.get("contended")),
        variant=_payload(runs.get("variant")),
    )
    gathered: list[Any] = (
        [None] * where[1] if group is None else [None] * dist.get_world_size(group)
    )
    # every rank arrives first through the store, with a time limit and a sentence naming
    # the ranks that did not: then the collective below cannot wait for ever
    agree("gathering of the ranks' pairs", where[0], timeout_s)
    dist.all_gather_object(gathered, mine, group=group)
    return ranks_result([g for g in gathered if g is not None])


MIN_GAIN_SHARE = PARTLY_HEADROOM
"""A recovery under this share of the fleet's step does not prove a straggler (the
verdict's smallest headroom worth naming, as for the skew); nor does a recovery that
exceeds the control's by less."""


@dataclass
class StragglerProof(Reported):
    """What freeing one rank's loader did to every rank's step, beside freeing the
    runner-up's: the counterfactual of :func:`prove_straggler`. Plain data; every rank
    gets the same."""

    suspect: int
    """The rank whose loader was taken out in the ``free`` arm (its cached batches served)."""
    control: Optional[int]
    """The rank whose loader was taken out in the ``control`` arm (the runner-up; None:
    one rank, no control)."""
    proven: bool = False
    """The fleet's step recovered: the gain's interval lies above zero, and so does that of
    the gain over the control's; both at least :data:`MIN_GAIN_SHARE` of the real step."""
    real_step_s: Optional[float] = None
    """Every rank's mean step with every loader real (the fleet's: the mean over ranks)."""
    free_step_s: Optional[float] = None
    """Every rank's mean step with the suspect's loader free."""
    control_step_s: Optional[float] = None
    """Every rank's mean step with the runner-up's loader free."""
    gain_s: Optional[float] = None
    """Mean over block pairs of the real step minus the free step: what every rank's step
    would gain without the suspect's loading."""
    gain_ci: tuple[Optional[float], Optional[float]] = (None, None)
    """95 % t-interval of ``gain_s`` over the block pairs."""
    excess_s: Optional[float] = None
    """Mean over block pairs of the control step minus the free step: how much more
    freeing the suspect gains than freeing the runner-up (ranks that load alike gain
    alike: the step waits for whichever rank's batch is late)."""
    excess_ci: tuple[Optional[float], Optional[float]] = (None, None)
    named_by_skew: bool = False
    """The wait-skew test (:class:`RanksResult`) had named the suspect the straggler."""
    block_step_s: list[tuple[str, float]] = field(default_factory=list)
    """The fleet's mean step in each measured block, in the pass's order, with its arm
    (``real``, ``free`` or ``control``)."""
    rank_step_s: dict[int, dict[str, float]] = field(default_factory=dict)
    """Each rank's mean step per arm."""

    @property
    def world_size(self) -> int:
        return len(self.rank_step_s)

    @property
    def arms(self) -> tuple[str, ...]:
        """The pass's arms: ``real``, ``free`` and (with a control) ``control``."""
        return ARMS if self.control is not None else ARMS[:2]

    def arm_names(self) -> list[str]:
        """Each arm as the ranks' table heads its column."""
        names = {
            "real": "proof: all real",
            FREE: f"rank {self.suspect} free",
            CONTROL: f"rank {self.control} free",
        }
        return [names[a] for a in self.arms]

    @property
    def pairs(self) -> int:
        """Block pairs the intervals are taken over."""
        arms = [a for a, _ in self.block_step_s]
        return min(arms.count(a) for a in self.arms)

    def to_dict(self) -> dict[str, Any]:
        """The proof as JSON values, versioned (``kind``, ``schema_version``)."""
        return {
            "kind": PROOF_KIND,
            "schema_version": PROOF_SCHEMA,
            "suspect": self.suspect,
            "control": self.control,
            "proven": self.proven,
            "real_step_s": self.real_step_s,
            "free_step_s": self.free_step_s,
            "control_step_s": self.control_step_s,
            "gain_s": self.gain_s,
            "gain_ci": list(self.gain_ci),
            "excess_s": self.excess_s,
            "excess_ci": list(self.excess_ci),
            "named_by_skew": self.named_by_skew,
            "block_step_s": [[a, s] for a, s in self.block_step_s],
            "rank_step_s": {str(r): dict(v) for r, v in self.rank_step_s.items()},
        }

    def save(self, path: Union[str, os.PathLike[str]]) -> str:
        """Write the proof as versioned JSON (atomically), beside the ranks' run logs
        (:func:`proof_path`), where :func:`gather_logs` finds it. Returns the path."""
        return write_text_atomic(path, json.dumps(self.to_dict(), allow_nan=False))

    @property
    def gain_share(self) -> Optional[float]:
        """``gain_s`` over the real step."""
        if self.gain_s is None or not self.real_step_s:
            return None
        return self.gain_s / self.real_step_s

    @property
    def speedup(self) -> Optional[float]:
        """How many times as fast every rank would train with the suspect's loader free."""
        if not self.real_step_s or not self.free_step_s:
            return None
        return self.real_step_s / self.free_step_s

    def headline(self) -> str:
        s = self.suspect
        steps = f"{fmt_seconds(self.real_step_s)} → {fmt_seconds(self.free_step_s)}"
        if self.proven:
            return (
                f"rank {s} is a straggler, proven: with rank {s}'s loader free, every rank's "
                f"step {steps} ({fmt_times(self.speedup)} as fast)."
            )
        said = "whatever the skew says" if self.named_by_skew else "the rank that waits most"
        lo = self.gain_ci[0]
        if lo is not None and lo > 0 and self.control is not None:
            why = (
                f"no more than with rank {self.control}'s loader free "
                f"({fmt_seconds(self.control_step_s)}): the ranks load alike"
            )
        else:
            why = "no recovery"
        return (
            f"rank {s} is not a straggler ({said}): with rank {s}'s loader free, every "
            f"rank's step {steps}, {why}."
        )

    def facts(self) -> Facts:
        def ci(pair: tuple[Optional[float], Optional[float]]) -> str:
            lo, hi = pair
            return f" (95% CI {fmt_seconds(lo)} to {fmt_seconds(hi)})" if lo is not None else ""

        facts = [
            Fact(
                "gain",
                "gain",
                f"{fmt_seconds(self.gain_s)} a step for every rank{ci(self.gain_ci)}, "
                f"{fmt_pct(self.gain_share)} of a step",
            )
        ]
        if self.control is not None:
            facts.append(
                Fact(
                    "control",
                    "control",
                    f"with rank {self.control}'s loader free instead, every rank's step "
                    f"{fmt_seconds(self.control_step_s)}; rank {self.suspect}'s gain over "
                    f"that: {fmt_seconds(self.excess_s)}{ci(self.excess_ci)}",
                )
            )
        facts.append(
            Fact(
                "blocks",
                "blocks",
                f"{self.pairs} blocks an arm (all loaders real; rank {self.suspect}'s cached"
                + (f"; rank {self.control}'s cached" if self.control is not None else "")
                + "), A B C C B A",
            )
        )
        columns = ["rank", "step", f"rank {self.suspect}'s loader free"]
        if self.control is not None:
            columns.append(f"rank {self.control}'s loader free")
        rows = tuple(
            (
                f"{r}{' (suspect)' if r == self.suspect else ''}",
                *(fmt_seconds(steps.get(a)) for a in ARMS[: len(columns) - 1]),
            )
            for r, steps in sorted(self.rank_step_s.items())
        )
        return Facts(
            kind="ranks",
            title="Straggler proof",
            headline=self.headline(),
            facts=tuple(facts),
            columns=tuple(columns),
            rows=rows,
        )


PROOF_KIND = "loadeval_nb.straggler_proof"
PROOF_SCHEMA = 1


def proof_path(real_log: Union[str, os.PathLike[str]]) -> str:
    """Where a job's straggler proof goes: beside rank 0's real run log, named after the
    job (``loadeval-JOB-train-real-rank0.json`` → ``loadeval-JOB-train-proof.json``)."""
    path = os.fspath(real_log)
    name = parse_log_name(os.path.basename(path))
    if name is None or name.rank is None:
        raise LoadEvalError(f"{path!r} is not a rank's run log (a name ending -real-rank0.json).")
    return os.path.join(os.path.dirname(path), proof_name(name.job))


def load_proof(path: Union[str, os.PathLike[str]]) -> StragglerProof:
    """A straggler proof :meth:`StragglerProof.save` wrote. Raises
    :class:`~loadeval_nb.errors.RunLogError` for a file that is not one, or is newer than
    this version reads."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise RunLogError(f"Cannot read the straggler proof {source!r} ({e}).") from None
    if not isinstance(doc, dict) or doc.get("kind") != PROOF_KIND:
        raise RunLogError(f"{source!r} is not a straggler proof of loadeval_nb.")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > PROOF_SCHEMA:
        raise RunLogError(
            f"{source!r} uses straggler proof schema {version!r}, not one this loadeval_nb "
            f"reads (up to {PROOF_SCHEMA}); upgrade with `pip install -U loadeval-nb`."
        )

    def ci(key: str) -> tuple[Optional[float], Optional[float]]:
        lo, hi = doc.get(key) or (None, None)
        return lo, hi

    try:
        return StragglerProof(
            suspect=int(doc["suspect"]),
            control=None if doc.get("control") is None else int(doc["control"]),
            proven=bool(doc.get("proven")),
            real_step_s=doc.get("real_step_s"),
            free_step_s=doc.get("free_step_s"),
            control_step_s=doc.get("control_step_s"),
            gain_s=doc.get("gain_s"),
            gain_ci=ci("gain_ci"),
            excess_s=doc.get("excess_s"),
            excess_ci=ci("excess_ci"),
            named_by_skew=bool(doc.get("named_by_skew")),
            block_step_s=[(str(a), float(x)) for a, x in doc.get("block_step_s") or []],
            rank_step_s={
                int(r): {str(a): float(x) for a, x in v.items()}
                for r, v in (doc.get("rank_step_s") or {}).items()
            },
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RunLogError(f"{source!r} is not a whole straggler proof ({e}).") from None


def _mean_ci(xs: list[float]) -> tuple[Optional[float], tuple[Optional[float], Optional[float]]]:
    """The mean of ``xs`` and its 95 % t-interval (None with fewer than two)."""
    if not xs:
        return None, (None, None)
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, (None, None)
    half = t975(len(xs) - 1) * (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5
    half /= len(xs) ** 0.5
    return m, (m - half, m + half)


def straggler_proof(
    blocks: dict[int, Sequence[Sequence[Any]]],
    suspect: int,
    control: Optional[int] = None,
    named_by_skew: bool = False,
) -> StragglerProof:
    """Judge the proof's pass from every rank's measured blocks (``(arm, steps, span_ns)``
    each, in the pass's order): the fleet's step in a block is the mean over ranks of
    their mean steps in it (DDP keeps them equal), and block *k* of one arm is paired
    with block *k* of the others."""
    n = min((len(b) for b in blocks.values()), default=0)
    fleet: list[tuple[str, float]] = []
    for k in range(n):
        arm = str(blocks[min(blocks)][k][0])
        means = [b[k][2] / b[k][1] / 1e9 for b in blocks.values() if b[k][1]]
        if means:
            fleet.append((arm, sum(means) / len(means)))
    by_arm = {a: [s for arm, s in fleet if arm == a] for a in ARMS}
    real, free, ctrl = by_arm["real"], by_arm[FREE], by_arm[CONTROL]
    out = StragglerProof(
        suspect=suspect,
        control=control,
        named_by_skew=named_by_skew,
        block_step_s=fleet,
        rank_step_s={
            r: {
                arm: sum(x[2] for x in mine) / sum(x[1] for x in mine) / 1e9
                for arm in ARMS
                if (mine := [x for x in b if x[0] == arm and x[1]])
            }
            for r, b in sorted(blocks.items())
        },
    )
    out.real_step_s, out.free_step_s, out.control_step_s = (
        sum(xs) / len(xs) if xs else None for xs in (real, free, ctrl)
    )
    out.gain_s, out.gain_ci = _mean_ci([a - b for a, b in zip(real, free)])
    out.excess_s, out.excess_ci = _mean_ci([a - b for a, b in zip(ctrl, free)])
    step = out.real_step_s or 0.0

    def clears(mean: Optional[float], ci: tuple[Optional[float], Optional[float]]) -> bool:
        lo = ci[0]
        return mean is not None and lo is not None and lo > 0 and mean >= MIN_GAIN_SHARE * step

    out.proven = clears(out.gain_s, out.gain_ci) and (
        control is None or clears(out.excess_s, out.excess_ci)
    )
    return out


def prove_straggler(
    loader: Any,
    run_once: Callable[[Any], None],
    ranks: RanksResult,
    settings: Optional[RunSettings] = None,
    *,
    group: Any = None,
    timeout_s: Optional[float] = None,
) -> StragglerProof:
    """Prove or clear the straggler ``ranks`` suspects (:attr:`RanksResult.suspect`:
    :func:`gather_pair`'s straggler, else the rank that waits most), by a counterfactual:
    call it on every rank after :func:`gather_pair`, with the same loader and loop.

    It runs ``run_once`` once more, over one epoch of ``loader``, in blocks of three arms
    in A B C C B A order: in the ``real`` blocks every rank serves its loader's batches;
    in the ``free`` blocks the suspect serves its cached batches (the ideal side's
    replay: its loader taken out of the job) while every other rank keeps its real
    loader; in the ``control`` blocks the runner-up (:attr:`RanksResult.runner_up`) does
    so instead. The suspect is proven the straggler when every rank's step falls in the
    free blocks (the block-paired 95 % interval of the gain above zero, the gain at least
    :data:`MIN_GAIN_SHARE` of the step) and falls further than in the control blocks (the
    same test of the difference): among ranks that load alike, freeing any one shortens
    the step a little, as the step waits for whichever rank's batch is late. The gain,
    with its interval, is what freeing the suspect's loader buys the whole job. If the
    step does not recover, the suspect is not a straggler, whatever the skew said.
    ``settings`` (default :class:`RunSettings`'s) gives the steps per arm (warm-up
    included), ``warmup``, ``num_cached_batches`` and ``cache_on``; no run log is written.

    The ranks agree first, through the process group's store: the suspect and the
    control are rank 0's, the plan is made from the smallest epoch and the deepest queue
    of every rank, so every rank's loop runs the same number of steps. Every rank gets
    the same :class:`StragglerProof`; rank 0 usually prints it.

    Raises :class:`~loadeval_nb.LoadEvalError` when ``torch.distributed`` is not
    initialised, when ``ranks`` suspects no rank, when the ranks' settings differ or the
    epoch is too short for blocks, and re-raises what ``run_once`` raised (after a line
    on stderr, so that torchrun stops the other ranks).
    """
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "prove_straggler needs torch.distributed: call dist.init_process_group() first "
            "(torchrun sets up the environment it reads)."
        )
    if not isinstance(ranks, RanksResult):
        raise LoadEvalError(
            "prove_straggler takes the ranks' first measurement: pass ranks=gather_pair(result)."
        )
    settings = settings or RunSettings()
    if not isinstance(settings.steps, int):
        raise LoadEvalError(
            f"prove_straggler needs a number of steps per arm, not steps={settings.steps!r}; "
            "pass RunSettings(steps=200)."
        )
    mine = {
        "suspect": ranks.suspect,
        "control": ranks.runner_up if ranks.runner_up != ranks.suspect else None,
        "depth": queue_depth(loader),
        "len": safe_len(loader),
        "steps": settings.steps,
        "warmup": settings.warmup,
        "cache": settings.num_cached_batches,
    }
    agreed = agree("plan of the straggler proof", mine, timeout_s) or [mine]
    for key in ("steps", "warmup", "cache"):
        odd = next((r for r, a in enumerate(agreed) if a[key] != agreed[0][key]), None)
        if odd is not None:
            raise LoadEvalError(
                f"Rank {odd} proves with {key}={agreed[odd][key]!r} where rank 0 has "
                f"{agreed[0][key]!r}: give every rank the same settings."
            )
    # rank 0's word: every rank replays on the same ranks
    suspect, control = agreed[0]["suspect"], agreed[0]["control"]
    if suspect is None:
        raise LoadEvalError(
            "No rank to put to the proof: the first measurement has no real run on any rank; "
            "measure the pair first (run_pair, then gather_pair)."
        )
    depth = max(a["depth"] for a in agreed)
    lens = [a["len"] for a in agreed if a["len"] is not None]
    epoch = min(lens) if lens else None
    warmup, cached = settings.warmup, settings.num_cached_batches
    arms = ARMS if control is not None else ARMS[:2]
    plan = plan_proof(settings.steps, warmup, cached, depth, epoch, arms)
    try:
        spans = run_pass(
            loader,
            run_once,
            plan,
            replay_in={suspect: FREE, control: CONTROL}.get(where[0]),
            num_cached_batches=cached,
            cache_on=settings.cache_on,
        )
    except BaseException as e:
        print(
            f"loadeval_nb: rank {where[0]} stops: its straggler proof's pass failed "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); if another "
            "rank failed first, its traceback holds the cause.",
            file=sys.stderr,
        )
        raise
    return _judge(spans, suspect, control, ranks.straggler == suspect, group, timeout_s)


def _judge(
    spans: Sequence[BlockSpan],
    suspect: int,
    control: Optional[int],
    named_by_skew: bool,
    group: Any,
    timeout_s: Optional[float],
) -> StragglerProof:
    """Every rank's measured blocks gathered (every rank calls it), judged."""
    import torch.distributed as dist

    where = dist_rank()
    assert where is not None  # (asked before the pass)
    payload = (where[0], [(b.arm, b.steps, b.span_ns) for b in spans])
    gathered: list[Any] = (
        [None] * where[1] if group is None else [None] * dist.get_world_size(group)
    )
    agree("gathering of the straggler proof", where[0], timeout_s)
    dist.all_gather_object(gathered, payload, group=group)
    blocks = {int(g[0]): g[1] for g in gathered if g is not None}
    return straggler_proof(blocks, suspect, control, named_by_skew=named_by_skew)


def plan_proof_after(pair: BlockPlan, epoch: Optional[int], settings: RunSettings) -> BlockPlan:
    """The proof's plan for a loop that goes on over it after an interleaved pair's
    ``pair`` plan, in the same pass (the script runner's ``--prove-straggler``): ``steps``
    per arm, its drains those of the pair's agreed queue depth, the whole pass — the pair
    and the proof — within ``epoch`` (the pair's agreed epoch; None: no end). Every rank
    makes the same plan from the same agreed pair. Raises
    :class:`~loadeval_nb.LoadEvalError` when the epoch's rest is too short for blocks."""
    if not isinstance(settings.steps, int):
        raise LoadEvalError(
            f"The straggler proof needs a number of steps per arm, not steps={settings.steps!r}."
        )
    depth = (pair.drain - 1) // 2
    room = None if epoch is None else epoch - pair.total_steps
    return plan_proof(settings.steps, settings.warmup, settings.num_cached_batches, depth, room)


class ProvingPass:
    """The straggler proof's pass for a loop that already runs (the script runner's: the
    script's own loop goes on over it after the pair, in the same pass): made on every
    rank once the ranks' pairs are gathered (``ranks``), with the same ``plan``
    (:func:`plan_proof_after`). The ranks agree first, through the process group's store,
    on rank 0's suspect and control; iterate it for the pass's batches (``len()`` of
    them), then call :meth:`judge` on every rank for the :class:`StragglerProof` (a
    collective). :meth:`release` lets go of the cached batches."""

    def __init__(
        self,
        loader: Any,
        plan: BlockPlan,
        ranks: RanksResult,
        settings: RunSettings,
        *,
        group: Any = None,
        timeout_s: Optional[float] = None,
    ) -> None:
        where = dist_rank()
        if where is None:
            raise LoadEvalError(
                "The straggler proof needs torch.distributed: call dist.init_process_group() "
                "first (torchrun sets up the environment it reads)."
            )
        mine = {
            "suspect": ranks.suspect,
            "control": ranks.runner_up if ranks.runner_up != ranks.suspect else None,
        }
        agreed = agree("suspect of the straggler proof", mine, timeout_s) or [mine]
        self.suspect: Optional[int] = agreed[0]["suspect"]  # rank 0's word
        self.control: Optional[int] = agreed[0]["control"] if self.suspect is not None else None
        self.named_by_skew = ranks.straggler is not None and ranks.straggler == self.suspect
        self.group, self.timeout_s = group, timeout_s
        self._pass = StragglerPass(
            loader,
            plan,
            replay_in={self.suspect: FREE, self.control: CONTROL}.get(where[0]),
            num_cached_batches=settings.num_cached_batches,
            cache_on=settings.cache_on,
        )

    def __len__(self) -> int:
        return len(self._pass)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._pass)

    @property
    def blocks_done(self) -> int:
        """Blocks measured so far (on this rank)."""
        return len(self._pass.blocks)

    @property
    def complete(self) -> bool:
        """Every block of the plan was measured (on this rank)."""
        return self.blocks_done == len(self._pass.plan.block_steps())

    def judge(self) -> Optional[StragglerProof]:
        """Every rank's blocks gathered and judged (every rank calls it); None where no
        rank was put to the proof (no real run on any rank)."""
        if self.suspect is None:
            return None
        return _judge(
            self._pass.blocks, self.suspect, self.control, self.named_by_skew, self.group,
            self.timeout_s,
        )  # fmt: skip

    def release(self) -> None:
        self._pass.release()


def _by_job(paths: Sequence[str]) -> dict[str, dict[int, dict[str, str]]]:
    """Per-rank log paths by job (the names' common start), rank and side; other paths
    are left out."""
    jobs: dict[str, dict[int, dict[str, str]]] = {}
    for path in paths:
        name = parse_log_name(os.path.basename(path))
        if name is not None and name.rank is not None:
            jobs.setdefault(name.job, {}).setdefault(name.rank, {})[name.side] = path
    return jobs


def gather_logs(
    where: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]]],
) -> RanksResult:
    """Every rank's pair read from the run logs the ranks wrote, for a process outside
    their process group (the launcher that started them, a notebook, a job's last step):
    the same :class:`RanksResult` as :func:`gather_pair`.

    ``where`` is a folder holding per-rank logs (``...-real-rank0.json``,
    ``...-ideal-rank0.json``, ...; on several nodes, the shared ``log_dir`` every node
    wrote to), or a list of such files. A folder holding several jobs' logs gives the
    newest job (the one whose logs were written last); ``left_out`` names the others.
    A rank's contended arm (``...-contended-rank0.json``, a pair run with
    ``contention``) goes into its diagnosis (the headroom split); the job's straggler
    proof (``...-proof.json``, beside the logs, listed or not) into ``proof``.

    Raises :class:`~loadeval_nb.LoadEvalError` when there is no per-rank log to gather,
    and :class:`~loadeval_nb.errors.RunLogError` for a log that cannot be read.
    """
    if isinstance(where, (str, os.PathLike)):
        folder = expand_path(where)
        if not os.path.isdir(folder):
            raise LoadEvalError(
                f"{folder!r} is not a folder; pass the folder the ranks wrote their run logs to "
                "(--log-dir, RunSettings(log_dir=...))."
            )
        jobs = _by_job([os.path.join(folder, n) for n in sorted(os.listdir(folder))])
        if not jobs:
            raise LoadEvalError(
                f"No per-rank run logs (names ending -real-rank0.json, -ideal-rank0.json, ...) "
                f"in {folder!r}; pass the folder the ranks wrote to."
            )
    else:
        paths = [os.fspath(p) for p in where]
        jobs = _by_job(paths)
        named = {p for r in jobs.values() for s in r.values() for p in s.values()}
        stray = [p for p in paths if p not in named and not is_proof_name(os.path.basename(p))]
        if stray or not jobs:
            raise LoadEvalError(
                f"{stray[0]!r} is not a per-rank run log (a name ending -real-rank0.json or "
                "-ideal-rank0.json, or a job's -proof.json)."
                if stray
                else "No run logs given; pass the per-rank logs to gather."
            )

    def mtime(path: str) -> float:
        try:
            return os.path.getmtime(path)
        except OSError as e:  # a broken link, a loop of links: read, never written here
            raise LoadEvalError(
                f"Cannot read the run log {path!r} ({e.strerror or e}); remove it or pass the "
                "logs to gather one by one."
            ) from None

    def written(job: str) -> float:
        return max(mtime(p) for r in jobs[job].values() for p in r.values())

    newest = sorted(jobs, key=lambda j: (written(j), j))
    job = newest[-1]
    ranks = []
    for rank, files in sorted(jobs[job].items()):
        runs = {side: load_run(path) for side, path in files.items()}
        host = next(
            (str(r.environment["host"]) for r in runs.values() if r.environment.get("host")), ""
        )
        missing = [s for s in ("real", "ideal") if s not in runs]
        ranks.append(
            RankResult(
                rank=rank,
                host=host or "?",
                real=_payload(runs.get("real")),
                ideal=_payload(runs.get("ideal")),
                error=f"no {missing[0]} run log" if len(missing) == 1 else None,
                contended=_payload(runs.get("contended")),
                variant=_payload(runs.get("variant")),
            )
        )
    out = ranks_result(ranks)
    folders = {os.path.dirname(p) for r in jobs[job].values() for p in r.values()}
    proofs = [os.path.join(f, proof_name(job)) for f in sorted(folders)]
    found = [p for p in proofs if os.path.isfile(p)]
    if found:
        out.proof = load_proof(found[0])
    out.job = job
    out.left_out = tuple(newest[:-1][::-1])
    return out
