"""The straggler proof as a record (:class:`StragglerProof`: its blocks, the gain of
freeing the suspect's loader against the control's, the verdict), its file beside the
job's run logs, and the test it makes of the blocks (:func:`straggler_proof`)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._facts import Fact, Facts, Reported
from .._files import write_text_atomic
from .._format import fmt_pct, fmt_seconds, fmt_times
from .._stats import t975
from ..errors import LoadEvalError, RunLogError
from ..explore.straggler import (
    ARMS,
    CONTROL,
    FREE,
)
from ..record.lognames import parse_log_name, proof_name
from ..verdict.diagnosis import PARTLY_HEADROOM

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
