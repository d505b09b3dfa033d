"""Writing files so that a failure never destroys what was there: a temporary file beside
the target, then ``os.replace``; the temporary file never survives a failure."""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Optional


def expand_path(path: Any) -> str:
    """``path`` as a shell would read it: ``~`` and ``$VARS`` expanded (a notebook's
    ``--log-dir ~/runs`` means the home folder, not a folder named ``~``)."""
    return os.path.expandvars(os.path.expanduser(os.fspath(path)))


_calls = itertools.count()


@contextmanager
def atomic_open(path: Any) -> Iterator[IO[str]]:
    """A text file that becomes ``path`` only when the block ends without an exception."""
    p = expand_path(path)
    if os.path.isdir(p):  # say so about the user's path, not about the temporary file
        raise IsADirectoryError(21, "it is a folder", p)
    folder = os.path.dirname(os.path.abspath(p))
    os.makedirs(folder, exist_ok=True)
    # a name of its own for each writer (process, thread, call): two writers of one path
    # never share a temporary file, and the last os.replace wins whole
    tmp = os.path.join(
        folder,
        f".{os.path.basename(p)[:64]}.tmp-{os.getpid()}-{threading.get_ident()}-{next(_calls)}",
    )
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            yield f
        os.replace(tmp, p)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError) and e.errno is not None:
            # the temporary file is ours, not the user's: the error names the path asked
            # for (a full disk's write error names no file at all)
            raise OSError(e.errno, e.strerror or os.strerror(e.errno), p) from None
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
    return expand_path(path)
