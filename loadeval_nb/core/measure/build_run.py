"""An evaluator's epoch stamps into a :class:`~loadeval_nb.core.record.run.Run`: the run's
settings (one dict for every mode and side), the run itself, and its file kept up to
date as epochs end (:class:`LogWriter`, one per run log)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

from ..record.journal import MetricsWriter
from ..record.run import Run
from .adaptive import AutoStop
from .resource import worker_resource
from .timing import EpochRecord, epoch_steps

log = logging.getLogger("loadeval_nb")


def run_settings(
    *,
    num_cached_batches: int,
    steps: Optional[int],
    auto_stop: Optional[AutoStop],
    cache_budget_bytes: Optional[int],
    cache: Any,
    cache_on: str,
    batches_cached: int,
    **more: Any,
) -> dict[str, Any]:
    """A run log's ``settings``: the same keys for a real run, an ideal run and each side
    of an interleaved pair; ``cache`` is the replay cache this run served (its ``nbytes``
    and ``shapes_differ``; None: a real run's), ``more`` what a mode adds (a pair's ``interleaved`` plan)."""
    return {
        "num_cached_batches": num_cached_batches,
        "batches_cached": batches_cached,
        "steps": steps,  # the run log's key (schema 3; max_steps before)
        "auto_stop": auto_stop.to_dict() if auto_stop is not None else None,
        "cache_on": cache_on if cache is not None else None,
        "cache_bytes": cache.nbytes if cache is not None else None,
        "cache_budget_bytes": cache_budget_bytes,
        "cached_shapes_differ": cache.shapes_differ if cache is not None else None,
        **more,
    }


class LogWriter:
    """One run log kept up to date: its journal appended at every epoch's end (epochs that
    end on two threads write one after the other), the whole document at the end. A
    failure to write is said once (a warning) and never loses the run: it stays in memory."""

    def __init__(self, path: str, eager: bool = False) -> None:
        self.path = path
        self.writer: Optional[MetricsWriter] = MetricsWriter(path) if eager else None
        """Made at the first write (``eager``: now, so that a path another live writer
        holds is refused at construction)."""
        self._lock = threading.Lock()
        self._errors: set[str] = set()

    def epoch_ended(self, build: Callable[[int, int], Run]) -> None:
        """Append the epochs ended since the last write (``build(first_epoch, first_tick)``
        makes the run of those)."""
        self._write(lambda w: w.epoch_ended(build))

    def write_all(self, run: Run) -> None:
        """The journal folded into one document (when a writer was made)."""
        if self.writer is not None:
            self._write(lambda w: w.write_all(run))

    def _write(self, do: Callable[[MetricsWriter], Any]) -> None:
        with self._lock:
            try:
                if self.writer is None:
                    self.writer = MetricsWriter(self.path)
                do(self.writer)
            except Exception as e:  # never lose the run over a bad path; say so, once
                why = (
                    f"[Errno {e.errno}] {e.strerror}"
                    if isinstance(e, OSError) and e.errno and e.strerror
                    else str(e)
                )
                said = f"{type(e).__name__}: {why}"
                writer = self.writer
                if isinstance(e, OSError) and writer is not None:
                    if getattr(writer, "_append_failed", False):
                        return  # the journal said it already: one sentence for one full disk
                    writer._append_failed = True
                if said not in self._errors:
                    self._errors.add(said)
                    log.warning(
                        "loadeval_nb: could not write %s (%s); the run goes on and is kept in "
                        "memory (to_run(), save_metrics() elsewhere).",
                        self.path,
                        why,
                    )


def build_run(
    epochs: Sequence[EpochRecord],
    *,
    mode: str,
    measure_wait: bool,
    t0_ns: int,
    now_ns: int,
    warmup: int,
    label: str,
    loader: dict[str, Any],
    settings: dict[str, Any],
    environment: dict[str, Any],
    samples_per_batch: Optional[int],
    short_last_batch: bool,
    auto_stop: bool,
    util: Optional[dict[str, Any]] = None,
    worker_load_ns: Optional[list[int]] = None,
    first_epoch: int = 0,
) -> Run:
    """A :class:`Run` from an evaluator's epoch stamps (an epoch still running is read as a
    snapshot at ``now_ns``). Step starts are made relative to ``t0_ns``; ``epochs`` are
    numbered from ``first_epoch`` (a part of a run, for the metrics journal)."""
    start: list[int] = []
    wait: Optional[list[int]] = [] if measure_wait else None
    step: list[int] = []
    epoch: list[int] = []
    complete: list[bool] = []
    h2d: list[Optional[int]] = []
    summaries = []
    for e, rec in enumerate(epochs, start=first_epoch):
        s = epoch_steps(rec, measure_wait=measure_wait, now=now_ns)
        start += [x - t0_ns for x in s.start_ns]
        step += s.step_ns
        if wait is not None and s.wait_ns is not None:
            wait += s.wait_ns
        epoch += [e] * len(s.step_ns)
        complete += s.complete
        copies = rec.copies or []
        h2d += [copies[k] if k < len(copies) else None for k in range(len(s.step_ns))]
        summaries.append(
            {
                "status": rec.status,
                "steps": len(s.step_ns),
                "setup_ns": rec.setup_ns,
                "startup_ns": (rec.setup_ns or 0) + (s.wait_ns[0] if s.wait_ns else 0)
                if s.step_ns
                else None,
                "sync_ns": rec.sync_ns,
                **({"auto_stop": rec.auto_reason} if auto_stop else {}),
                **({"warmup": rec.warmup} if rec.warmup is not None else {}),
            }
        )
    statuses = [e["status"] for e in summaries]
    status = next((s for s in ("running", "source-error", "stopped") if s in statuses), "complete")
    if not summaries:
        status = "not-started"
    resource = worker_resource(
        util,
        num_workers=loader.get("num_workers"),
        worker_load_ns=worker_load_ns,
        wait_ns=wait,
        step_ns=step,
    )
    return Run(
        mode=mode,
        start_ns=start,
        step_ns=step,
        wait_ns=wait,
        samples=_samples(epoch, loader, samples_per_batch, short_last_batch),
        block=epoch,
        complete=complete,
        warmup=warmup,
        label=label,
        status=status,
        environment=environment,
        loader_settings=dict(loader),
        settings=settings,
        blocks=summaries,
        util=util,
        worker_load_ns=worker_load_ns,
        h2d_ns=h2d if any(x is not None for x in h2d) else None,
        worker_resource=resource.to_dict() if resource is not None else None,
    )


def _samples(
    epoch: list[int], info: dict[str, Any], per: Optional[int], short_last_batch: bool
) -> list[Optional[int]]:
    """Samples per step: the first batch's leading dimension (else ``batch_size``), with
    the short last batch of a full DataLoader epoch (``len(dataset) % batch_size``)."""
    bs, n_ds, n_len = info.get("batch_size"), info.get("dataset_len"), info.get("len")
    if per is None:
        per = bs if isinstance(bs, int) else None
    out: list[Optional[int]] = [per] * len(epoch)
    if (
        short_last_batch
        and isinstance(bs, int)
        and isinstance(n_ds, int)
        and isinstance(n_len, int)
        and not info.get("drop_last")
        and n_ds % bs
    ):
        # the last step of every epoch that ran to the loader's end is short
        counts: dict[int, int] = {}
        for e in epoch:
            counts[e] = counts.get(e, 0) + 1
        for i in range(len(epoch)):
            last_of_epoch = i + 1 == len(epoch) or epoch[i + 1] != epoch[i]
            if last_of_epoch and counts[epoch[i]] == n_len:
                out[i] = n_ds % bs
    return out
