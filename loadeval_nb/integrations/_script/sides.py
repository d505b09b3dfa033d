"""The wrapper each kind of child puts around the script's training loader: a log-mode
:class:`~loadeval_nb.LoaderEvaluator` (the real run), a replay one (the ideal run), or
an :class:`~loadeval_nb.core.measure.InterleavedEvaluator` that measures both in blocks (the pair),
each built from the run's settings as the parent checked them."""

from __future__ import annotations

from typing import Any, Optional

from ...core._shared import SIDES, evaluator_for, log_path
from ...core.explore import RunSettings
from ...core.measure import InterleavedEvaluator
from .pick import Side


def pair_evaluator(
    loader: Any, settings: RunSettings, metrics_files: dict[str, str]
) -> InterleavedEvaluator:
    """The wrapper that measures ``loader``'s real and ideal runs interleaved in one pass,
    writing their logs to ``metrics_files`` (``{"real": path, "ideal": path}``). Whether
    the pass interleaves is the core's one rule (its plan, made as the wrapper is): a
    pass too short raises ``NotInterleavable``, which the child reports."""
    files: dict[str, Optional[str]] = dict(metrics_files)
    return InterleavedEvaluator(
        loader,
        steps=settings.steps,
        warmup=settings.warmup,
        num_cached_batches=settings.num_cached_batches,
        cache_on=settings.cache_on,
        sample_interval_s=settings.sample_interval_s,
        auto_stop=settings.auto_stop,
        worker_timing=settings.worker_timing,
        metrics_files=files,
        contention=settings.contention,
    )


def side_for(which: str, settings: RunSettings, stamp: str, label: str) -> Side:
    """The :class:`Side` a child of kind ``which`` ("real", "ideal", "pair") measures,
    its logs named as the pair names them (``...-real.json``, ``...-real-rank0.json``
    under ranks)."""
    names = SIDES if which == "pair" else (which,)

    def paths() -> dict[str, str]:
        out = {}
        for name in names:
            path = log_path(settings, stamp, label, name)
            assert path is not None  # a child always has a log folder
            out[name] = path
        return out

    def make(loader: Any, files: dict[str, str]) -> Any:
        if which == "pair":
            contended = log_path(settings, stamp, label, "contended")
            if contended is not None and settings.contention is not False:
                files = {**files, "contended": contended}  # (written if the pass has the arm)
            return pair_evaluator(loader, settings, files)
        return evaluator_for(loader, which, settings, metrics_file=files[which])

    return Side(names, make, paths)
