"""What the framework integrations share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def bound_method(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.name()`` returns ``value`` within the block (an instance attribute shadowing
    the method); the instance is left as it was."""
    had = name in vars(obj)
    old = vars(obj).get(name)
    setattr(obj, name, lambda: value)
    try:
        yield
    finally:
        if had:
            setattr(obj, name, old)
        else:
            delattr(obj, name)


def cpu_snapshot(module: Any) -> dict[str, Any]:
    """A copy of the module's weights in host memory (a GPU copy would double its memory)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
