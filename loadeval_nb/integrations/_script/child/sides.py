"""The wrapper each kind of child puts around the script's training loader: a log-mode
:class:`~loadeval_nb.LoaderEvaluator` (the real run), a replay one (the ideal run), or
a ``LoaderEvaluator(loader, mode="pair")`` that measures both in blocks (the pair),
each built from the run's settings as the parent checked them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ....core._shared import SIDES, EpochPair, evaluator_for, log_path, pair_epochs
from ....core.errors import LoadEvalError
from ....core.explore import RunSettings
from ....core.measure import LoaderEvaluator
from .pick import Side
from .proof import NO_GROUP, ProvedPair, in_process_group

CONTENDED = "contended"
"""The pair's third arm's run (``--contention``): its log beside the real and ideal."""
VARIANT = "variant"
"""The variant arm's run (``--try``): its log beside the others."""


def pair_evaluator(loader: Any, settings: RunSettings, metrics_files: dict[str, str]) -> Any:
    """The wrapper that measures ``loader``'s real and ideal runs interleaved in one pass,
    writing their logs to ``metrics_files`` (``{"real": path, "ideal": path}``). Whether
    the pass interleaves is the core's one rule (its plan, made as the wrapper is): a
    pass too short raises ``NotInterleavable``, which the child reports."""
    files: dict[str, Optional[str]] = dict(metrics_files)
    return LoaderEvaluator(
        loader,
        mode="pair",
        steps=settings.steps,
        warmup=settings.warmup,
        num_cached_batches=settings.num_cached_batches,
        cache_on=settings.cache_on,
        sample_interval_s=settings.sample_interval_s,
        auto_stop=settings.auto_stop,
        worker_timing=settings.worker_timing,
        metrics_files=files,
        contention=settings.contention,
        variant=settings.variant,
    )


def side_for(
    which: str, settings: RunSettings, stamp: str, label: str, prove_straggler: bool = False
) -> Side:
    """The :class:`Side` a child of kind ``which`` ("real", "ideal", "pair") measures
    (a pair whose loader's epoch is too short for blocks: on the loop's own epochs, an
    :class:`~loadeval_nb.core.measure.epochs.EpochPair`),
    its logs named as the pair names them (``...-real.json``, ``...-real-rank0.json``
    under ranks; ``...-contended...`` too where the pair may have the contended arm,
    written only if it has). ``prove_straggler``: the pair's pass goes on with the
    straggler proof (:class:`~.proof.ProvedPair`)."""
    names = SIDES if which == "pair" else (which,)
    if which == "pair" and settings.contention is not False:
        names = (*names, CONTENDED)
    if which == "pair" and settings.variant is not None:
        names = (*names, VARIANT)

    def paths() -> dict[str, str]:
        out = {}
        for name in names:
            path = log_path(settings, stamp, label, name)
            assert path is not None  # a child always has a log folder
            out[name] = path
        return out

    def make(loader: Any, files: dict[str, str]) -> Any:
        if which != "pair":
            return evaluator_for(loader, which, settings, metrics_file=files[which])
        if not prove_straggler:
            return pair_evaluator(loader, settings, files)
        if not in_process_group():  # before the pair starts anything
            raise LoadEvalError(NO_GROUP)
        return ProvedPair(pair_evaluator(loader, settings, files), settings, files["real"])

    def make_epochs(loader: Any, files: dict[str, str]) -> EpochPair:
        # whole epochs a side: the loop's epoch is the block, never cut; --steps says how
        # many of them (enough to hold that many steps a side)
        n = len(loader)
        whole = replace(settings, steps=n)
        return EpochPair(
            evaluator_for(loader, "real", whole, metrics_file=files["real"]),
            evaluator_for(loader, "ideal", whole, metrics_file=files["ideal"]),
            epochs=pair_epochs(settings.steps, n),
        )

    epochs = make_epochs if which == "pair" and not prove_straggler else None
    return Side(names, make, paths, epochs)
