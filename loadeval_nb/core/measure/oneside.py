"""The engine of ``LoaderEvaluator(mode="log")`` and ``mode="replay"``: one side (the real
loader, or its replayed cache) measured over the loop's own epochs, as torch's
``_SingleProcessDataLoaderIter`` is one of the iterators ``DataLoader`` hands out. The wrapper
a user holds is :class:`~loadeval_nb.LoaderEvaluator` (:mod:`.evaluator`); this module keeps
the argument checks, iteration and the epoch life cycle; what differs between log and
replay is in :mod:`.modes`, what every engine shares in :mod:`.base`, the replay cache in
:mod:`.cache`, turning stamps into a :class:`~loadeval_nb.core.record.run.Run` and its file
in :mod:`.build_run`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any, Callable, Optional

from .._env import (
    cuda_in_use,
    cuda_synchronize,
    interrupts_deferred,
    safe_len,
)
from .._errors import check_choice, check_int
from .._files import expand_path
from .._format import fmt_bytes, fmt_seconds
from ..errors import LoadEvalError
from ..record.journal import MetricsWriter
from ..record.run import Run, step_metrics
from ..record.runlog import check_metrics_file
from .adaptive import AutoStop
from .base import Evaluator
from .build_run import LogWriter, run_settings
from .config import EvaluatorConfig
from .modes import MODES, LogMode, ReplayMode
from .resource import resource_text
from .timing import Clock, EpochGuard, EpochRecord, epoch_steps


class OneSide(Evaluator):
    """The engine of ``mode="log"`` and ``mode="replay"``: one side measured over the
    loop's epochs (see the module's notes). Its arguments are
    :class:`~loadeval_nb.LoaderEvaluator`'s."""

    def __init__(
        self,
        dataloader: Any,
        mode: str = "log",
        num_cached_batches: int = 20,
        metrics_file: Optional[str] = None,
        *,
        steps: Any = None,
        warmup: int = 0,
        cache_on: str = "host",
        cache_budget_bytes: Optional[int] = None,
        device: Any = None,
        sample_interval_s: Optional[float] = 0.1,
        label: Optional[str] = None,
        clock: Optional[Clock] = None,
        auto_stop: Optional[AutoStop] = None,
        worker_timing: bool = False,
        first_batch: Optional[Callable[[Any], None]] = None,
    ) -> None:
        check_choice("mode", mode, tuple(MODES))
        if steps == "auto" or auto_stop is not None:
            if auto_stop is not None and not isinstance(auto_stop, AutoStop):
                raise LoadEvalError(f"auto_stop must be an AutoStop, not {auto_stop!r}.")
            if steps not in (None, "auto"):
                raise LoadEvalError(
                    f"steps={steps!r} and auto_stop both set how long a run is; pass "
                    "one of them (AutoStop(max_steps=...) caps an adaptive run)."
                )
            auto_stop = auto_stop or AutoStop()
            steps = auto_stop.max_steps
        elif isinstance(steps, str):
            raise LoadEvalError(f"steps must be an integer, None or 'auto', not {steps!r}.")
        check_int("steps", steps, 1, allow_none=True)
        self._check(
            dataloader,
            cache_on=cache_on,
            num_cached_batches=num_cached_batches,
            warmup=warmup,
            cache_budget_bytes=cache_budget_bytes,
            sample_interval_s=sample_interval_s,
            label=label,
        )
        if metrics_file is not None:
            check_metrics_file(metrics_file)

        self._start(dataloader, clock, sample_interval_s, label)
        self.mode = mode
        self.num_cached_batches = num_cached_batches
        self.metrics_file = expand_path(metrics_file) if metrics_file is not None else None
        self.steps: Optional[int] = steps
        self.auto_stop: Optional[AutoStop] = auto_stop
        self.worker_timing = bool(worker_timing)
        self.warmup = warmup
        self.cache_on = cache_on
        self.cache_budget_bytes = cache_budget_bytes
        self.device = device
        self._epochs: list[EpochRecord] = []
        # The open epoch's guard is held weakly: the training loop's iterator owns it,
        # so dropping the iterator (break, exception) finalises the guard and closes the epoch.
        self._open: Optional[tuple[EpochRecord, weakref.ref[EpochGuard]]] = None
        self._final_run: Optional[Run] = None  # to_run() once closed: nothing changes then
        self._log: Optional[LogWriter] = None
        # replay fills its cache here: a budget or an empty loader is refused at once
        self.config = EvaluatorConfig(
            dataloader=dataloader,
            clock=self.clock,
            steps=steps,
            warmup=warmup,
            auto_stop=auto_stop,
            worker_timing=self.worker_timing,
            num_cached_batches=num_cached_batches,
            cache_on=cache_on,
            cache_budget_bytes=cache_budget_bytes,
            device=device,
            first_batch=first_batch,
        )
        """What the modes read (copied once; the modes never read the evaluator back)."""
        self._mode: LogMode | ReplayMode = MODES[mode](self.config)
        self.sides = (self._mode.side,)

    # -- the replay cache, as DALI names it ---------------------------------------------
    @property
    def cached_batches(self) -> list[Any]:
        """The batches replay serves (empty in log mode)."""
        return self._mode.cache.batches if isinstance(self._mode, ReplayMode) else []

    @property
    def cache_ready(self) -> bool:
        return isinstance(self._mode, ReplayMode) and self._mode.cache.ready

    @property
    def cache_bytes(self) -> Optional[int]:
        """Bytes held by the cached batches (None in log mode)."""
        return self._mode.cache.nbytes if isinstance(self._mode, ReplayMode) else None

    # -- DataLoader look-alike -------------------------------------------------
    def __len__(self) -> int:
        n = self.config.expected_steps()
        held = getattr(self._mode, "held", None)  # a replay that counted its loader's epoch
        if n is not None and held is not None:
            n = min(n, held)
        if n is None:
            raise TypeError(
                f"{type(self.dataloader).__name__} has no len(); pass steps=N to fix one."
            )
        return n

    def __repr__(self) -> str:
        return (
            f"LoaderEvaluator({type(self.dataloader).__name__}, mode={self.mode!r}, "
            f"steps={self.total_steps}, cached={len(self.cached_batches)})"
        )

    def __enter__(self) -> OneSide:
        return self

    # -- iteration --------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        self._close_open("stopped")
        self._closed, self._final_run = False, None
        rec = EpochRecord()
        # its stamp containers are made now, before anything holds them; with CUDA, the
        # GPU's queued work is waited for once where the steady steps begin
        catch_up = (max(self.warmup, 1), cuda_synchronize) if cuda_in_use() else None
        rec.prepare(self.clock, catch_up)
        source: list[Any] = [None]  # the closure reads it when the epoch ends
        guard = EpochGuard(lambda status: self._finish(rec, status, source[0]))
        self._begin_pass()
        try:
            it, source[0] = self._mode.open_epoch(rec, guard)
        except BaseException:
            guard.close("source-error")
            raise
        self._epochs.append(rec)
        self._open = (rec, weakref.ref(guard))
        return it

    def _finish(self, rec: EpochRecord, status: str, src: Any) -> None:
        """Close an epoch: account queued GPU work, stop samplers and workers, save."""
        if rec.finished:
            return
        try:
            with interrupts_deferred():  # more Ctrl-Cs must not lose the run log
                self._finish_epoch(rec, status, src)
        finally:
            self._sigint.uninstall()

    def _finish_epoch(self, rec: EpochRecord, status: str, src: Any) -> None:
        clock = self.clock
        rec.end_ns = clock()
        interrupted = self._sigint.at is not None
        if cuda_in_use():
            cuda_synchronize()
            rec.sync_ns = clock() - rec.end_ns
        rec.status = self._mode.settle_status(rec, status, interrupted)
        if self._open is not None and self._open[0] is rec:
            self._open = None
        if not rec.starts and rec.status != "complete":
            # an iterator made and dropped before asking for a batch (a framework checking
            # that the loader is iterable) measured nothing: it is not an epoch
            self._epochs[:] = [r for r in self._epochs if r is not rec]
        if self._sampler is not None:
            self._sampler.pause()  # no join on the loop's path; close() ends the thread
        self._mode.close_epoch(rec, src, exhausted=status == "complete")
        self._write_metrics(final=False)
        rec.finished = True

    def _write_metrics(self, final: bool) -> None:
        """Bring ``metrics_file`` up to date: the new epochs only while the loop runs
        (see :mod:`..record.journal`), the whole document at ``close()``."""
        if not self.metrics_file:
            return
        if self._log is None or self._log.path != self.metrics_file:
            self._log = LogWriter(self.metrics_file)
        if final:
            self._log.write_all(self.to_run())
        else:
            self._log.epoch_ended(self._build_run)

    @property
    def _writer(self) -> Optional[MetricsWriter]:
        """The run log's writer (None before the first write)."""
        return self._log.writer if self._log is not None else None

    @_writer.setter
    def _writer(self, writer: Optional[MetricsWriter]) -> None:
        if self._log is not None:
            self._log.writer = writer

    def _close_open(self, status: str) -> None:
        if self._open is not None:
            guard = self._open[1]()
            if guard is not None:
                guard.close(status)
            self._open = None

    def close(self) -> None:
        """End any epoch still open (e.g. after ``break``), stop the samplers, and stop the
        persistent workers of a loader whose workers this evaluator started."""
        self._close_open("stopped")
        if self._sampler is not None:
            self._sampler.stop()
        self._mode.close()
        if not self._closed:
            self._closed = True
            self._final_run = self._build_run()  # nothing is measured after close()
            if self._writer is not None:  # the journal folded into one document
                self._write_metrics(final=True)

    def release(self) -> None:
        """:meth:`close`, then let go of the replay cache (host and device memory): for a
        wrapper whose runs are over, so that a result holding its :class:`Run` holds
        no batches. The wrapper cannot replay again after this."""
        self.close()
        self._mode.release()

    def worker_load_ns(self) -> Optional[list[int]]:
        """Per-batch production times measured inside the DataLoader's worker processes
        (``worker_timing=True``, ``num_workers > 0``), in order of completion; else None."""
        return self._mode.worker_load_ns()

    # -- DALI's methods: get_metrics, save_metrics, print_summary (seconds, as DALI) ----
    def get_metrics(self) -> dict[str, Any]:
        """DALI-compatible metrics dict (seconds), plus step statistics; ``{}`` before any batch.

        ``batch_times`` (as in DALI) is the time spent inside ``next()`` per batch;
        in replay mode it is not measured (zeros): a cache lookup costs nanoseconds.
        ``step_times`` is the whole step, ``next()`` to ``next()``.
        """
        run = self.to_run()
        if run.n_steps == 0:
            return {}
        return {
            **step_metrics(run, self.warmup),
            "cached_batches": len(self.cached_batches),
            "cache_ready": self.cache_ready,
        }

    def save_metrics(self, filename: Optional[str] = None, *, quiet: bool = False) -> Optional[str]:
        """Write the run log (JSON, with DALI's metric keys at the top level) to ``filename``
        or ``metrics_file``. Returns the path, or None (with a message) if neither is set."""
        filename = filename or self.metrics_file
        if not filename:
            print("No filename provided for saving metrics; pass save_metrics('run.json').")
            return None
        path = self.to_run().save(filename)
        if not quiet:
            print(f"Metrics saved to: {path}")
        return path

    def print_summary(self, file: Any = None) -> None:
        """Print a readable summary (starts with ``Loader Evaluator Summary:``)."""
        dataset = getattr(self.dataloader, "dataset", None)
        ds_len = safe_len(dataset) if dataset is not None else None
        n_len = safe_len(self.dataloader)
        lines = [
            "Loader Evaluator Summary:",
            f"  Mode: {self.mode}",
            f"  Dataset size: {ds_len if ds_len is not None else 'unknown'}",
            f"  Number of batches: {n_len if n_len is not None else 'unknown'}",
            f"  Cache size: {len(self.cached_batches)}/{self.num_cached_batches}",
            f"  Cache ready: {self.cache_ready}",
        ]
        if self.cache_bytes is not None:
            lines.append(f"  Cache memory: {fmt_bytes(self.cache_bytes)} on {self.cache_on}")
        m = self.get_metrics()
        if m:
            lines += [
                f"  Total batches processed: {m['total_batches']}",
                f"  Total time: {m['total_time']:.2f}s",
            ]
            if self.mode == "log":  # replay does not time next()
                lines += [
                    f"  Average batch time: {m['avg_batch_time']:.4f}s (waiting in next())",
                    f"  Min batch time: {m['min_batch_time']:.4f}s",
                    f"  Max batch time: {m['max_batch_time']:.4f}s",
                ]
            startup = self.to_run().startup_s()
            if startup is not None:
                lines.append(
                    f"  Start-up: {fmt_seconds(startup)} (iter() to the first batch; "
                    "not in the step times)"
                )
            lines += [
                f"  Steady steps: {m['steady_steps']} (each epoch's first step is its start-up; "
                f"warm-up {max(self.warmup, 1)} per epoch)",
                f"  Mean step time: {fmt_seconds(m['avg_step_time'])}"
                f" (median {fmt_seconds(m['median_step_time'])}, p90 {fmt_seconds(m['p90_step_time'])})",
            ]
            if m["samples_per_s"] is not None:
                lines.append(f"  Throughput: {m['samples_per_s']:.1f} samples/s")
            lines.append(f"  CPU: {self.to_run().cpu_text()}")
            workers = resource_text(self.to_run().worker_resource)
            if workers:  # what the workers spent their time on, as the verdict says it
                lines.append(f"  Workers: {workers}")
            if m["wait_share"] is not None:
                lines.append(f"  Time waiting for data: {m['wait_share']:.1%}")
            if m["status"] != "complete":
                lines.append(f"  Status: {m['status']}")
        print("\n".join(lines), file=file)

    # -- live reading (for dashboards; never stops or changes anything) ------------
    def _side_epochs(self, side: str) -> tuple[list[EpochRecord], bool]:
        if side not in self.sides:
            raise LoadEvalError(
                f"This {self.mode} run measures the {self.sides[0]} side, not {side!r}."
            )
        return self._epochs, self._mode.measure_wait

    # -- results ------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        wait = self._mode.measure_wait
        return sum(len(epoch_steps(r, measure_wait=wait).step_ns) for r in self._epochs)

    def to_run(self, side: Optional[str] = None) -> Run:
        """A :class:`Run` with everything measured so far (``side``: this wrapper's one).

        Safe to call inside the training loop: an epoch still running is read as a
        snapshot (its step in progress flagged incomplete) and keeps running. The Run is
        frozen at :meth:`close`: the same object is handed out until the next ``iter()``.
        """
        if side is not None:
            self._side_epochs(side)
        final = self._final_run
        return final if final is not None else self._build_run()

    def _build_run(self, first_epoch: int = 0, first_tick: int = 0) -> Run:
        """The run so far; from epoch ``first_epoch`` and sampler tick ``first_tick`` on
        for a part of it (what the metrics journal appends)."""
        mode = self._mode
        return self._build(
            self._epochs,
            first_epoch,
            mode=mode.name,
            measure_wait=mode.measure_wait,
            label=self.label or mode.side,
            settings=run_settings(
                num_cached_batches=self.num_cached_batches,
                steps=self.steps,
                auto_stop=self.auto_stop,
                cache_budget_bytes=self.cache_budget_bytes,
                cache=mode.cache if isinstance(mode, ReplayMode) else None,
                cache_on=self.cache_on,
                batches_cached=len(self.cached_batches),
            ),
            samples_per_batch=mode.samples_per_batch(),
            short_last_batch=mode.short_last_batch,
            util=(
                self._sampler.series(self._t0 or 0, since=first_tick)
                if self._sampler is not None
                else None
            ),
            worker_load_ns=self.worker_load_ns(),
        )

    def worker_pids(self) -> set[int]:
        return self._mode.worker_pids()
