"""The ladder's sample rung: the real DataLoader over samples produced ahead of time.

The loader's sampler, batching, workers and collation still run; the per-sample
loading and transforms do not (they ran once, before the rung).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .._env import safe_len
from .._format import fmt_bytes
from ..errors import LoadEvalError
from ..measure.batches import batch_nbytes
from ..measure.cache import host_budget
from ..measure.loader import rebuild_loader, rng_kept

MAX_CACHED_SAMPLES = 4096


class CachedSamples:
    """A map-style dataset that serves ``samples[i % len(samples)]`` for any index below
    ``length``: the loader's sampler, batching, workers and collation still run, the
    per-sample loading and transforms do not."""

    def __init__(self, samples: list[Any], length: int, base: Any = None) -> None:
        if not samples:
            raise LoadEvalError("CachedSamples needs at least one sample.")
        self.samples = samples
        self.length = length
        self.base = base

    def __getattr__(self, name: str) -> Any:
        # a worker_init_fn that reaches into its dataset (get_worker_info().dataset.open())
        # still finds the original's attributes
        if name.startswith("__") or "base" not in self.__dict__ or self.base is None:
            raise AttributeError(name)
        return getattr(self.base, name)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Any:
        return self.samples[int(i) % len(self.samples)]


def sample_rung_loader(
    loader: Any,
    n_batches: int,
    progress: Callable[[str], None] = lambda text: None,
    budget: Optional[tuple[int, str]] = None,
) -> tuple[Optional[Any], Optional[str], int]:
    """(loader over cached samples, or None and why; nanoseconds spent producing them).

    At most ``n_batches`` batches' worth of samples (and ``MAX_CACHED_SAMPLES``), fewer
    when they would not fit ``budget`` (bytes, and where it comes from; default: half
    the host memory available now); ``progress`` hears how far it got about once a second."""
    try:
        from torch.utils.data import DataLoader, IterableDataset
    except ImportError:  # pragma: no cover
        return None, "torch is not importable", 0
    if not isinstance(loader, DataLoader):
        return (
            None,
            f"a {type(loader).__name__} is not a DataLoader, so it cannot be rebuilt over cached samples",
            0,
        )
    ds = loader.dataset
    if isinstance(ds, IterableDataset):
        return (
            None,
            "an IterableDataset has no per-item access, so its samples cannot be served from a "
            "cache; the sample rung is skipped (the host rung to the real rung then holds "
            "workers, collation, loading and transforms together)",
            0,
        )
    n = safe_len(ds)
    if not n:
        return None, "the dataset has no len() or is empty", 0
    per_batch = loader.batch_size or 1
    k = max(1, min(n, per_batch * n_batches, MAX_CACHED_SAMPLES))
    limit, where = budget or host_budget()
    t = time.perf_counter()
    shown = t
    samples: list[Any] = []
    kept = rng_kept(loader)  # the user's random state is put back once the samples are made
    kept.__enter__()
    try:
        while len(samples) < k:
            samples.append(ds[len(samples)])
            if len(samples) == 1:
                per = batch_nbytes(samples[0])
                fits = limit // per if per else k
                if fits < min(k, per_batch):
                    return (
                        None,
                        f"one batch of samples ({fmt_bytes(per * min(k, per_batch))}) would not "
                        f"fit the cache budget ({where})",
                        0,
                    )
                k = min(k, max(fits, 1))
            now = time.perf_counter()
            if now - shown >= 1.0:
                shown = now
                progress(f"ladder: making samples for the sample rung, {len(samples)} of {k}")
    except Exception as e:  # e.g. a file handle the worker_init_fn opens, absent here
        return (
            None,
            f"its samples could not be made in the main process ({type(e).__name__}: {e}), "
            "where the worker_init_fn does not run",
            0,
        )
    finally:
        kept.__exit__(None, None, None)
    spent = time.perf_counter() - t
    try:
        rebuilt = rebuild_loader(loader, dataset=CachedSamples(samples, n, base=ds))
    except LoadEvalError as e:
        return None, str(e).rstrip("."), 0
    return rebuilt, None, int(spent * 1e9)
