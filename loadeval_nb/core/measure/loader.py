"""Rebuilding a DataLoader with other loading settings, leaving the original untouched."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._env import cpu_count, is_dataloader
from .._errors import a_kind, check_int
from ..errors import LoadEvalError, OptionError

TUNABLE = ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")
"""The settings :func:`rebuild_loader` may change; everything else is carried over."""


WORKERS_PER_CPU = 4
"""The most worker processes (or threads) loadeval_nb starts per CPU: more only queue for
the same cores, and each worker is a process holding memory."""


def max_workers() -> int:
    """The most ``num_workers`` loadeval_nb starts: :data:`WORKERS_PER_CPU` per CPU this
    process may use."""
    return WORKERS_PER_CPU * cpu_count()


def check_workers(n: Any, name: str = "num_workers") -> int:
    """``n`` if it is a worker count this machine can take, else one sentence."""
    check_int(name, n, 0)
    limit = max_workers()
    if n > limit:
        raise OptionError(
            name,
            f"={n} is more worker processes than this machine can run usefully "
            f"({WORKERS_PER_CPU} per CPU: at most {limit}); try a number up to {limit}.",
        )
    return int(n)


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


def loader_knobs(loader: Any) -> dict[str, Any]:
    """The current values of the tunable settings (None where the loader has none)."""
    return {k: getattr(loader, k, None) for k in TUNABLE}


def shutdown_persistent_workers(loader: Any) -> None:
    """Stop the workers a DataLoader with ``persistent_workers=True`` keeps between epochs
    (one we built for a sweep point or a ladder rung is not iterated again)."""
    it = getattr(loader, "_iterator", None)
    if it is not None:
        shutdown_source(it)
        loader._iterator = None  # the next iter() starts workers again


def rebuild_loader(loader: Any, *, dataset: Any = None, **changes: Any) -> Any:
    """A new ``DataLoader`` like ``loader`` (same dataset, sampler, batch sampler, collate_fn,
    batch size, worker_init_fn, generator, ...) with ``changes`` applied to ``num_workers``,
    ``pin_memory``, ``prefetch_factor`` or ``persistent_workers``.

    ``prefetch_factor`` and ``persistent_workers`` are dropped when ``num_workers`` is 0
    (PyTorch refuses them there). The original loader is not modified.

    ``dataset`` replaces the dataset (the caching ladder serves cached samples through
    the same sampler, batching, workers and collation); it must accept the same indices.
    """
    unknown = sorted(set(changes) - set(TUNABLE))
    if unknown:
        raise LoadEvalError(
            f"Cannot change {', '.join(unknown)}; only {', '.join(TUNABLE)} can be changed."
        )
    if not is_dataloader(loader):
        raise LoadEvalError(
            f"Only a torch.utils.data.DataLoader can be rebuilt with other settings, not {a_kind(loader)}."
        )
    if type(loader).__module__.split(".")[0] == "accelerate":
        # a rebuilt plain DataLoader would lose accelerate's device placement and sharding
        raise LoadEvalError(
            f"A {type(loader).__name__} from accelerator.prepare() cannot be rebuilt with other "
            "settings; change the DataLoader you prepare (num_workers=..., pin_memory=...)."
        )
    from torch.utils.data import DataLoader, IterableDataset

    nw = changes.get("num_workers", loader.num_workers)
    if "num_workers" in changes:
        check_workers(nw)
    else:
        check_int("num_workers", nw, 0)
    pf = changes.get("prefetch_factor", loader.prefetch_factor)
    if nw > 0 and pf is None:
        pf = 2
    if nw > 0:
        check_int("prefetch_factor", pf, 1)
    kwargs: dict[str, Any] = dict(
        num_workers=nw,
        collate_fn=loader.collate_fn,
        pin_memory=bool(changes.get("pin_memory", loader.pin_memory)),
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        # PyTorch refuses a multiprocessing context without workers
        multiprocessing_context=loader.multiprocessing_context if nw > 0 else None,
        generator=loader.generator,
        prefetch_factor=pf if nw > 0 else None,
        persistent_workers=bool(changes.get("persistent_workers", loader.persistent_workers))
        and nw > 0,
        pin_memory_device=getattr(loader, "pin_memory_device", ""),
    )
    if hasattr(loader, "in_order"):
        kwargs["in_order"] = loader.in_order
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        kwargs.update(batch_sampler=loader.batch_sampler)
    else:  # automatic batching off (batch_size=None)
        kwargs.update(batch_size=None, sampler=loader.sampler)
    try:
        return DataLoader(loader.dataset if dataset is None else dataset, **kwargs)
    except (ValueError, TypeError) as e:
        settings = ", ".join(f"{k}={v!r}" for k, v in changes.items()) or "its own settings"
        raise LoadEvalError(
            f"PyTorch refused a DataLoader with {settings} ({e}); choose other values."
        ) from None


@contextmanager
def rng_kept(loader: Any) -> Iterator[None]:
    """Run the block and put back the random state it used up: torch's global generator
    and the loader's own (``generator=``, its sampler's), so reading a copy of the user's
    loader (a split, a rung's samples) does not change the batches their next epoch draws."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    state = torch.get_rng_state()
    gens = {}
    for owner in (loader, getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)):
        g = getattr(owner, "generator", None)
        if g is not None and hasattr(g, "get_state"):
            gens[id(g)] = (g, g.get_state())
        inner = getattr(owner, "sampler", None)  # a BatchSampler's sampler
        g = getattr(inner, "generator", None)
        if g is not None and hasattr(g, "get_state"):
            gens[id(g)] = (g, g.get_state())
    try:
        yield
    finally:
        torch.set_rng_state(state)
        for g, st in gens.values():
            g.set_state(st)


def end_prepared_epoch(loader: Any) -> None:
    """An accelerate-prepared loader tells its ``GradientState`` it is iterating from
    ``iter()`` until it runs out; one left early (a run's steps reached, a cache filled)
    never says it ended, and ``gradient_state.in_dataloader`` would stay True: say it."""
    state = getattr(loader, "gradient_state", None)
    end = getattr(loader, "end", None)
    if state is not None and callable(end) and getattr(state, "in_dataloader", False):
        try:
            end()
        except Exception:  # pragma: no cover - an accelerate that changed its mind
            pass
