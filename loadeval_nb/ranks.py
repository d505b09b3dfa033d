"""loadeval_nb.ranks: Many processes under torchrun: each rank's pair gathered (over the process group, or from the logs the ranks wrote), the slowest rank and the straggler."""

from __future__ import annotations

from .core import (
    RankResult,
    RanksResult,
    gather_logs,
    gather_pair,
)

__all__ = [
    "RankResult",
    "RanksResult",
    "gather_logs",
    "gather_pair",
]
