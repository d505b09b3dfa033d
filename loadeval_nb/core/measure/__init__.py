"""Measuring one run: :class:`~.evaluator.LoaderEvaluator` and its two modes (``modes``,
given an ``EvaluatorConfig`` copied once; ``modes.LoaderStart`` starts the user's loader),
the interleaved pair (``interleave``: both sides in one pass, on the evaluator's base
``evaluator.Evaluator``; its plan and the one rule for whether a pass interleaves in
``blocks``), the per-step path (``timing`` and its C part ``_cstamp.c``), the replay
cache, host-to-device copy timing, per-batch timing inside the workers, the utilisation
sampler and its readers, the adaptive stop, and building a ``Run`` and its file from the
stamps (``build_run``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._face import deprecated, lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .adaptive import AutoStop
    from .evaluator import LoaderEvaluator
    from .loader import rebuild_loader
    from .readers import gpu_status
    from .sampler import UtilSampler
    from .timing import step_path
    from .variant import Variant
    from .worker_timing import WorkerFetchTimer

__all__ = [
    "AutoStop",
    "LoaderEvaluator",
    "UtilSampler",
    "Variant",
    "WorkerFetchTimer",
    "gpu_status",
    "rebuild_loader",
    "step_path",
]
_face_getattr, __dir__ = lazy_face(__name__)


def __getattr__(name: str) -> Any:
    if name == "InterleavedEvaluator":  # deprecated in 0.2.0: one wrapper in every mode
        deprecated(
            "loadeval_nb.measure.InterleavedEvaluator",
            "loadeval_nb.LoaderEvaluator(loader, mode='pair', ...)",
        )
        from .interleave import InterleavedPass  # the engine behind mode="pair", as it was

        return InterleavedPass
    return _face_getattr(name)
