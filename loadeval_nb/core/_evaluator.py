"""LoaderEvaluator: a drop-in DataLoader wrapper that logs or replays.

API-compatible superset of NVIDIA DALI's ``LoaderEvaluator`` (PyTorch plugin).
"""

from __future__ import annotations

import logging
import sys
import warnings
import weakref
from collections.abc import Iterator
from itertools import islice
from typing import Any, Callable, Optional

from ._adaptive import AutoChunker, AutoStop
from ._batches import batch_nbytes, is_tensor, iter_leaves, leading_dim, map_tensors
from ._env import cuda_in_use, cuda_synchronize, environment, loader_settings, safe_len
from ._errors import CacheBudgetError, CacheMutationWarning, LoadEvalError, check_int
from ._format import fmt_bytes, fmt_seconds
from ._run import Run
from ._samplers import UtilSampler
from ._timing import (
    DEFAULT_CLOCK,
    Clock,
    EpochGuard,
    EpochRecord,
    epoch_steps,
    timed_log_iter,
    timed_replay_iter,
)
from ._worker_timing import WorkerFetchTimer

__all__ = ["LoaderEvaluator", "DEFAULT_CACHE_BUDGET_FRACTION"]

log = logging.getLogger("loadeval_nb")

MODES = ("log", "replay")
CACHE_ON = ("host", "device")
DEFAULT_CACHE_BUDGET_FRACTION = 0.5
"""Default cache budget: this fraction of the host (or GPU) memory available now."""


def shutdown_source(it: Any) -> None:
    """Stop a source iterator now: DataLoader worker processes, or a generator."""
    for name in ("_shutdown_workers", "close"):
        fn = getattr(it, name, None)
        if callable(fn):
            try:
                fn()
            except Exception:  # pragma: no cover - best effort
                pass
            return


def default_budget(free: int, where: str) -> tuple[int, str]:
    """The default cache budget (bytes, and where it comes from) out of ``free`` bytes."""
    frac = DEFAULT_CACHE_BUDGET_FRACTION
    return int(free * frac), f"{frac:.0%} of the {fmt_bytes(free)} of {where}"


def host_budget() -> tuple[int, str]:
    """The default budget for what is kept in host memory (a replay cache, cached samples)."""
    import psutil

    return default_budget(psutil.virtual_memory().available, "host memory available")


class LoaderEvaluator:
    """Wrap a DataLoader (or any iterable of batches) to measure what loading costs.

    * ``mode="log"``: iterate the real loader and time every step: the wait inside
      ``next()`` and the whole step (``next()`` to ``next()``).
    * ``mode="replay"``: at construction pull only ``num_cached_batches`` batches,
      shut the source down, then serve those batches over and over
      (``len(dataloader)`` or ``max_steps`` per epoch): the loop as it would run
      if loading cost nothing.

    Args:
        dataloader: a ``torch.utils.data.DataLoader`` or any iterable of batches.
        mode: ``"log"`` or ``"replay"``.
        num_cached_batches: batches to cache for replay.
        metrics_file: if set, the run log is written there (JSON) whenever an
            epoch ends, also when the loop stops early, so nothing is lost.
        max_steps: end each epoch after this many batches (None: the whole loader).
        warmup_steps: steps at the start of each epoch excluded from statistics
            (kept in the log).
        cache_on: ``"host"`` keeps batches as produced (pinned stays pinned);
            ``"device"`` moves them to the GPU once, so replay also excludes the
            host-to-device copy.
        cache_budget_bytes: refuse to cache more than this (default: half the
            host, or GPU, memory available when caching starts).
        device: target device for ``cache_on="device"`` (default: the current CUDA device).
        sample_interval_s: utilisation sampling period; None disables the samplers.
        label: a name for the run, shown in plots and reports.
        auto_stop: stop each epoch once its step time is known to ±5 % (an
            :class:`AutoStop`; ``max_steps="auto"`` is the same with defaults).
        worker_timing: log mode with ``num_workers > 0``: also time every batch
            inside the worker processes (``worker_load_ns()``; feeds the simulator).
        clock: integer-nanosecond monotonic clock (tests inject a fake one).

    Raises:
        ValueError (LoadEvalError): bad arguments, a non-iterable, an empty loader
            in replay mode, an unsized source in replay mode without ``max_steps``.
        CacheBudgetError: the cache would not fit the budget.
    """

    def __init__(
        self,
        dataloader: Any,
        mode: str = "log",
        num_cached_batches: int = 20,
        metrics_file: Optional[str] = None,
        *,
        max_steps: Any = None,
        warmup_steps: int = 0,
        cache_on: str = "host",
        cache_budget_bytes: Optional[int] = None,
        device: Any = None,
        sample_interval_s: Optional[float] = 0.1,
        label: Optional[str] = None,
        clock: Optional[Clock] = None,
        auto_stop: Optional[AutoStop] = None,
        worker_timing: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'log' or 'replay', not {mode!r}.")
        if cache_on not in CACHE_ON:
            raise LoadEvalError(f"cache_on must be 'host' or 'device', not {cache_on!r}.")
        check_int("num_cached_batches", num_cached_batches, 1)
        if max_steps == "auto" or auto_stop is not None:
            if auto_stop is not None and not isinstance(auto_stop, AutoStop):
                raise LoadEvalError(f"auto_stop must be an AutoStop, not {auto_stop!r}.")
            if max_steps not in (None, "auto"):
                raise LoadEvalError(
                    f"max_steps={max_steps!r} and auto_stop both set how long a run is; pass "
                    "one of them (AutoStop(max_steps=...) caps an adaptive run)."
                )
            auto_stop = auto_stop or AutoStop()
            max_steps = auto_stop.max_steps
        elif isinstance(max_steps, str):
            raise LoadEvalError(f"max_steps must be an integer, None or 'auto', not {max_steps!r}.")
        check_int("max_steps", max_steps, 1, allow_none=True)
        check_int("warmup_steps", warmup_steps, 0)
        check_int("cache_budget_bytes", cache_budget_bytes, 0, allow_none=True)
        if sample_interval_s is not None and not (
            isinstance(sample_interval_s, (int, float)) and sample_interval_s > 0
        ):
            raise LoadEvalError(
                f"sample_interval_s must be a positive number of seconds or None, not {sample_interval_s!r}."
            )
        if not hasattr(dataloader, "__iter__"):
            raise LoadEvalError(
                f"LoaderEvaluator needs an iterable of batches such as a DataLoader, "
                f"not a {type(dataloader).__name__}."
            )
        if isinstance(dataloader, LoaderEvaluator):
            raise LoadEvalError(
                "dataloader is already a LoaderEvaluator; wrap the original loader instead."
            )
        if mode == "replay" and max_steps is None and safe_len(dataloader) is None:
            raise LoadEvalError(
                f"Replay needs to know how many steps make an epoch, but this "
                f"{type(dataloader).__name__} has no len(); pass max_steps=N."
            )

        self.dataloader = dataloader
        self.mode = mode
        self.num_cached_batches = num_cached_batches
        self.metrics_file = metrics_file
        self.max_steps: Optional[int] = max_steps
        self.auto_stop: Optional[AutoStop] = auto_stop
        self.worker_timing = bool(worker_timing)
        self._worker_timer: Optional[WorkerFetchTimer] = None
        self.warmup_steps = warmup_steps
        self.cache_on = cache_on
        self.cache_budget_bytes = cache_budget_bytes
        self.device = device
        self.label = label
        self._clock: Clock = clock or DEFAULT_CLOCK
        self.cached_batches: list[Any] = []
        self.cache_ready = False
        self.cache_bytes: Optional[int] = None
        self._cache_tensors: list[Any] = []
        self._cache_versions: list[int] = []
        self._mutation_warned = False
        self._epochs: list[EpochRecord] = []
        # The open epoch's guard is held weakly: the training loop's iterator owns it,
        # so dropping the iterator (break, exception) finalises the guard and closes the epoch.
        self._open: Optional[tuple[EpochRecord, weakref.ref[EpochGuard]]] = None
        self._t0: Optional[int] = None
        self._samples_per_batch: Optional[int] = None
        self._sampler: Optional[UtilSampler] = (
            UtilSampler(sample_interval_s, clock=self._clock) if sample_interval_s else None
        )
        self._loader_info = loader_settings(dataloader)
        self._listeners: list[Callable[[EpochRecord], None]] = []
        if mode == "replay":
            self._cache_batches()

    # -- DataLoader look-alike -------------------------------------------------
    def __len__(self) -> int:
        n = safe_len(self.dataloader)
        if self.max_steps is not None:
            return self.max_steps if n is None else min(n, self.max_steps)
        if n is None:
            raise TypeError(
                f"{type(self.dataloader).__name__} has no len(); pass max_steps=N to fix one."
            )
        return n

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes the wrapper lacks: batch_size, dataset, sampler, set_epoch, ...
        if name.startswith("__") or "dataloader" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["dataloader"], name)

    def __repr__(self) -> str:
        return (
            f"LoaderEvaluator({type(self.dataloader).__name__}, mode={self.mode!r}, "
            f"steps={self.total_steps}, cached={len(self.cached_batches)})"
        )

    def __enter__(self) -> LoaderEvaluator:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- caching (replay) -------------------------------------------------------
    def _budget(self) -> tuple[int, str]:
        if self.cache_budget_bytes is not None:
            return self.cache_budget_bytes, "cache_budget_bytes"
        if self.cache_on == "device":
            torch = sys.modules.get("torch")
            free, _ = torch.cuda.mem_get_info(self._target_device())  # type: ignore[union-attr]
            return default_budget(free, "GPU memory free")
        return host_budget()

    def _target_device(self) -> Any:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_available():
            raise LoadEvalError(
                "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'."
            )
        return (
            torch.device(self.device)
            if self.device is not None
            else torch.device("cuda", torch.cuda.current_device())
        )

    def _cache_batches(self) -> None:
        to_device: Optional[Callable[[Any], Any]] = None
        if self.cache_on == "device":
            dev = self._target_device()
            to_device = lambda b: map_tensors(b, lambda t: t.to(dev))  # noqa: E731
        it = iter(self.dataloader)
        try:
            cache: list[Any] = []
            for k, batch in enumerate(islice(it, self.num_cached_batches)):
                if k == 0:
                    self._check_budget(batch)
                    self._samples_per_batch = leading_dim(batch)
                cache.append(to_device(batch) if to_device else batch)
        finally:
            # Stop the source's workers now, so their teardown is not charged to the replay.
            if not getattr(self.dataloader, "persistent_workers", False):
                shutdown_source(it)
            del it
        if not cache:
            raise LoadEvalError(
                f"The {type(self.dataloader).__name__} produced no batches, so there is nothing to "
                "replay; check that its dataset is not empty (and drop_last with a small dataset)."
            )
        if to_device is not None:
            cuda_synchronize()
        if len(cache) < self.num_cached_batches:
            log.info(
                "loadeval_nb: the loader had only %d batches; caching all of them.", len(cache)
            )
        self.cached_batches = cache
        self.cache_bytes = sum(batch_nbytes(b) for b in cache)
        self._cache_tensors = [leaf for b in cache for leaf in iter_leaves(b) if is_tensor(leaf)]
        self._cache_versions = [t._version for t in self._cache_tensors]
        self.cache_ready = True

    def _check_budget(self, first: Any) -> None:
        per = batch_nbytes(first)
        need = per * self.num_cached_batches
        budget, why = self._budget()
        if need > budget:
            fits = budget // per if per else 0
            raise CacheBudgetError(
                f"Caching {self.num_cached_batches} batches of {fmt_bytes(per)} needs about "
                f"{fmt_bytes(need)}, over the budget of {fmt_bytes(budget)} ({why}); pass "
                f"num_cached_batches={max(fits, 1)} or less, or raise cache_budget_bytes."
            )

    def _check_mutation(self) -> None:
        if self._mutation_warned or not self._cache_versions:
            return
        now = [t._version for t in self._cache_tensors]  # grows with every in-place op
        if now != self._cache_versions:
            self._mutation_warned = True
            warnings.warn(
                "The training loop modified cached batches in place (e.g. images.sub_(mean)), so "
                "replayed batches were altered; copy them first (x = x.to(device) on another device, "
                "or x = x.clone()) or use out-of-place ops.",
                CacheMutationWarning,
                stacklevel=3,
            )

    # -- iteration --------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        self._close_open("stopped")
        rec = EpochRecord()
        src: Any = None
        # the closure reads `src` when the epoch ends, after it is assigned below
        guard = EpochGuard(lambda status: self._finish(rec, status, src))
        if self._sampler is not None:
            self._sampler.start()
        clock = self._clock
        t = clock()
        if self._t0 is None:
            self._t0 = t
        if self.mode == "log":
            try:
                # (the timer itself passes a loader without worker processes straight through)
                if self.worker_timing:
                    if self._worker_timer is None:
                        self._worker_timer = WorkerFetchTimer(self.dataloader)
                    src = self._worker_timer.iter()
                else:
                    src = iter(self.dataloader)
            except BaseException:
                guard.close("source-error")
                raise
            rec.setup_ns = clock() - t
            source: Iterator[Any] = src
            if self.auto_stop is not None:  # it stops at the AutoStop's max_steps itself
                source = self._auto_chunker(rec, source, None)
            elif self.max_steps is not None:
                source = islice(src, self.max_steps)
            hook = self._first_batch_hook() if self._samples_per_batch is None else None
            it = timed_log_iter(source, rec, guard, clock, hook)
        else:
            wrap = None
            if self.auto_stop is not None:

                def wrap(order: Iterator[Any]) -> Iterator[Any]:
                    return self._auto_chunker(rec, order, guard)

            it = timed_replay_iter(self.cached_batches, len(self), rec, guard, clock, wrap)
        self._epochs.append(rec)
        self._open = (rec, weakref.ref(guard))
        return it

    def _auto_chunker(
        self,
        rec: EpochRecord,
        source: Iterator[Any],
        guard: Optional[EpochGuard],
    ) -> Iterator[Any]:
        assert self.auto_stop is not None

        # no reference back to the chunker (a cycle would keep the guard alive after a break)
        def on_stop(n: int, reason: str) -> None:
            rec.auto_reason = reason
            if guard is not None:  # replay: the batch list outlives the stop; close now
                guard.close("complete")

        return AutoChunker(source, rec.starts, self.auto_stop, self.warmup_steps, on_stop).chunks()

    def _first_batch_hook(self) -> Callable[[Any], Any]:
        def hook(item: tuple[Any, Any, Any]) -> Any:
            batch = item[1]
            try:
                self._samples_per_batch = leading_dim(batch)
            except Exception:
                pass
            return batch

        return hook

    def _finish(self, rec: EpochRecord, status: str, src: Any) -> None:
        """Close an epoch: account queued GPU work, stop samplers and workers, save."""
        clock = self._clock
        rec.end_ns = clock()
        if cuda_in_use():
            cuda_synchronize()
            rec.sync_ns = clock() - rec.end_ns
        if status != "complete":
            if self.mode == "log" and len(rec.starts) == len(rec.ready) + 1:
                status = "source-error"  # next() itself raised
            elif self.mode == "replay" and len(rec.starts) == (rec.expected or 0) + 1:
                status = "complete"  # every batch served: the closing stamp was taken
        rec.status = status
        if self._open is not None and self._open[0] is rec:
            self._open = None
        if self._sampler is not None:
            self._sampler.stop()
        # A loader left mid-epoch (break, error, max_steps) still has workers: stop them.
        # An exhausted DataLoader iterator has already stopped its own.
        left_early = status != "complete" or self.max_steps is not None
        if (
            src is not None
            and left_early
            and not getattr(self.dataloader, "persistent_workers", False)
        ):
            shutdown_source(src)
        if self.mode == "replay":
            self._check_mutation()
        if self.metrics_file:
            try:
                self.save_metrics(self.metrics_file, quiet=True)
            except Exception as e:  # never lose the run over a bad path; say so
                log.warning("loadeval_nb: could not write %s (%s).", self.metrics_file, e)
        for fn in list(self._listeners):
            fn(rec)

    def _close_open(self, status: str) -> None:
        if self._open is not None:
            guard = self._open[1]()
            if guard is not None:
                guard.close(status)
            self._open = None

    def close(self) -> None:
        """End any epoch still open (e.g. after ``break``) and stop the samplers."""
        self._close_open("stopped")
        if self._sampler is not None:
            self._sampler.stop()
        if self._worker_timer is not None:
            self._worker_timer.close()

    def worker_load_ns(self) -> Optional[list[int]]:
        """Per-batch production times measured inside the DataLoader's worker processes
        (``worker_timing=True``, ``num_workers > 0``), in order of completion; else None."""
        t = self._worker_timer
        if t is None or not t.available:
            return None
        return t.load_ns()

    # -- live reading (for dashboards; never stops or changes anything) ------------
    def steps_since(self, cursor: tuple[int, int] = (0, 0)) -> tuple[list[int], tuple[int, int]]:
        """Step times (ns) of the steps completed since ``cursor`` (epoch, step), and the
        new cursor. Safe to call from another thread while the loop runs."""
        e, i = cursor
        out: list[int] = []
        epochs = self._epochs
        while e < len(epochs):
            rec = epochs[e]
            if rec.open:
                starts = rec.starts
                n = len(starts) - 1  # a step's end is the next step's start
                out.extend(starts[k + 1] - starts[k] for k in range(i, n))
                return out, (e, max(i, n))
            out.extend(epoch_steps(rec, measure_wait=self.mode == "log").step_ns[i:])
            e, i = e + 1, 0
        return out, (e, i)

    @property
    def util_sampler(self) -> Optional[UtilSampler]:
        """The utilisation sampler (None when sampling is off). (``ev.sampler`` is the
        wrapped DataLoader's sampler, passed through.)"""
        return self._sampler

    @property
    def started_ns(self) -> Optional[int]:
        """Clock value when the first epoch began (None before)."""
        return self._t0

    # -- results ------------------------------------------------------------------
    @property
    def total_steps(self) -> int:
        return sum(
            len(epoch_steps(r, measure_wait=self.mode == "log").step_ns) for r in self._epochs
        )

    def to_run(self) -> Run:
        """A :class:`Run` with everything measured so far.

        Safe to call inside the training loop: an epoch still running is read as a
        snapshot (its step in progress flagged incomplete) and keeps running.
        """
        now = self._clock()
        start: list[int] = []
        wait: Optional[list[int]] = [] if self.mode == "log" else None
        step: list[int] = []
        epoch: list[int] = []
        complete: list[bool] = []
        epochs = []
        t0 = self._t0 or 0
        for e, rec in enumerate(self._epochs):
            s = epoch_steps(rec, measure_wait=self.mode == "log", now=now)
            start += [x - t0 for x in s.start_ns]
            step += s.step_ns
            if wait is not None and s.wait_ns is not None:
                wait += s.wait_ns
            epoch += [e] * len(s.step_ns)
            complete += s.complete
            epochs.append(
                {
                    "status": rec.status,
                    "steps": len(s.step_ns),
                    "setup_ns": rec.setup_ns,
                    "sync_ns": rec.sync_ns,
                    **({"auto_stop": rec.auto_reason} if self.auto_stop is not None else {}),
                }
            )
        samples = self._samples(epoch)
        statuses = [e["status"] for e in epochs]
        status = next(
            (s for s in ("running", "source-error", "stopped") if s in statuses), "complete"
        )
        if not epochs:
            status = "not-started"
        return Run(
            mode=self.mode,
            start_ns=start,
            step_ns=step,
            wait_ns=wait,
            samples=samples,
            epoch=epoch,
            complete=complete,
            warmup_steps=self.warmup_steps,
            label=self.label or ("real" if self.mode == "log" else "ideal"),
            status=status,
            environment=environment(),
            loader=dict(self._loader_info),
            settings={
                "num_cached_batches": self.num_cached_batches,
                "batches_cached": len(self.cached_batches),
                "max_steps": self.max_steps,
                "auto_stop": self.auto_stop.to_dict() if self.auto_stop is not None else None,
                "cache_on": self.cache_on if self.mode == "replay" else None,
                "cache_bytes": self.cache_bytes,
                "cache_budget_bytes": self.cache_budget_bytes,
            },
            epochs=epochs,
            util=self._sampler.series(t0) if self._sampler is not None else None,
            worker_load_ns=self.worker_load_ns(),
        )

    def _samples(self, epoch: list[int]) -> list[Optional[int]]:
        """Samples per step: the first batch's leading dimension (else ``batch_size``), with
        the short last batch of a full DataLoader epoch (``len(dataset) % batch_size``)."""
        per = self._samples_per_batch
        if per is None:
            bs = self._loader_info.get("batch_size")
            per = bs if isinstance(bs, int) else None
        out: list[Optional[int]] = [per] * len(epoch)
        info = self._loader_info
        bs, n_ds, n_len = info.get("batch_size"), info.get("dataset_len"), info.get("len")
        if (
            self.mode == "log"
            and isinstance(bs, int)
            and isinstance(n_ds, int)
            and isinstance(n_len, int)
            and not info.get("drop_last")
            and n_ds % bs
        ):
            # the last step of every epoch that ran to the loader's end is short
            for i in range(len(epoch)):
                last_of_epoch = i + 1 == len(epoch) or epoch[i + 1] != epoch[i]
                steps_in_epoch = epoch.count(epoch[i]) if last_of_epoch else 0
                if last_of_epoch and steps_in_epoch == n_len:
                    out[i] = n_ds % bs
        return out

    def get_metrics(self) -> dict[str, Any]:
        """DALI-compatible metrics dict (seconds), plus step statistics; ``{}`` before any batch.

        ``batch_times`` (as in DALI) is the time spent inside ``next()`` per batch;
        in replay mode it is not measured (zeros): a cache lookup costs nanoseconds.
        ``step_times`` is the whole step, ``next()`` to ``next()``.
        """
        run = self.to_run()
        if run.n_steps == 0:
            return {}
        waits = [w / 1e9 for w in run.wait_ns] if run.wait_ns is not None else [0.0] * run.n_steps
        summ = run.summary()
        st = summ["step"]
        return {
            "mode": self.mode,
            "total_batches": run.n_steps,
            "total_time": summ["total_s"],
            "avg_batch_time": sum(waits) / len(waits),
            "min_batch_time": min(waits),
            "max_batch_time": max(waits),
            "batch_times": waits,
            "cached_batches": len(self.cached_batches),
            "cache_ready": self.cache_ready,
            "step_times": [s / 1e9 for s in run.step_ns],
            "steady_steps": summ["steady_steps"],
            "warmup_steps": self.warmup_steps,
            "avg_step_time": st["mean_s"],
            "median_step_time": st["median_s"],
            "p90_step_time": st["p90_s"],
            "samples_per_s": st["samples_per_s"],
            "wait_share": summ["wait_share"],
            "status": run.status,
        }

    def save_metrics(self, filename: Optional[str] = None, *, quiet: bool = False) -> Optional[str]:
        """Write the run log (JSON, see :mod:`loadeval_nb.core._run`) to ``filename``
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
            if self.mode == "log":
                lines += [
                    f"  Average batch time: {m['avg_batch_time']:.4f}s (waiting in next())",
                    f"  Min batch time: {m['min_batch_time']:.4f}s",
                    f"  Max batch time: {m['max_batch_time']:.4f}s",
                ]
            lines += [
                f"  Steady steps: {m['steady_steps']} (after {self.warmup_steps} warm-up per epoch)",
                f"  Mean step time: {fmt_seconds(m['avg_step_time'])}"
                f" (median {fmt_seconds(m['median_step_time'])}, p90 {fmt_seconds(m['p90_step_time'])})",
            ]
            if m["samples_per_s"] is not None:
                lines.append(f"  Throughput: {m['samples_per_s']:.1f} samples/s")
            if m["wait_share"] is not None:
                lines.append(f"  Time waiting for data: {m['wait_share']:.1%}")
            if m["status"] != "complete":
                lines.append(f"  Status: {m['status']}")
        print("\n".join(lines), file=file)

    def add_listener(self, fn: Callable[[EpochRecord], None]) -> None:
        """Call ``fn(record)`` whenever an epoch ends (used by the notebook front end)."""
        self._listeners.append(fn)
