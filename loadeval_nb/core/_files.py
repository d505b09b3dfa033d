"""Writing files so that a failure never destroys what was there: a temporary file beside
the target, then ``os.replace``; the temporary file never survives a failure."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Optional


@contextmanager
def atomic_open(path: Any) -> Iterator[IO[str]]:
    """A text file that becomes ``path`` only when the block ends without an exception."""
    p = os.fspath(path)
    if os.path.isdir(p):  # say so about the user's path, not about the temporary file
        raise IsADirectoryError(21, "it is a folder", p)
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


def cannot_write_in(folder: str) -> Optional[str]:
    """Why no file can be written in ``folder`` (made if need be), or None when one can:
    a probe file is made and removed, so a read-only place is found before a run."""
    up = os.path.abspath(folder)
    while not os.path.exists(up) and os.path.dirname(up) != up:
        up = os.path.dirname(up)
    if not os.path.isdir(up):  # errno would say "File exists" or "Not a directory"
        return f"{os.path.basename(up)!r} is a file, not a folder"
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".loadeval-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


def write_text_atomic(path: Any, text: str) -> str:
    """Write ``text`` to ``path`` atomically; returns the path."""
    with atomic_open(path) as f:
        f.write(text)
    return os.fspath(path)
