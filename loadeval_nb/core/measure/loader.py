"""Rebuilding a DataLoader with other loading settings, leaving the original untouched."""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

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


_OPENERS: dict[int, Callable[[Any], Iterator[Any]]] = {}
"""``id(loader)`` -> how a pass of it starts, where a front end set one (:func:`opened_by`)."""


def open_pass(loader: Any) -> Iterator[Any]:
    """A new pass of ``loader``, as every mode that iterates the user's loader starts one:
    ``iter(loader)``, or the way a front end set for it with :func:`opened_by`."""
    opener = _OPENERS.get(id(loader))
    return iter(loader) if opener is None else opener(loader)


def opened_by(loader: Any, opener: Callable[[Any], Iterator[Any]] | None) -> None:
    """Have the tool start ``loader``'s passes with ``opener(loader)`` (None: with
    ``iter()`` again). The script runner's child sets the ``__iter__`` its patch reached:
    where the script's loader is a subclass whose own ``__iter__`` wraps DataLoader's
    (``for b in super().__iter__(): yield f(b)``), the script's loop runs that wrapper
    around the pass the tool hands it, so the tool draws DataLoader's own batches and the
    wrapper runs once per batch, as without the tool."""
    if opener is None:
        _OPENERS.pop(id(loader), None)
    else:
        _OPENERS[id(loader)] = opener


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
    """A new ``DataLoader`` like ``loader`` (same dataset, collate_fn, batch size,
    worker_init_fn, ...; its own copies of the sampler, batch sampler and generator, in
    their state now: :func:`own_copy`) with ``changes`` applied to ``num_workers``,
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
        prefetch_factor=pf if nw > 0 else None,
        persistent_workers=bool(changes.get("persistent_workers", loader.persistent_workers))
        and nw > 0,
        pin_memory_device=getattr(loader, "pin_memory_device", ""),
    )
    if hasattr(loader, "in_order"):
        kwargs["in_order"] = loader.in_order
    memo: dict[int, Any] = {id(loader.dataset): loader.dataset}
    kwargs["generator"] = own_copy(loader.generator, memo, global_rng=True)
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        kwargs.update(batch_sampler=own_copy(loader.batch_sampler, memo))
    else:  # automatic batching off (batch_size=None)
        kwargs.update(batch_size=None, sampler=own_copy(loader.sampler, memo))
    try:
        return DataLoader(loader.dataset if dataset is None else dataset, **kwargs)
    except (ValueError, TypeError) as e:
        settings = ", ".join(f"{k}={v!r}" for k, v in changes.items()) or "its own settings"
        raise LoadEvalError(
            f"PyTorch refused a DataLoader with {settings} ({e}); choose other values."
        ) from None


def own_copy(obj: Any, memo: dict[int, Any], global_rng: bool = False) -> Any:
    """A copy of a sampler, batch sampler or generator of the user's loader, for a loader
    the tool rebuilds (a variant, a sweep's point): its draws are its own, so the user's
    sampler state and random streams are left as they were (the script's next epoch
    shuffles as without the tool). ``memo`` is shared by one loader's copies (its dataset
    in it stays shared; a generator the loader and its sampler share stays shared in the
    copy, so the copy shuffles as the user's loader would from here). A sampler that would
    draw from torch's global generator gets a copy of it (:func:`_sampler_generator`);
    ``global_rng``: ``obj`` is the loader's ``generator``, and None means torch's global
    one (copied likewise). What cannot be copied is shared."""
    torch = sys.modules.get("torch")
    if obj is None:
        return _global_copy(torch) if global_rng else None
    try:
        out = copy.deepcopy(obj, memo)
    except Exception:
        try:
            out = copy.copy(obj)
        except Exception:
            return obj
    for owner in (out, getattr(out, "sampler", None)):  # (a BatchSampler's own sampler)
        if owner is not None and getattr(owner, "generator", 0) is None and _draws_globally(owner):
            with contextlib.suppress(Exception):
                owner.generator = _sampler_generator(torch, owner)
    return out


def _global_copy(torch: Any, skip: int = 0) -> Any:
    """A generator in the state torch's global one is in now, ``skip`` draws on."""
    if torch is None:
        return None
    g = torch.Generator()
    g.set_state(torch.get_rng_state())
    for _ in range(skip):
        torch.empty((), dtype=torch.int64).random_(generator=g)
    return g


def _sampler_generator(torch: Any, sampler: Any) -> Any:
    """The generator a copy of a sampler that draws from torch's global generator takes:
    the draws the user's would make from it at its next pass (after the DataLoader's own
    draw of its workers' base seed), so a copy rebuilt just before the user's pass
    starts shuffles as it does (a RandomSampler draws a seed, the others draw directly)."""
    from torch.utils.data import RandomSampler

    g = _global_copy(torch, skip=1)
    if isinstance(sampler, RandomSampler):
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=g).item())
        g = torch.Generator()
        g.manual_seed(seed)
    return g


def _draws_globally(sampler: Any) -> bool:
    """A torch sampler that draws its seed from the global generator when it has none."""
    from torch.utils.data import RandomSampler, SubsetRandomSampler, WeightedRandomSampler

    return isinstance(sampler, (RandomSampler, SubsetRandomSampler, WeightedRandomSampler))


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
