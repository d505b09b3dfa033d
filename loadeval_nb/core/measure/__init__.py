"""Measuring one run: :class:`~.evaluator.LoaderEvaluator` and its two modes (``modes``,
given an ``EvaluatorConfig`` copied once; ``modes.LoaderStart`` starts the user's loader),
the interleaved pair (``interleave``: both sides in one pass, on the evaluator's base
``evaluator.Evaluator``; its plan and the one rule for whether a pass interleaves in
``blocks``), the per-step path (``timing`` and its C part ``_cstamp.c``), the replay
cache, host-to-device copy timing, per-batch timing inside the workers, the utilisation
sampler and its readers, the adaptive stop, and building a ``Run`` and its file from the
stamps (``build_run``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .adaptive import AutoStop
    from .evaluator import LoaderEvaluator
    from .interleave import InterleavedEvaluator
    from .loader import rebuild_loader
    from .readers import gpu_status
    from .sampler import UtilSampler
    from .timing import step_path
    from .variant import Variant
    from .worker_timing import WorkerFetchTimer

__all__ = [
    "AutoStop",
    "InterleavedEvaluator",
    "LoaderEvaluator",
    "UtilSampler",
    "Variant",
    "WorkerFetchTimer",
    "gpu_status",
    "rebuild_loader",
    "step_path",
]
__getattr__, __dir__ = lazy_face(__name__)
