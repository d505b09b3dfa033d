"""The methods and metric keys NVIDIA DALI's ``LoaderEvaluator`` has, in one place.

``LoaderEvaluator`` inherits :class:`DaliMethods`; the run log carries
:func:`dali_metrics`' keys at the top level, so DALI users' code reads our files.
All times here are seconds, as in DALI.
"""

from __future__ import annotations

from typing import Any, Optional

from .._env import safe_len
from .._format import fmt_bytes, fmt_seconds
from ..record.run import Run, dali_metrics


class DaliMethods:
    """``get_metrics``, ``save_metrics`` and ``print_summary`` as DALI has them, plus our
    step statistics. The class using it provides ``to_run()`` and the DALI attributes."""

    dataloader: Any
    mode: str
    num_cached_batches: int
    metrics_file: Optional[str]
    warmup_steps: int
    cache_on: str

    # provided by the evaluator
    @property
    def cached_batches(self) -> list[Any]:  # pragma: no cover
        raise NotImplementedError

    @property
    def cache_ready(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    @property
    def cache_bytes(self) -> Optional[int]:  # pragma: no cover
        raise NotImplementedError

    def to_run(self) -> Run:  # pragma: no cover
        raise NotImplementedError

    def get_metrics(self) -> dict[str, Any]:
        """DALI-compatible metrics dict (seconds), plus step statistics; ``{}`` before any batch.

        ``batch_times`` (as in DALI) is the time spent inside ``next()`` per batch;
        in replay mode it is not measured (zeros): a cache lookup costs nanoseconds.
        ``step_times`` is the whole step, ``next()`` to ``next()``.
        """
        run = self.to_run()
        if run.n_steps == 0:
            return {}
        summ = run.summary()
        st = summ["step"]
        return {
            **dali_metrics(run),
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
                f"warm-up {max(self.warmup_steps, 1)} per epoch)",
                f"  Mean step time: {fmt_seconds(m['avg_step_time'])}"
                f" (median {fmt_seconds(m['median_step_time'])}, p90 {fmt_seconds(m['p90_step_time'])})",
            ]
            if m["samples_per_s"] is not None:
                lines.append(f"  Throughput: {m['samples_per_s']:.1f} samples/s")
            lines.append(f"  CPU: {self.to_run().cpu_text()}")
            if m["wait_share"] is not None:
                lines.append(f"  Time waiting for data: {m['wait_share']:.1%}")
            if m["status"] != "complete":
                lines.append(f"  Status: {m['status']}")
        print("\n".join(lines), file=file)
