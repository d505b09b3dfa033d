"""Writing files so that a failure never destroys what was there: a temporary file beside
the target, then ``os.replace``; the temporary file never survives a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any


@contextmanager
def atomic_open(path: Any) -> Iterator[IO[str]]:
    """A text file that becomes ``path`` only when the block ends without an exception."""
    p = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
    tmp = f"{p}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_text_atomic(path: Any, text: str) -> str:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path) as f:
        f.write(text)
    return os.fspath(path)
