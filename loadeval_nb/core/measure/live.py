"""What a live view reads of a run while it runs, written down once.

Three things answer it: :class:`~loadeval_nb.LoaderEvaluator` (one side), the
interleaved pair (``LoaderEvaluator(loader, mode="pair")``, every arm) and a
run log another process writes (:class:`~loadeval_nb.core.record.follow.RunFollower`). The dashboard
and the followers' views read only this; none of the three stops or changes anything
when read, and every read is safe from another thread while the loop runs.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from ..record.run import Run


@runtime_checkable
class LiveRun(Protocol):
    """A run being measured (or followed), as a live view reads it."""

    @property
    def sides(self) -> tuple[str, ...]:
        """The runs it measures: ``("real",)``, ``("ideal",)``, or a pass's arms."""
        ...

    def steps_since(
        self, side: Any = ..., cursor: Optional[tuple[int, int]] = ...
    ) -> tuple[list[int], tuple[int, int]]:
        """``side``'s step times (ns) completed since ``cursor``, and the new cursor."""
        ...

    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns`` (None: none did)."""
        ...

    @property
    def util_sampler(self) -> Any:
        """Its utilisation ticks (``since(k)``), or None when not sampled."""
        ...

    @property
    def started_ns(self) -> Optional[int]:
        """The clock value its times count from (None before it started)."""
        ...

    def to_run(self, side: Optional[str] = None) -> Run:
        """``side``'s run so far (default: its first side)."""
        ...

    @property
    def total_steps(self) -> int:
        """Steps measured so far (every side's)."""
        ...
