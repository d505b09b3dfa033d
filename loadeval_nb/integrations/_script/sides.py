"""The wrapper each kind of child puts around the script's training loader: a log-mode
:class:`~loadeval_nb.LoaderEvaluator` (the real run), a replay one (the ideal run), or
one that measures both interleaved in blocks (``--interleave``)."""

from __future__ import annotations

from typing import Any, Optional

from ... import core
from ...core import LoadEvalError, RunSettings
from ...core._shared import evaluator_for, log_path
from .pick import Side

INTERLEAVE_MISSING = (
    "--interleave is not available in this version of loadeval_nb (its core has no "
    "interleaved pair yet); run without it to measure the real and the ideal run one after "
    "the other."
)


def interleave_available() -> bool:
    """Whether the core can measure both sides of a pair in one loop."""
    return _interleaved_class() is not None


def _interleaved_class() -> Optional[Any]:
    try:
        return getattr(core, "InterleavedEvaluator", None)
    except Exception:  # a name that moved warns; anything else: not there
        return None


def interleaved_wrapper(loader: Any, settings: RunSettings, metrics_files: dict[str, str]) -> Any:
    """The wrapper that measures ``loader``'s real and ideal runs interleaved in one pass,
    writing their logs to ``metrics_files`` (``{"real": path, "ideal": path}``).

    This is the one place ``--interleave`` meets the core: it needs the core's
    interleaved pair (an ``InterleavedEvaluator`` on ``loadeval_nb.core``'s face, taking
    the loader, the run's settings and ``metrics_files``; iterated as the loader, one pass;
    ``close()`` writes both logs). Raises :class:`LoadEvalError` where the core has none.
    """
    cls = _interleaved_class()
    if cls is None:
        raise LoadEvalError(INTERLEAVE_MISSING)
    return cls(
        loader,
        steps=settings.steps,
        warmup=settings.warmup,
        num_cached_batches=settings.num_cached_batches,
        cache_on=settings.cache_on,
        sample_interval_s=settings.sample_interval_s,
        auto_stop=settings.auto_stop,
        worker_timing=settings.worker_timing,
        metrics_files=metrics_files,
    )


def side_for(which: str, settings: RunSettings, stamp: str, label: str) -> Side:
    """The :class:`Side` a child of kind ``which`` ("real", "ideal", "interleave")
    measures, its logs named as the pair names them (``...-real.json``,
    ``...-real-rank0.json`` under ranks)."""
    names = ("real", "ideal") if which == "interleave" else (which,)

    def paths() -> dict[str, str]:
        out = {}
        for name in names:
            path = log_path(settings, stamp, label, name)
            assert path is not None  # a child always has a log folder
            out[name] = path
        return out

    def make(loader: Any, files: dict[str, str]) -> Any:
        if which == "interleave":
            return interleaved_wrapper(loader, settings, files)
        return evaluator_for(loader, which, settings, metrics_file=files[which])

    return Side(names, make, paths)
