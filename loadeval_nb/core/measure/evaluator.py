"""LoaderEvaluator: a drop-in DataLoader wrapper that logs, replays, or both in one loop.

API-compatible superset of NVIDIA DALI's ``LoaderEvaluator`` (PyTorch plugin; DALI's
methods, ``get_metrics``, ``save_metrics`` and ``print_summary``, are here). This module is
the one class a user holds, in every mode; the work is a private engine's, one per mode's
life cycle: :class:`~.oneside.OneSide` (``mode="log"``, ``"replay"``: one side over the
loop's epochs) and :class:`~.interleave.InterleavedPass` (``mode="pair"``: the arms
interleaved in blocks within one epoch).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, Optional

from .._env import safe_len
from .._errors import check_choice, close_match
from ..errors import LoadEvalError
from ..record.run import Run
from ..record.runlog import expand_path
from .base import Wrapper
from .blocks import NotInterleavable
from .epochs import EpochPair, SidesSampler, epochs_fit, pair_epochs
from .interleave import InterleavedPass, side_paths
from .modes import MODES
from .oneside import OneSide
from .sampler import UtilSampler

_OWN = {
    InterleavedPass: inspect.signature(InterleavedPass).parameters,
    OneSide: inspect.signature(OneSide).parameters,
}
PAIR_ONLY = tuple(n for n in _OWN[InterleavedPass] if n not in _OWN[OneSide])
"""The arguments only the interleaved pass takes (``blocks``, ``contention``, ``variant``, ...)."""


class LoaderEvaluator(Wrapper):
    _engine: OneSide | InterleavedPass | EpochPair
    """Wrap a DataLoader (or any iterable of batches) to measure what loading costs.

    * ``mode="log"``: iterate the real loader and time every step: the wait inside
      ``next()`` and the whole step (``next()`` to ``next()``).
    * ``mode="replay"``: at construction pull only ``num_cached_batches`` batches,
      shut the source down, then serve those batches over and over
      (``len(dataloader)`` or ``steps`` per epoch): the loop as it would run
      if loading cost nothing.
    * ``mode="pair"``: both in one loop, real and replayed blocks interleaved (A B B A)
      within one epoch of the loader; ``steps`` is per side (default: half the epoch),
      ``metrics_file`` names a run log per arm (``-real``, ``-ideal``, ... before its
      extension); ``warmup`` defaults to 10 real steps. ``get_metrics()`` has DALI's
      keys at its top level, the real arm's, and each arm's beside them by name;
      ``to_runs()`` holds every arm's run; the pass's own arguments (``blocks``,
      ``metrics_files``, ``contention``, ``representative``, ``variant``) are those of
      the interleaved engine (:class:`~.interleave.InterleavedPass`).

    The class is the same in every mode (``type(ev) is LoaderEvaluator``): what differs
    is the private engine behind it, :class:`~.oneside.OneSide` (log, replay) or
    :class:`~.interleave.InterleavedPass` (pair), as a ``DataLoader`` hands out one
    iterator class per setting. ``iter()`` returns the engine's own iterator, so the
    wrapper adds nothing to a step.

    Args:
        dataloader: a ``torch.utils.data.DataLoader`` or any iterable of batches.
        mode: ``"log"``, ``"replay"`` or ``"pair"``.
        num_cached_batches: batches to cache for replay.
        metrics_file: if set, the run log is written there (JSON) whenever an
            epoch ends, also when the loop stops early, so nothing is lost.
        steps: end each epoch after this many batches, warm-up included (None: the
            whole loader; ``"auto"``: an adaptive stop with defaults). ``steps`` means
            the same in :class:`RunSettings` and in ``%%loadeval --steps``.
        warmup: steps at the start of each epoch excluded from statistics (kept in
            the log).
        cache_on: ``"host"`` keeps batches as produced (pinned stays pinned);
            ``"device"`` moves them to the GPU once, so replay also excludes the
            host-to-device copy.
        cache_budget_bytes: refuse to cache more than this (default: half the
            host, or GPU, memory available when caching starts).
        device: target device for ``cache_on="device"`` (default: the current CUDA device).
        sample_interval_s: utilisation sampling period; None disables the samplers.
        label: a name for the run, shown in plots and reports.
        auto_stop: stop each epoch once its step time is known to ±5 % (an
            :class:`AutoStop`; ``steps="auto"`` is the same with defaults).
        worker_timing: log mode with ``num_workers > 0``: also time every batch
            inside the worker processes (``worker_load_ns()``; feeds the simulator).
        clock: integer-nanosecond monotonic clock (tests inject a fake one).
        first_batch: log mode: called with the first batch of the first epoch, before
            the loop gets it (a check a caller makes, such as that a replay cache of such
            batches will fit, without starting the loader once more).

    Raises:
        ValueError (LoadEvalError): bad arguments, a non-iterable, an empty loader
            in replay mode, an unsized source in replay mode without ``steps``.
        CacheBudgetError: the cache would not fit the budget.
    """

    def __init__(
        self,
        dataloader: Any,
        mode: str = "log",
        num_cached_batches: int = 20,
        metrics_file: Optional[str] = None,
        **options: Any,
    ) -> None:
        check_choice("mode", mode, (*MODES, "pair"))
        pair_only = [k for k in PAIR_ONLY if k in options]
        if pair_only and mode != "pair":
            raise LoadEvalError(
                f"{pair_only[0]}= is an argument of the interleaved pass; pass "
                f"mode='pair' with it, or leave it out of mode={mode!r}."
            )
        known = _OWN[InterleavedPass if mode == "pair" else OneSide]
        for name in options:
            if name not in known:
                raise TypeError(
                    f"LoaderEvaluator(mode={mode!r}) got an unexpected argument {name!r}"
                    f"{close_match(name, known)}; see help(LoaderEvaluator) for its arguments."
                )
        engine: OneSide | InterleavedPass | EpochPair
        if mode == "pair":
            asked = options.get("steps")
            if options.get("steps") is None and hasattr(dataloader, "__iter__"):
                n = safe_len(dataloader)
                if not n:
                    raise LoadEvalError(
                        "mode='pair' needs steps=N (steps per side) for a loader without len()."
                    )
                options["steps"] = max(n // 2, 1)
            try:
                engine = InterleavedPass(
                    dataloader,
                    num_cached_batches=num_cached_batches,
                    metrics_file=metrics_file,
                    **options,
                )
            except NotInterleavable as why:
                engine = _on_epochs(
                    dataloader, why, num_cached_batches, metrics_file, options, asked
                )
        else:
            engine = OneSide(dataloader, mode, num_cached_batches, metrics_file, **options)
        object.__setattr__(self, "_engine", engine)

    # -- everything else is the engine's (and, past it, the loader's: batch_size, ...) --
    def __getattr__(self, name: str) -> Any:
        engine = self.__dict__.get("_engine")
        if engine is None:
            raise AttributeError(name)
        return getattr(engine, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._engine, name, value)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *dir(self._engine)})

    # -- DataLoader look-alike -------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        return iter(self._engine)

    def __len__(self) -> int:
        return len(self._engine)

    def __repr__(self) -> str:
        return repr(self._engine)

    def __enter__(self) -> LoaderEvaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the face's API, in every mode ----------------------------------------------
    @property
    def mode(self) -> str:
        """``"log"``, ``"replay"`` or ``"pair"``."""
        return self._engine.mode

    @property
    def sides(self) -> tuple[str, ...]:
        """The runs this wrapper measures: ``("real",)``, ``("ideal",)``, or the pass's arms."""
        return self._engine.sides

    @property
    def cached_batches(self) -> list[Any]:
        """The batches replay serves (empty in log mode, and in a pass before they fill)."""
        return self._engine.cached_batches

    @property
    def cache_ready(self) -> bool:
        return self._engine.cache_ready

    @property
    def cache_bytes(self) -> Optional[int]:
        """Bytes held by the cached batches (None in log mode)."""
        return self._engine.cache_bytes

    @property
    def total_steps(self) -> int:
        return self._engine.total_steps

    @property
    def util_sampler(self) -> Optional[UtilSampler | SidesSampler]:
        """The utilisation sampler (None when sampling is off; on the loop's epochs, every
        side's as one). (``ev.sampler`` is the wrapped DataLoader's sampler, passed
        through.)"""
        return self._engine.util_sampler

    @property
    def started_ns(self) -> Optional[int]:
        """Clock value when the first pass began (None before)."""
        return self._engine.started_ns

    @property
    def workers(self) -> dict[str, set[int]]:
        """The pids of the DataLoader worker processes each arm's loader started in this
        wrapper's passes, by arm (``"real"``, ``"variant"``): a worker that ended is told
        by its arm. Empty where it records none (one side measured)."""
        seen = getattr(self._engine, "workers_seen", None)
        return {arm: set(pids) for arm, pids in seen.items()} if seen else {}

    def close(self) -> None:
        """End any epoch (pass) still open, e.g. after ``break``; stop the samplers, and the
        persistent workers of a loader whose workers this wrapper started."""
        self._engine.close()

    def release(self) -> None:
        """:meth:`close`, then let go of the replay cache (host and device memory): for a
        wrapper whose runs are over. It cannot replay again after this."""
        self._engine.release()

    def get_metrics(self) -> dict[str, Any]:
        """DALI-compatible metrics dict (seconds), plus step statistics; ``{}`` before any
        batch. ``batch_times`` (as in DALI) is the time spent inside ``next()`` per batch
        (zeros in replay: a cache lookup costs nanoseconds); ``step_times`` is the whole
        step, ``next()`` to ``next()``. In a pass, the real arm's at the top level, and each
        arm's beside them by name (``m["ideal"]``, ...)."""
        return self._engine.get_metrics()

    def save_metrics(self, filename: Optional[str] = None, *, quiet: bool = False) -> Optional[str]:
        """Write the run log (JSON, with DALI's metric keys at the top level) to ``filename``
        or ``metrics_file`` (a pass: a log per arm beside it). Returns the path, or None
        (with a message) if neither is set."""
        return self._engine.save_metrics(filename, quiet=quiet)

    def print_summary(self, file: Any = None) -> None:
        """Print a readable summary (starts with ``Loader Evaluator Summary:``)."""
        self._engine.print_summary(file)

    def worker_load_ns(self) -> Optional[list[int]]:
        """Per-batch production times measured inside the DataLoader's worker processes
        (``worker_timing=True``, ``num_workers > 0``), in order of completion; else None."""
        return self._engine.worker_load_ns()

    def worker_pids(self) -> set[int]:
        """The pids of the DataLoader worker processes of the pass running now."""
        return self._engine.worker_pids()

    # -- live reading (for dashboards; never stops or changes anything) ------------
    def to_run(self, side: Optional[str] = None) -> Run:
        """A :class:`Run` with everything measured so far of ``side`` (None: the real side,
        or the one side this mode measures). Safe to call inside the training loop; frozen
        at :meth:`close`."""
        return self._engine.to_run(side)

    def to_runs(self) -> dict[str, Run]:
        """Each side's run: ``{"real": Run}``, ``{"ideal": Run}`` or every arm's."""
        return self._engine.to_runs()

    def steps_since(
        self, side: Any = None, cursor: Optional[tuple[int, int]] = None
    ) -> tuple[list[int], tuple[int, int]]:
        """Step times (ns) of ``side``'s steps completed since ``cursor`` (epoch or block,
        step), and the new cursor; ``steps_since(cursor)``: the first side's. Safe to call
        from another thread while the loop runs."""
        return self._engine.steps_since(side, cursor)

    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns`` (None: before the first pass)."""
        return self._engine.side_at(t_ns)


_ON_EPOCHS_REFUSES = ("blocks", "contention", "variant", "planned", "arms", "auto_stop")
"""The pass's arguments the pair on the loop's epochs has no place for: with any of them
set, a loader too short for blocks is refused as before."""


def _on_epochs(
    dataloader: Any,
    why: NotInterleavable,
    num_cached_batches: int,
    metrics_file: Optional[str],
    options: dict[str, Any],
    asked: Any,
) -> EpochPair:
    """``mode="pair"`` over a loader whose epoch is too short for blocks: the pair on the
    loop's own epochs (each ``iter()`` the next epoch of the schedule, whole epochs a side
    in A B B A order), as ``run_pair`` and the script runner measure it. ``why`` is raised
    again where that cannot be: a loader without a length or with too few steps an epoch
    after the warm-up, ``steps`` (``asked``) fewer than an epoch, or an argument only
    blocks have (:data:`_ON_EPOCHS_REFUSES`)."""
    warmup = options.get("warmup", _OWN[InterleavedPass]["warmup"].default)
    n = epochs_fit(dataloader, warmup, asked)
    if not why.epoch_limited or n is None or any(options.get(k) for k in _ON_EPOCHS_REFUSES):
        raise why
    files = (
        options.get("metrics_files")
        or (side_paths(expand_path(metrics_file)) if metrics_file is not None else None)
        or {}
    )
    common = {
        k: options[k]
        for k in ("cache_on", "cache_budget_bytes", "device", "sample_interval_s", "label", "clock")
        if k in options
    }
    real = OneSide(
        dataloader,
        "log",
        num_cached_batches,
        files.get("real"),
        steps=n,
        warmup=warmup,
        worker_timing=bool(options.get("worker_timing")),
        first_batch=options.get("first_batch"),
        **common,
    )
    ideal = OneSide(
        dataloader,
        "replay",
        num_cached_batches,
        files.get("ideal"),
        steps=n,
        warmup=warmup,
        **common,
    )
    return EpochPair(real, ideal, epochs=pair_epochs(asked, n))
