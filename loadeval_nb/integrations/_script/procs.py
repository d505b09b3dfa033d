"""What the parent and the child both do to processes they stop: how long a process is
given to stop, and the Unix sockets a stopped DataLoader worker leaves behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import psutil

STOP_S = 5.0
"""How long a process has to exit after SIGTERM before SIGKILL."""


def listening_sockets(procs: Sequence[psutil.Process]) -> list[str]:
    """The Unix sockets ``procs`` listen on in folders of multiprocessing's (``pymp-*``:
    a DataLoader worker hands its batches' file descriptors over through one). Python
    removes them when the process exits cleanly; a process that is stopped leaves them in
    the temporary folder, so whoever stops it removes them (:func:`remove_sockets`)."""
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            for conn in p.net_connections(kind="unix"):
                path = conn.laddr
                if isinstance(path, str) and os.path.basename(os.path.dirname(path)).startswith(
                    "pymp-"
                ):
                    out.append(path)
    return out


def remove_sockets(paths: Sequence[str]) -> None:
    """Remove the sockets of stopped processes, and each one's folder once it is empty."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(path))  # only an empty one: nothing else is touched
