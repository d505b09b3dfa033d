"""loadeval_nb.ranks: Many processes under torchrun: each rank's pair gathered, the slowest rank and the straggler."""

from __future__ import annotations

from .core import (
    RankResult,
    RanksResult,
    gather_pair,
)

__all__ = [
    "RankResult",
    "RanksResult",
    "gather_pair",
]
