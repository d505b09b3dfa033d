"""Which classes' ``__iter__`` the child answers, so that every pass of a loader the script
starts reaches the picker: the loader's own class, not only torch's base.

* ``DataLoader`` itself, and every subclass whose own ``__iter__`` replaces DataLoader's
  (torchdata's ``StatefulDataLoader``): those already defined when the child starts, and
  those defined later (a hook on ``DataLoader.__init_subclass__``, restored after). A
  subclass whose ``__iter__`` goes on to DataLoader's (``super().__iter__()``, returned or
  wrapped in a generator: accelerate's ``DataLoaderShard``, a loader that moves each batch
  to the device) is measured there: what it adds around the batches (the copy to the
  device) stays in both runs;
* loaders that are not DataLoaders but are known to be loaders (:data:`KNOWN`:
  ``torchdata.nodes.Loader``, webdataset's ``WebLoader``), as soon as their package is
  imported (an import hook: nothing is imported that the script does not import);
* the class or object named by ``--loader-from MODULE:NAME``: when MODULE is imported;
  for the script itself (``__main__:NAME``, never imported), a class it defines, as it
  is defined (a hook on ``builtins.__build_class__``).

Each patched ``__iter__`` hands a pass to ``start_pass(loader, original)`` only when its
class is the first patched one in the loader's MRO; a subclass's own ``__iter__`` that
calls ``super().__iter__()`` reaches the base's original directly, so one ``iter()`` is
one pass. Everything is put back when the block ends, names that did not exist included.
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
from collections.abc import Iterator
from collections.abc import Iterator as AbcIterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Callable, Optional

from ...core._shared import a_kind
from ...core.errors import OptionError

KNOWN = {"torchdata.nodes": "Loader", "webdataset": "WebLoader"}
"""Loaders that are not DataLoaders, found by themselves: ``{package: class name}``, the
class read from the package once the script imports it."""

StartPass = Callable[[Any, Callable[[Any], Iterator[Any]]], Iterator[Any]]
_ABSENT = object()


class LoaderFromError(SystemExit):
    """Raised into the script when ``--loader-from`` names nothing this run can measure:
    the script stops (as a setting that does not fit stops it), the sentence is reported."""

    outcome = "refused"

    def __init__(self, message: str) -> None:
        super().__init__(3)
        self.message = message


def parse_loader_from(text: Any) -> tuple[str, str]:
    """``MODULE:NAME`` as ``(module, name)``; :class:`OptionError` (``loader_from``) for
    anything else."""
    module, sep, name = str(text).partition(":")
    parts = module.split(".") + name.split(".")
    if not isinstance(text, str) or not sep or not all(p.isidentifier() for p in parts):
        raise OptionError(
            "loader_from",
            " takes MODULE:NAME, the loader's class or object where the script imports it "
            "from (mypkg.data:TrainStream, or __main__:TrainStream for a class the script "
            f"defines), not {text!r}.",
        )
    return module, name


class Patches:
    """The classes whose ``__iter__`` goes through ``start_pass`` (see the module's notes),
    and what each had before."""

    def __init__(self, start_pass: StartPass) -> None:
        self.start_pass = start_pass
        self._saved: list[tuple[type, Any]] = []  # (class, its own __iter__ or _ABSENT)
        self._ours: set[int] = set()  # id() of our __iter__ functions

    def patched(self, cls: type) -> bool:
        return any(c is cls for c, _ in self._saved)

    def patch(self, cls: type) -> None:
        """Answer ``cls``'s ``iter()`` (its own ``__iter__``, or the one it inherits)."""
        if self.patched(cls):
            return
        own = cls.__dict__.get("__iter__", _ABSENT)
        original = own if own is not _ABSENT else getattr(cls, "__iter__", None)
        if not callable(original):
            return
        start_pass, owner = self.start_pass, self.owner

        def __iter__(loader: Any) -> Iterator[Any]:
            if owner(type(loader)) is not cls:  # a subclass's own __iter__ calling ours
                return original(loader)  # type: ignore[no-any-return]
            return start_pass(loader, original)

        __iter__.__wrapped__ = original  # type: ignore[attr-defined]
        self._ours.add(id(__iter__))
        self._saved.append((cls, own))
        cls.__iter__ = __iter__  # type: ignore[attr-defined]

    def owner(self, cls: type) -> Optional[type]:
        """The first class in ``cls``'s MRO whose ``__iter__`` is ours: past a subclass's own
        ``__iter__`` that goes on to an inherited one (``super().__iter__()``, returned or
        wrapped, as a loader that moves each batch to the device does), which is never
        patched."""
        for c in cls.__mro__:
            f = c.__dict__.get("__iter__")
            if f is not None and id(f) in self._ours:
                return c
        return None

    def patch_tree(self, base: type) -> None:
        """``base`` and every subclass defined so far that has an ``__iter__`` of its own."""
        self.patch(base)
        todo: list[type] = list(base.__subclasses__())
        while todo:
            cls = todo.pop()
            if replaces_iter(cls):
                self.patch(cls)
            todo += cls.__subclasses__()

    def restore(self) -> None:
        while self._saved:
            cls, own = self._saved.pop()
            if own is _ABSENT:
                del cls.__iter__  # type: ignore[attr-defined]
            else:
                cls.__iter__ = own  # type: ignore[attr-defined]
        self._ours.clear()


def replaces_iter(cls: type) -> bool:
    """``cls`` has an ``__iter__`` of its own that does not call an inherited one (read
    from its code: a ``super().__iter__()`` names ``__iter__``)."""
    f = cls.__dict__.get("__iter__")
    if f is None:
        return False
    code = getattr(f, "__code__", None)
    return code is None or "__iter__" not in code.co_names


class OnImport:
    """A ``sys.meta_path`` finder that calls ``then[name](module)`` once the module
    ``name`` has been executed (imported the script's way: nothing is imported early)."""

    def __init__(self, then: dict[str, Callable[[ModuleType], None]]) -> None:
        self.then = then
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self.then or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)  # the other finders' answer
        finally:
            self._busy.discard(fullname)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then[fullname]

        def exec_module(module: ModuleType) -> None:
            run(module)
            del loader.exec_module  # the loader's own method again
            then(module)

        loader.exec_module = exec_module
        return spec


@contextmanager
def patched_loaders(
    start_pass: StartPass,
    loader_from: Optional[str] = None,
    on_named: Callable[[Callable[[Any], bool]], None] = lambda only: None,
) -> Iterator[None]:
    """Within the block, every pass of a loader (see the module's notes) starts through
    ``start_pass(loader, original)``; ``loader_from`` (``MODULE:NAME``) adds the class or
    object it names, and ``on_named`` is given what tells that loader from the others
    (``isinstance`` of the class, or the object itself) once it is found.
    :class:`LoaderFromError` (raised into the script's import) when NAME is not there
    or cannot be measured."""
    from torch.utils.data import DataLoader

    patches = Patches(start_pass)
    then: dict[str, Callable[[ModuleType], None]] = {}
    for package, name in KNOWN.items():
        then[package] = _known(patches, name)
    named: Optional[tuple[str, str]] = None
    if loader_from is not None:
        named = parse_loader_from(loader_from)
        if named[0] != "__main__":  # the script itself is run, never imported: __build_class__
            then[named[0]] = _named(patches, *named, on_named, then.get(named[0]))
    had_hook = DataLoader.__dict__.get("__init_subclass__", _ABSENT)

    def __init_subclass__(cls: type, **kw: Any) -> None:
        super(DataLoader, cls).__init_subclass__(**kw)  # type: ignore[misc]
        if replaces_iter(cls):
            patches.patch(cls)

    build_class = builtins.__build_class__

    def __build_class__(func: Any, name: str, *bases: Any, **kw: Any) -> Any:
        cls = build_class(func, name, *bases, **kw)
        if named is not None and isinstance(cls, type) and cls.__module__ == "__main__":
            if cls.__qualname__ == named[1]:
                _name_class(patches, cls, on_named, loader_from or "")
        return cls

    watch = OnImport(then)
    try:
        patches.patch_tree(DataLoader)
        DataLoader.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
        for module_name, hook in then.items():
            module = sys.modules.get(module_name)
            if module is not None:  # imported already (by us, or before the script)
                hook(module)
        sys.meta_path.insert(0, watch)
        if named is not None and named[0] == "__main__":
            builtins.__build_class__ = __build_class__  # type: ignore[assignment]
        yield
    finally:
        builtins.__build_class__ = build_class
        if watch in sys.meta_path:
            sys.meta_path.remove(watch)
        if had_hook is _ABSENT:
            if "__init_subclass__" in DataLoader.__dict__:
                del DataLoader.__init_subclass__
        else:
            DataLoader.__init_subclass__ = had_hook  # type: ignore[method-assign]
        patches.restore()


def loader_from_unfound(text: str, names: dict[str, Any]) -> Optional[str]:
    """Why ``--loader-from`` ``text`` found nothing in a script that ran to its end, in one
    sentence (None where it did find its class or object): a module the script never
    imported, or a name of the script's own that is no class (``names``: the script's)."""
    module, name = parse_loader_from(text)
    if module != "__main__":
        if module in sys.modules:
            return None  # found when imported, or refused there in a sentence of its own
        return (
            f"--loader-from {text}: the script never imported {module}, so nothing of it was "
            "iterated; name the module the script imports its loader from, or "
            "__main__:CLASS for a class the script defines."
        )
    obj: Any = names
    for part in name.split("."):
        obj = obj.get(part, _ABSENT) if isinstance(obj, dict) else getattr(obj, part, _ABSENT)
        if obj is _ABSENT:
            return (
                f"--loader-from {text}: the script defines no {name}; name the class of the "
                "loader it iterates (__main__:CLASS)."
            )
    if isinstance(obj, type):
        return None  # a class it defined and never iterated: the usual sentence
    if isinstance(obj, AbcIterator):
        what = "a generator, which is one pass" if hasattr(obj, "gi_frame") else "an iterator"
        return (
            f"--loader-from {text} names {what}; wrap it in a class whose __iter__ makes one "
            "pass, and name that class (__main__:CLASS)."
        )
    if callable(obj) and not hasattr(obj, "__iter__"):
        return (
            f"--loader-from {text} names {a_kind(obj)}, not a loader; name the class of the "
            "loader the script iterates (__main__:CLASS)."
        )
    cls = type(obj)
    return (
        f"--loader-from {text} names an object, {a_kind(obj)}: for the script's own loader "
        f"name its class, --loader-from __main__:{cls.__qualname__}."
    )


def _known(patches: Patches, name: str) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            patches.patch(cls)

    return hook


def _name_class(
    patches: Patches, cls: type, on_named: Callable[[Callable[[Any], bool]], None], text: str
) -> None:
    if not callable(getattr(cls, "__iter__", None)):
        raise LoaderFromError(
            f"--loader-from {text} names the class {cls.__qualname__}, which has no __iter__; "
            "name the class of the loader the script iterates."
        )
    patches.patch(cls)
    on_named(lambda loader: isinstance(loader, cls))


def _named(
    patches: Patches,
    module_name: str,
    name: str,
    on_named: Callable[[Callable[[Any], bool]], None],
    also: Optional[Callable[[ModuleType], None]],
) -> Callable[[ModuleType], None]:
    text = f"{module_name}:{name}"

    def hook(module: ModuleType) -> None:
        if also is not None:
            also(module)
        obj: Any = module
        for part in name.split("."):
            obj = getattr(obj, part, _ABSENT)
            if obj is _ABSENT:
                raise LoaderFromError(
                    f"--loader-from {text}: {module_name} has no {name} once imported; name a "
                    "class or an object the module defines as it is imported."
                )
        if isinstance(obj, type):
            _name_class(patches, obj, on_named, text)
            return
        if not hasattr(obj, "__iter__") or isinstance(obj, AbcIterator):
            raise LoaderFromError(
                f"--loader-from {text} names {a_kind(obj)}, which is not a loader a script "
                "can iterate once per pass; name its class, or an object with an __iter__ of "
                "its own (a generator is one pass: wrap it in a class whose __iter__ makes one)."
            )
        patches.patch(type(obj))
        on_named(lambda loader: loader is obj)

    return hook
