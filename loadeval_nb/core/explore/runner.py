"""The one runner under the pair, the ladder and the sweep: they decide *what* runs; this
measures it the same way for all three (time stamp and log paths, one run that never
raises, the A B B A order of blocks, repeats as more epochs of one wrapper) and hands
back :class:`~loadeval_nb.Run` records, never the wrappers, so that a finished result
holds no replay cache, worker or sampler."""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .._env import dist_rank, env_rank, interrupts_deferred
from .._errors import a_kind
from .._facts import option_name
from .._files import cannot_write_in
from ..errors import LoadEvalError, OptionError
from ..measure.cache import nothing_to_measure
from ..measure.evaluator import LoaderEvaluator
from ..record.lognames import log_name
from ..record.run import Run
from .result import Result
from .settings import RunHooks, RunSettings


def evaluator_for(
    loader: Any,
    which: str,
    settings: RunSettings,
    *,
    mode: Optional[str] = None,
    cache_on: Optional[str] = None,
    metrics_file: Optional[str] = None,
    label: Optional[str] = None,
    worker_timing: Optional[bool] = None,
    first_batch: Optional[Callable[[Any], None]] = None,
) -> LoaderEvaluator:
    """The wrapper one run of a pair, ladder or sweep uses, from the shared settings
    (``label`` defaults to ``which``; ``worker_timing`` to the settings' in log mode)."""
    mode = mode or ("log" if which == "real" else "replay")
    if worker_timing is None:
        worker_timing = settings.worker_timing and mode == "log"
    return LoaderEvaluator(
        loader,
        mode=mode,
        num_cached_batches=settings.num_cached_batches,
        metrics_file=metrics_file,
        steps=settings.steps,
        warmup=settings.warmup,
        cache_on=cache_on or settings.cache_on,
        sample_interval_s=settings.sample_interval_s,
        label=label or which,
        auto_stop=settings.auto_stop,
        worker_timing=worker_timing,
        first_batch=first_batch,
    )


def measure(
    which: str,
    make: Callable[[], LoaderEvaluator],
    run_once: Callable[[LoaderEvaluator], None],
    hooks: RunHooks,
    index: int,
    total: int,
    loader_name: str,
) -> tuple[Optional[LoaderEvaluator], Optional[BaseException]]:
    """One run: build the wrapper, tell the hooks, run the user's loop, clean up.

    Never raises: a failure (KeyboardInterrupt included) comes back as the error,
    with the partial run kept in the wrapper.
    """
    ev: Optional[LoaderEvaluator] = None
    error: Optional[BaseException] = None
    try:
        ev = make()
        before = ev.total_steps  # a repeat runs the same wrapper again: count this run only
        hooks.run_started(which, ev, index, total)
        run_once(ev)
        if ev.total_steps == before:
            if ev.to_run().blocks:  # the loop did iterate: the loader had nothing to give
                raise LoadEvalError(nothing_to_measure(ev.dataloader, loader_name))
            raise LoadEvalError(
                f"The cell never iterated {loader_name}; loop over it (for batch in {loader_name}: ...)."
            )
    except BaseException as e:  # KeyboardInterrupt included: clean up, keep, report
        error = e
    # the wrap-up completes however many interrupts arrive; one is then reported
    try:
        with interrupts_deferred():
            if ev is not None:
                ev.close()
                hooks.run_ended(which, ev, error)
    except KeyboardInterrupt as e:
        error = error or e
    return ev, error


_CLAIMED: set[str] = set()
"""Log paths handed out in this process (a path is claimed before its file exists)."""


def job_stamp() -> str:
    """The stamp in a result's log names: the time, or under ``torchrun`` the job's run id
    (``TORCHELASTIC_RUN_ID``, when the launch has one of its own: ``--standalone`` and
    ``--rdzv-id``), so that every rank of a job names its logs alike; by the clock, a rank
    that reached this a second after the others would be another job to ``gather_logs``."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if run_id and run_id != "none" and env_rank() is not None:
        return "job-" + re.sub(r"[^A-Za-z0-9_.]+", "_", run_id)[:40]
    return time.strftime("%Y%m%d-%H%M%S")


def claim_path(path: str) -> str:
    """``path``, or ``path`` with ``-2``, ``-3``, ... before its extension, whichever no file
    holds and no run of this process was given: a log never replaces another."""
    root, ext = os.path.splitext(path)
    candidate, k = path, 1
    while candidate in _CLAIMED or os.path.exists(candidate):
        k += 1
        candidate = f"{root}-{k}{ext}"
    _CLAIMED.add(candidate)
    return candidate


def check_writable_dir(directory: str, what: str) -> None:
    """Make ``directory`` if need be and check a file can be written there, or one
    :class:`LoadEvalError` naming ``what`` (the option) — before anything runs."""
    reason = cannot_write_in(directory)
    if reason is not None:
        raise LoadEvalError(
            f"Cannot write run logs in {directory!r} ({reason}); pass a {what} you can write to."
        )


MAX_LABEL_CHARS = 80
"""How much of a label goes into a log's file name (the name stays well under 255 bytes)."""


def log_path(settings: RunSettings, stamp: str, label: str, which: str) -> Optional[str]:
    """Where a run's JSON log goes under ``log_dir`` (None without one); under
    ``torch.distributed`` each rank writes its own (``...-rank3.json``)."""
    if not settings.log_dir:
        return None
    os.makedirs(settings.log_dir, exist_ok=True)
    # torchrun's RANK too: Lightning creates the process group inside fit, after this
    where = dist_rank()
    rank = where[0] if where is not None else env_rank()
    label = label[:MAX_LABEL_CHARS]  # a long label must not make a name too long to write
    return claim_path(os.path.join(settings.log_dir, log_name(stamp, label, which, rank)))


def is_one_shot(loader: Any) -> bool:
    """A generator or other iterator, used up by one pass (``iter(x) is x``). Asked only of
    objects with ``__next__``: ``iter()`` on a DataLoader would start its workers."""
    if not callable(getattr(type(loader), "__next__", None)):
        return False
    try:
        return iter(loader) is loader
    except TypeError:
        return False


PAIR_NEEDS_TWO_PASSES = "the real run would use up the batches the replay needs"


def check_run_args(loader: Any, run_once: Any, settings: Any) -> RunSettings:
    """The settings to use (``RunSettings()`` for None), after one sentence for a loader
    that is not iterable or a ``run_once`` that is not a function."""
    _check_loader(loader)
    if not callable(run_once):
        raise LoadEvalError(
            "run_once must be a function that runs the training loop over the evaluator it is "
            f"given (def run_once(ev): for batch in ev: ...), not {a_kind(run_once)}."
        )
    return _checked_settings(settings)


def check_loader_and_settings(loader: Any, settings: Any) -> RunSettings:
    """:func:`check_run_args` before there is a loop: the loader and the settings."""
    _check_loader(loader)
    return _checked_settings(settings)


def _check_loader(loader: Any) -> None:
    if not hasattr(loader, "__iter__"):
        raise LoadEvalError(
            f"The loader must be an iterable of batches such as a DataLoader, not {a_kind(loader)}."
        )


def _checked_settings(settings: Any) -> RunSettings:
    if settings is None:
        return RunSettings()
    if not isinstance(settings, RunSettings):
        raise LoadEvalError(
            f"settings must be a RunSettings such as RunSettings(steps=200), not {a_kind(settings)}."
        )
    return settings


def same_evaluator(ev: LoaderEvaluator) -> LoaderEvaluator:
    """For :func:`measure`: run a wrapper again (a repeat, a ladder's second block): one
    run, one more epoch."""
    return ev


def refuse_one_shot(loader: Any, loader_name: str, why: str, instead: str = "") -> None:
    """One sentence (a :class:`LoadEvalError`) for a one-shot iterator where the loop runs
    more than once; ``why`` says why it must, ``instead`` what else the user may do."""
    if is_one_shot(loader):
        raise LoadEvalError(
            f"{loader_name} is a one-shot iterator (a {type(loader).__name__}): {why}; pass a "
            f"re-iterable loader such as a DataLoader{', or ' + instead if instead else ''}."
        )


def abba(names: Sequence[str], blocks: int) -> list[str]:
    """``names`` in ``blocks`` blocks, every other block reversed (A B, B A, A B, ...): a
    drift over the whole measurement lands on every name alike."""
    return [n for b in range(blocks) for n in (names if b % 2 == 0 else names[::-1])]


class Runner:
    """Measures the runs one result needs, in the order its caller asks."""

    def __init__(
        self,
        result: Result,
        run_once: Callable[[LoaderEvaluator], None],
        settings: RunSettings,
        hooks: RunHooks,
        loader_name: str,
        total: int,
    ) -> None:
        self.result = result
        self.run_once = run_once
        self.settings = settings
        self.hooks = hooks
        self.loader_name = loader_name
        self.total = total
        self.index = 0
        self.stamp = job_stamp()
        self._evaluators: dict[str, LoaderEvaluator] = {}

    def measure(
        self,
        key: str,
        make: Callable[[Optional[str]], Any],
        *,
        which: Optional[str] = None,
        log_label: Optional[str] = None,
    ) -> Optional[BaseException]:
        """One run of ``key``: its wrapper is made by ``make(log_path)`` the first time,
        run again (one more epoch) after that. Returns the run's error (kept in the
        result as ``error`` and ``failed``), or None."""
        which = which or key
        ev = self._evaluators.get(key)
        if ev is not None:
            return self._run(key, which, functools.partial(same_evaluator, ev))
        if which == "pair":  # an interleaved pair names its two logs itself
            return self._run(key, which, functools.partial(make, None))
        label = self.result.label if log_label is None else log_label
        path = log_path(self.settings, self.stamp, label, which)
        if path:
            self.result.log_paths[key] = path
        return self._run(key, which, functools.partial(make, path))

    def again(self, key: str) -> Optional[BaseException]:
        """One more run (an epoch) of the wrapper the first :meth:`measure` of ``key``
        made (a ladder rung's second block)."""
        return self._run(key, key, functools.partial(same_evaluator, self._evaluators[key]))

    def _run(
        self, key: str, which: str, build: Callable[[], LoaderEvaluator]
    ) -> Optional[BaseException]:
        ev, error = measure(
            which, build, self.run_once, self.hooks, self.index, self.total, self.loader_name
        )
        self.index += 1
        if ev is not None:
            self._evaluators[key] = ev
        if error is not None:
            self.result.error, self.result.failed = error, key
        return error

    def path_for(self, which: str, label: Optional[str] = None) -> Optional[str]:
        """The log path of ``which`` (kept in the result's ``log_paths``), or None."""
        path = log_path(
            self.settings, self.stamp, self.result.label if label is None else label, which
        )
        if path:
            self.result.log_paths[which] = path
        return path

    def holds(self, key: str) -> bool:
        """Whether a wrapper of ``key`` was made and not taken yet."""
        return key in self._evaluators

    def so_far(self, key: str) -> Optional[Run]:
        """``key``'s run so far (its wrapper kept for more blocks), or None."""
        ev = self._evaluators.get(key)
        return ev.to_run() if ev is not None else None

    def take_pair(self, key: str) -> dict[str, Run]:
        """Both sides' runs of an interleaved wrapper, and let go of it (and its cache)."""
        ev = self._evaluators.pop(key, None)
        if ev is None:
            return {}
        ev.release()
        runs = ev.to_runs()
        return {k: r for k, r in runs.items() if r.n_steps or r.blocks}

    def take(self, key: str) -> Optional[Run]:
        """``key``'s run, and let go of its wrapper: its replay cache (host and device
        memory) is freed now, not when the result is."""
        ev = self._evaluators.pop(key, None)
        if ev is None:
            return None
        ev.release()
        return ev.to_run()

    def take_all(self) -> dict[str, Run]:
        return {k: run for k in list(self._evaluators) if (run := self.take(k)) is not None}


def check_many_runs(
    loader: Any,
    settings: RunSettings,
    loader_name: str,
    spelling: str,
    what: str,
    unit: str,
    repeat_instead: str,
    only_instead: str,
) -> None:
    """The checks of a ladder or a sweep (``what``), which run the loop once per ``unit`` and
    decide the runs themselves: ``repeat`` and ``only`` are refused, not ignored."""
    if settings.repeat != 1:
        raise OptionError("repeat", f" does not apply to a {what}: {repeat_instead}")
    if settings.only is not None:
        raise OptionError("only", f" does not apply to a {what}: {only_instead}")
    refuse_one_shot(loader, loader_name, f"the {what} runs the loop once per {unit}")
    if settings.log_dir:
        check_writable_dir(settings.log_dir, option_name("log_dir", spelling))
