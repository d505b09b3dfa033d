"""Running the user's loop to find what to change: the settings and hooks, plans checked
once (``plan``), the one runner (``runner``) under the pair, the caching ladder (with its
sample rung) and the settings sweep, their results (``result``, ``sweep_result``) and
the per-transform split (``transforms/``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .ladder import LadderResult, Rung, Stage, run_ladder
    from .pair import PairResult, run_pair
    from .plan import plan_run
    from .settings import RunHooks, RunSettings
    from .sweep import run_sweep
    from .sweep_result import SweepHooks, SweepPoint, SweepResult
    from .sweep_spec import SweepPlan, parse_sweep, prepare_sweep
    from .transforms.split import TransformPart, TransformSplit, split_transforms

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
    "run_ladder",
    "run_pair",
    "run_sweep",
    "split_transforms",
]
__getattr__, __dir__ = lazy_face(__name__)
