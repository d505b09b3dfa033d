"""Running a cell body the way IPython runs cells, and swapping a name in the user namespace."""

from __future__ import annotations

import _signal
import ast
import asyncio
import inspect
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional

from IPython.core.error import UsageError

from ..core._shared import close_match
from ..integrations._shared import KNOWN_LOADERS

_ABSENT = object()


class StopLatch:
    """Stop (SIGINT) stops the cell's own code only. While the block runs, a Stop that
    arrives outside :meth:`run_body` (making the wrappers, winding a run up after the
    cell's loop stopped: its run log written, the loader's name put back, the result kept
    in ``_loadeval``) is held, however often it comes: a held Stop stops the next body as
    it starts, or is raised when the block ends. Inside ``run_body`` Stop is what it was
    (the evaluator stamps it, the loop stops at once).

    Only in the main thread, where SIGINT is delivered; elsewhere the block runs as is."""

    def __init__(self) -> None:
        self.held = 0
        self._previous: Any = None

    def __enter__(self) -> StopLatch:
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = _signal.signal(signal.SIGINT, self._hold)
            except ValueError:  # not the main interpreter
                self._previous = None
        return self

    def _hold(self, signum: int, frame: Any) -> None:
        self.held += 1

    def run_body(self, body: Callable[[], Any]) -> Any:
        """``body()`` with Stop live; a Stop held before it starts stops it at once."""
        if self._previous is None:
            return body()
        _signal.signal(signal.SIGINT, self._previous)
        try:
            if self.held:
                self.held = 0
                raise KeyboardInterrupt
            return body()
        finally:
            # the first call of the way out, a C function: a Stop that lands from here on,
            # on the way out of the body included, is held
            _signal.signal(signal.SIGINT, self._hold)

    def forget(self) -> None:
        """The Stops held so far are answered already (the run they stopped says so)."""
        self.held = 0

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        previous, self._previous = self._previous, None
        if previous is None:
            return
        _signal.signal(signal.SIGINT, previous)
        if self.held and exc_type is None:
            self.held = 0
            raise KeyboardInterrupt


def run_cell_body(shell: Any, cell: str) -> None:
    """Transform, compile and execute ``cell`` in ``shell.user_ns``, as IPython does.

    ``transform_cell`` turns ``%magics`` and ``!commands`` into Python;
    ``transform_ast`` applies registered AST transformers; the code is compiled
    through ``shell.compile`` (so tracebacks show the cell's lines) with top-level
    ``await`` allowed. Exceptions propagate unchanged.
    """
    source = shell.transform_cell(cell)
    tree = shell.compile.ast_parse(source)
    tree = shell.transform_ast(tree)
    filename = shell.compile.cache(cell)
    with shell.compile.extra_flags(getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)):
        code = shell.compile(tree, filename, "exec")
    result = eval(code, shell.user_ns)
    if inspect.CO_COROUTINE & code.co_flags:
        _run_coroutine(shell, result)


def _run_coroutine(shell: Any, coro: Any) -> Any:
    """Run a cell's top-level-await coroutine to completion from synchronous code."""
    try:
        running: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is None:  # terminal IPython: its own runner
        return shell.loop_runner(coro)
    # Inside a kernel the kernel's loop is running (and blocked in us): give the cell a
    # private loop on this thread for the duration, then put the kernel's back.
    asyncio.events._set_running_loop(None)
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
        asyncio.events._set_running_loop(running)


class LoaderRef:
    """A name (``train_loader``) or dotted path (``trainer.train_loader``) in the user namespace."""

    def __init__(self, shell: Any, dotted: str) -> None:
        parts = dotted.split(".")
        if not dotted or not all(p.isidentifier() for p in parts):
            raise UsageError(
                f"{dotted!r} is not a name; pass the loader's variable, e.g. %%loadeval train_loader."
            )
        self.shell, self.name, self.parts = shell, dotted, parts
        self.get()  # fail now, with a clear message, if it does not resolve

    def _parent(self) -> Any:
        ns = self.shell.user_ns
        if self.parts[0] not in ns:
            raise UsageError(
                f"No variable named {self.parts[0]!r} in the notebook"
                f"{close_match(self.parts[0], ns)}; define the loader first."
            )
        obj = ns[self.parts[0]]
        for i, p in enumerate(self.parts[1:-1], start=1):
            if not hasattr(obj, p):
                raise UsageError(
                    f"{'.'.join(self.parts[:i])} has no attribute {p!r}; check the loader's name."
                )
            obj = getattr(obj, p)
        return obj

    def get(self) -> Any:
        if len(self.parts) == 1:
            return self._parent()
        parent = self._parent()
        if not hasattr(parent, self.parts[-1]):
            raise UsageError(
                f"{'.'.join(self.parts[:-1])} has no attribute {self.parts[-1]!r}; check the loader's name."
            )
        return getattr(parent, self.parts[-1])

    @contextmanager
    def bound(self, value: Any) -> Iterator[None]:
        """Bind the name to ``value`` for the block; restore the original in ``finally``
        (re-creating or deleting it if the cell deleted or created it)."""
        ns = self.shell.user_ns
        if len(self.parts) == 1:
            key = self.parts[0]
            original = ns.get(key, _ABSENT)
            ns[key] = value
            try:
                yield
            finally:
                if original is _ABSENT:
                    ns.pop(key, None)
                else:
                    ns[key] = original
        else:
            parent, attr = self._parent(), self.parts[-1]
            original = getattr(parent, attr, _ABSENT)
            setattr(parent, attr, value)
            try:
                yield
            finally:
                if original is _ABSENT:
                    try:
                        delattr(parent, attr)
                    except AttributeError:
                        pass
                else:
                    setattr(parent, attr, original)


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def peek(shell: Any, path: str) -> Any:
    """The object at ``path`` in the user namespace, found without running user code: an
    attribute is read as stored (``inspect.getattr_static``), and one computed on reading
    (a property, a ``__getattr__``, any descriptor) counts as not found (``_ABSENT``).
    Looking for the loader must never call a property (Lightning's ``model.trainer``
    raises before a fit; another may have side effects)."""
    parts = path.split(".")
    obj = shell.user_ns.get(parts[0], _ABSENT)
    for p in parts[1:]:
        if obj is _ABSENT:
            break
        got = inspect.getattr_static(obj, p, _ABSENT)
        if got is not _ABSENT and hasattr(type(got), "__get__") and not inspect.isclass(got):
            got = _ABSENT  # a descriptor: reading it would run code
        obj = got
    return obj


def _objects(shell: Any, cell: str) -> Iterator[tuple[ast.AST, str, Any]]:
    """(node, dotted path, object) for every name or attribute path in ``cell`` that
    resolves in the user namespace, found without running user code (:func:`peek`)."""
    try:
        tree = ast.parse(shell.transform_cell(cell))
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        path = _dotted(node)
        if path is None:
            continue
        obj = peek(shell, path)
        if obj is not _ABSENT:
            yield node, path, obj


def find_names(shell: Any, cell: str, want: Callable[[Any], bool]) -> list[str]:
    """Names and dotted paths in ``cell`` that refer to distinct objects ``want`` accepts
    (the shortest path to each: ``loader`` over ``holder.loader``)."""
    found: dict[int, str] = {}
    for _, path, obj in _objects(shell, cell):
        if want(obj) and (id(obj) not in found or len(path) < len(found[id(obj)])):
            found[id(obj)] = path
    return sorted(found.values())


def is_loader(obj: Any) -> bool:
    """A loader the cell may be measuring without being told: a DataLoader (its
    subclasses included: torchdata's ``StatefulDataLoader``), or one of the loaders known
    to be loaders though not DataLoaders (``torchdata.nodes.Loader``, webdataset's
    ``WebLoader``: the script runner's list) once the notebook has imported its package.
    Any other iterable is measured when the cell's magic names it."""
    from torch.utils.data import DataLoader

    if isinstance(obj, DataLoader):
        return True
    for package, name in KNOWN_LOADERS.items():
        cls = getattr(sys.modules.get(package), name, None)
        if isinstance(cls, type) and isinstance(obj, cls):
            return True
    return False


def find_loader_names(shell: Any, cell: str) -> list[str]:
    """Names and dotted paths in ``cell`` that refer to distinct loaders (:func:`is_loader`)."""
    return find_names(shell, cell, is_loader)


def trainers_made_in(shell: Any, cell: str) -> list[str]:
    """Names the cell binds to a new ``...Trainer(...)`` and then calls ``.fit`` or
    ``.train`` on (``trainer = L.Trainer(...); trainer.fit(...)``)."""
    try:
        tree = ast.parse(shell.transform_cell(cell))
    except SyntaxError:
        return []
    made = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = _dotted(node.value.func) or ""
            if callee.split(".")[-1].endswith("Trainer"):
                made |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    used = {
        _dotted(node.func.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("fit", "train")
    }
    return sorted(made & used)


def find_callers(shell: Any, cell: str, method: str, want: Callable[[Any], bool]) -> list[Any]:
    """Distinct objects ``want`` accepts whose ``method`` the cell calls (``trainer.fit(...)``)."""
    found: dict[int, Any] = {}
    try:
        tree = ast.parse(shell.transform_cell(cell))
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == method
        ):
            continue
        path = _dotted(node.func.value)
        if path is None:
            continue
        obj = peek(shell, path)
        if obj is not _ABSENT and want(obj):
            found[id(obj)] = obj
    return list(found.values())
