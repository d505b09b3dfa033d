"""loadeval_nb.explore: Running the user's loop to find what to change: the pair, the caching ladder, the settings sweep, the per-transform split."""

from __future__ import annotations

from .core import (
    LadderResult,
    PairResult,
    Rung,
    RunHooks,
    RunSettings,
    Stage,
    SweepHooks,
    SweepPlan,
    SweepPoint,
    SweepResult,
    TransformPart,
    TransformSplit,
    parse_sweep,
    plan_run,
    prepare_sweep,
    rebuild_loader,
    run_ladder,
    run_pair,
    run_sweep,
    split_transforms,
)

__all__ = [
    "LadderResult",
    "PairResult",
    "RunHooks",
    "RunSettings",
    "Rung",
    "Stage",
    "SweepHooks",
    "SweepPlan",
    "SweepPoint",
    "SweepResult",
    "TransformPart",
    "TransformSplit",
    "parse_sweep",
    "plan_run",
    "prepare_sweep",
    "rebuild_loader",
    "run_ladder",
    "run_pair",
    "run_sweep",
    "split_transforms",
]
