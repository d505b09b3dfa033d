"""Finding a dataset's transforms and timing each one where it runs.

:func:`find_transforms` locates the callables to time: by default the pipeline a
dataset keeps in ``transform``, ``transforms`` or ``target_transform`` (on the
dataset or on the datasets it wraps through ``.dataset`` / ``.datasets``), opening
every container that keeps its steps in a list ``.transforms`` (torchvision's
``Compose``, v1 and v2, ``RandomApply``, ``RandomChoice``, ...) and torchvision's
``StandardTransform``; or the callables a user names (objects found in those
places or in any attribute of the datasets, bound methods, module-level functions).

:func:`timed_transforms` swaps each of them, where it sits, for a :class:`Timed`
wrapper and puts every original back in a ``finally`` (an attribute that was not
set on the instance before, like a bound method's, is deleted again). A container's
list is replaced by a new list, never edited, so the user's list object is untouched.

Each timed call adds its *exclusive* time (its own, minus the timed calls made
inside it) to a :class:`Table` in shared memory: one row per process (each worker
writes only its own row, so no lock and no waiting; the main process has the last
row), one ``(calls, ns)`` pair per slot, and beside it the sum of each sample's squared
time (the spread an interval on a step's time needs). Slot 0 is the dataset's ``__getitem__``
(or ``__getitems__``, or the iterator's ``next()``): its exclusive time is the rest
of the per-sample work (reading and decoding, typically); slot 1 is ``collate_fn``.
The buffer comes from the loader's own multiprocessing context, as
:class:`~loadeval_nb.core.measure.WorkerFetchTimer`'s does, so fork, spawn and forkserver
all work; recording never raises into the user's loading.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..._errors import a_kind
from ...errors import LoadEvalError

TRANSFORM_ATTRS = ("transform", "transforms", "target_transform")
"""Where a dataset keeps its pipeline (torchvision's datasets and most user datasets)."""
ROOT, COLLATE = 0, 1
"""The table's first slots: the rest of the per-sample call, and ``collate_fn``."""
_MAX_DEPTH = 8
_MAX_STEPS = 256  # a list longer than this is data (file names), not a pipeline
_LOCAL = threading.local()  # per thread: the stack of timed calls in progress


def _get(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # a property or __getattr__ that raises
        return None


def _is_steps(v: Any) -> bool:
    """A list or tuple of callables (a pipeline's steps)."""
    return (
        type(v) in (list, tuple)
        and 0 < len(v) <= _MAX_STEPS
        and all(callable(t) and not isinstance(t, type) for t in v)
    )


def _opens(x: Any) -> bool:
    """A container whose steps we time one by one instead of timing it whole."""
    return _is_steps(_get(x, "transforms")) or type(x).__name__ == "StandardTransform"


def step_name(fn: Any) -> str:
    """A step's name for people: a class's name (``RandomResizedCrop``), a function's."""
    inner = _get(fn, "func")  # functools.partial
    if inner is not None and type(fn).__name__ == "partial":
        return step_name(inner)
    if type(fn).__name__ in ("function", "method", "builtin_function_or_method"):
        return str(_get(fn, "__name__") or type(fn).__name__)
    return type(fn).__name__


@dataclass
class Site:
    """Where one step sits: ``owner.attr``, or item ``index`` of that list."""

    owner: Any
    attr: str
    index: Optional[int]
    slot: int


@dataclass
class Pipeline:
    """The steps to time (slot 2 onwards, in order) and every place each one sits."""

    names: list[str] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    fns: list[Any] = field(default_factory=list)

    def add(self, owner: Any, attr: str, index: Optional[int], fn: Any) -> None:
        slot = next((i for i, f in enumerate(self.fns) if f is fn), None)
        if slot is None:  # the same object in two places is one step, timed in both
            self.fns.append(fn)
            slot = len(self.fns) - 1
        self.sites.append(Site(owner, attr, index, slot + 2))

    def finish(self) -> Pipeline:
        """Name the steps: the class name, with ``#1``, ``#2`` where two share it."""
        base = [step_name(f) for f in self.fns]
        seen: dict[str, int] = {}
        for b in base:
            seen[b] = seen.get(b, 0) + 1
        count: dict[str, int] = {}
        self.names = []
        for b in base:
            count[b] = count.get(b, 0) + 1
            self.names.append(f"{b} #{count[b]}" if seen[b] > 1 else b)
        return self


def _positions(owner: Any, attr: str, value: Any, depth: int, seen: set[int]) -> Iterator[Any]:
    """(owner, attr, index, step) for every step under ``owner.attr``, containers opened."""
    if depth > _MAX_DEPTH:
        return
    items = list(enumerate(value)) if _is_steps(value) else [(None, value)]
    for index, item in items:
        if item is None or not callable(item):
            continue
        if _opens(item):
            if id(item) in seen:
                continue
            seen.add(id(item))
            for a in ("transforms",) if _is_steps(_get(item, "transforms")) else TRANSFORM_ATTRS:
                yield from _positions(item, a, _get(item, a), depth + 1, seen)
        else:
            yield owner, attr, index, item


def datasets_of(dataset: Any) -> list[Any]:
    """The dataset and those it wraps (``.dataset``, ``.datasets``), outermost first."""
    out: list[Any] = []
    todo = [dataset]
    while todo and len(out) < 64:
        ds = todo.pop(0)
        if ds is None or any(ds is d for d in out):
            continue
        out.append(ds)
        todo.append(_get(ds, "dataset"))
        inner = _get(ds, "datasets")
        if type(inner) in (list, tuple):
            todo.extend(inner)
    return out


def find_transforms(dataset: Any, transforms: Any = "auto") -> Pipeline:
    """The steps to time in ``dataset``: its pipeline (``"auto"``; none found gives an empty
    Pipeline) or the callables named in ``transforms`` (a list, tuple or one Compose-like
    object). Raises :class:`LoadEvalError` for a name that is not callable or not found."""
    p = Pipeline()
    seen: set[int] = set()
    if isinstance(transforms, str) and transforms == "auto":
        for ds in datasets_of(dataset):
            for a in TRANSFORM_ATTRS:
                for owner, attr, index, fn in _positions(ds, a, _get(ds, a), 0, seen):
                    p.add(owner, attr, index, fn)
        return p.finish()
    named = [transforms] if _opens(transforms) or callable(transforms) else transforms
    if isinstance(named, (str, bytes)) or not isinstance(named, (list, tuple)) or not named:
        raise LoadEvalError(
            f"transforms must be 'auto' or a list of the callables the dataset calls, not "
            f"{transforms!r}."
        )
    for i, x in enumerate(named):
        if isinstance(x, type):
            raise LoadEvalError(
                f"transforms[{i}] is the class {x.__name__}; name the instance the dataset "
                "calls, not its class."
            )
        if not callable(x):
            raise LoadEvalError(
                f"transforms[{i}] is {a_kind(x)}, not a callable; name the transform objects or "
                "functions the dataset calls."
            )
        if _opens(x):  # a Compose: time its steps wherever it sits
            for owner, attr, index, fn in _positions(None, "", x, 0, seen):
                p.add(owner, attr, index, fn)
            continue
        sites = _sites_of(x, dataset)
        if not sites:
            raise LoadEvalError(
                f"transforms[{i}] ({step_name(x)}) is not reachable from the loader's dataset "
                "(its attributes, its pipelines, the datasets it wraps, a bound method, a "
                "module-level function), so its calls cannot be timed; name the objects the "
                "dataset calls."
            )
        for owner, attr, index in sites:
            p.add(owner, attr, index, x)
    return p.finish()


def _sites_of(x: Any, dataset: Any) -> list[tuple[Any, str, Optional[int]]]:
    """Every place a named callable sits: dataset attributes and the pipelines under
    them; else its instance's attribute (a bound method), else its module's global."""
    found = []
    seen: set[int] = set()
    for ds in datasets_of(dataset):
        for a, v in _attrs(ds):
            for owner, attr, index, fn in _positions(ds, a, v, 0, seen):
                if fn is x:
                    found.append((owner, attr, index))
    if found:
        return found
    self_, func = _get(x, "__self__"), _get(x, "__func__")
    if func is not None and hasattr(self_, "__dict__") and not isinstance(self_, type):
        # the name it is looked up by on its instance (an alias may differ from __name__)
        names = [k for k in dir(type(self_)) if _get(type(self_), k) is func]
        return [(self_, names[0] if names else func.__name__, None)]
    module = sys.modules.get(str(_get(x, "__module__")))
    name = _get(x, "__name__")
    if module is not None and isinstance(name, str) and _get(module, name) is x:
        return [(module, name, None)]
    return []


def _attrs(obj: Any) -> list[tuple[str, Any]]:
    d = _get(obj, "__dict__")
    return list(d.items()) if isinstance(d, dict) else []


def _worker_info() -> Any:
    from torch.utils.data import get_worker_info

    return get_worker_info()


class Table:
    """``(calls, ns)`` per process and per slot, in shared memory (see the module's notes)."""

    def __init__(
        self, buf: Any, rows: int, slots: int, clock: Callable[[], int], sq: Any = None
    ) -> None:
        self.buf, self.rows, self.slots, self.clock = buf, rows, slots, clock
        # per process and slot, the sum of each sample's squared time (ns², floats): the
        # spread behind an interval on a step's time when two splits are compared
        self.sq = sq

    @classmethod
    def for_loader(
        cls, loader: Any, slots: int, clock: Callable[[], int] = time.perf_counter_ns
    ) -> Table:
        import torch.multiprocessing as torch_mp

        ctx = loader.multiprocessing_context or torch_mp
        rows = int(loader.num_workers) + 1
        sq = ctx.RawArray("d", rows * slots)
        return cls(ctx.RawArray("q", rows * slots * 2), rows, slots, clock, sq)

    def call(self, slot: int, fn: Callable, args: tuple, kwargs: dict, n: int = 1) -> Any:
        """``fn(*args, **kwargs)``, its exclusive time added to ``slot`` (``n`` samples)."""
        stack = _LOCAL.__dict__.setdefault("stack", [])
        inner = [0]
        stack.append(inner)
        t0 = self.clock()
        try:
            out = fn(*args, **kwargs)
        finally:
            spent = self.clock() - t0
            stack.pop()
            if stack:  # the caller's own time excludes ours
                stack[-1][0] += spent
        self.add(slot, n, spent - inner[0])
        return out

    def add(self, slot: int, calls: int, ns: int) -> None:
        """Add to this process's row; never raises (timing must not break loading)."""
        try:
            info = _worker_info()
            row = self.rows - 1 if info is None else min(int(info.id), self.rows - 1)
            j = (row * self.slots + slot) * 2
            self.buf[j] += calls
            self.buf[j + 1] += ns
            if self.sq is not None and calls > 0:  # a batch call: its samples alike
                self.sq[row * self.slots + slot] += float(ns) * ns / calls
        except Exception:
            pass

    def totals(self) -> list[tuple[int, int]]:
        """``(calls, ns)`` per slot, summed over the processes."""
        out = []
        for s in range(self.slots):
            cells = [(r * self.slots + s) * 2 for r in range(self.rows)]
            out.append((sum(self.buf[j] for j in cells), sum(self.buf[j + 1] for j in cells)))
        return out

    def squares(self) -> Optional[list[float]]:
        """The sum of each sample's squared time per slot (ns²), summed over the processes;
        None when not kept."""
        if self.sq is None:
            return None
        return [
            sum(self.sq[r * self.slots + s] for r in range(self.rows)) for s in range(self.slots)
        ]

    def rows_used(self) -> int:
        """How many processes recorded anything."""
        width = self.slots * 2
        return sum(1 for r in range(self.rows) if any(self.buf[r * width : (r + 1) * width]))


class Timed:
    """A step of the user's pipeline, timed into ``table``'s ``slot``. Reading an attribute
    (``t.size``) reads the step's own; it pickles with the dataset for spawned workers."""

    def __init__(self, fn: Any, slot: int, table: Table) -> None:
        self.fn, self.slot, self.table = fn, slot, table

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.table.call(self.slot, self.fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "fn" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.fn, name)

    def __repr__(self) -> str:
        return repr(self.fn)


@contextmanager
def timed_transforms(pipeline: Pipeline, table: Table) -> Iterator[None]:
    """Every step of ``pipeline`` swapped for a :class:`Timed` where it sits, for the block;
    every original put back in ``finally`` (on error and on Ctrl-C too)."""
    groups: dict[tuple[int, str], list[Site]] = {}
    for s in pipeline.sites:
        groups.setdefault((id(s.owner), s.attr), []).append(s)
    undo: list[tuple[Any, str, Any, bool]] = []
    try:
        for sites in groups.values():
            owner, attr = sites[0].owner, sites[0].attr
            # set on the instance before? (a bound method is not: its stand-in is deleted
            # again; a submodule of an nn.Module lives outside __dict__ but is set)
            had = not (
                hasattr(owner, "__dict__")
                and attr not in vars(owner)
                and hasattr(type(owner), attr)
            )
            original = getattr(owner, attr)
            if sites[0].index is None:
                new: Any = Timed(pipeline.fns[sites[0].slot - 2], sites[0].slot, table)
            else:
                steps = list(original)
                for s in sites:
                    steps[s.index] = Timed(steps[s.index], s.slot, table)  # type: ignore[index]
                new = type(original)(steps)
            undo.append((owner, attr, original, had))  # first: Ctrl-C may land in between
            try:
                setattr(owner, attr, new)
            except Exception as e:
                raise LoadEvalError(
                    f"{type(owner).__name__}.{attr} cannot be replaced for timing "
                    f"({type(e).__name__}: {e}); name the steps inside it instead."
                ) from None
        yield
    finally:
        for owner, attr, original, had in reversed(undo):
            if had and _get(owner, attr) is not original:
                setattr(owner, attr, original)
            elif not had and attr in vars(owner):
                delattr(owner, attr)
