"""One grammar for the file names of run logs, written and read by the same rules.

A pair's arm writes ``loadeval-STAMP[-LABEL]-ARM[-rankN][-K].json``: ``ARM`` one of
:data:`ARMS` (the contended and variant arms' only where the pass had them), ``-rankN`` under
``torch.distributed`` or a launcher's ``RANK``, ``-K`` (2, 3, ...) after a name already
taken; what precedes the arm is the **job** (every arm and rank of one pass share it).
A job's straggler proof is ``JOB-proof.json``. The runner writes these names
(:func:`log_name`), the folder follower, the ranks' gatherer and the watch read them
(:func:`parse_log_name`): a new arm is one entry in :data:`ARMS`, seen everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["ARMS", "LogName", "is_proof_name", "log_name", "parse_log_name", "proof_name"]

ARMS = ("real", "ideal", "contended", "variant")
"""The arms a pair's run logs are named after, in the order a view lists them."""

_NAME = re.compile(
    rf"^(?P<job>.+)-(?P<side>{'|'.join(ARMS)})(?:-rank(?P<rank>\d+))?(?P<again>-\d+)?\.json$"
)


@dataclass(frozen=True)
class LogName:
    """What a run log's file name says: its job (the names' common start, with a ``-2``
    a second job of the same second took), side (the arm: real, ideal, contended or
    variant), and
    rank (None: not a rank's)."""

    job: str
    side: str
    rank: Optional[int]

    @property
    def series(self) -> str:
        """The run's name in a live chart: ``real``, or ``real r3`` for a rank's."""
        return self.side if self.rank is None else f"{self.side} r{self.rank}"


def log_name(stamp: str, label: str, arm: str, rank: Optional[int] = None) -> str:
    """The file name of ``arm``'s run log (``loadeval-20250101-120000-train-real-rank3.json``),
    before a ``-2`` that a name already taken gets; spaces and slashes in ``label`` become
    underscores."""
    tail = f"-rank{rank}" if rank is not None else ""
    name = f"loadeval-{stamp}{'-' + label if label else ''}-{arm}{tail}.json"
    return name.replace(" ", "_").replace("/", "_")


def parse_log_name(name: str) -> Optional[LogName]:
    """``loadeval-20250101-120000-train-real-rank3.json`` → job, side and rank; None for a
    name that is not an arm's run log (a journal, a proof, anything else)."""
    m = _NAME.match(name)
    if m is None:
        return None
    rank = m.group("rank")
    return LogName(
        job=m.group("job") + (m.group("again") or ""),
        side=m.group("side"),
        rank=int(rank) if rank is not None else None,
    )


def proof_name(job: str) -> str:
    """The file name of a job's straggler proof (``JOB-proof.json``)."""
    return f"{job}-proof.json"


def is_proof_name(name: str) -> bool:
    """Whether ``name`` is a job's straggler proof's."""
    return name.endswith("-proof.json") and len(name) > len("-proof.json")
