"""An in-process IPython shell with ``%load_ext loadeval_nb``, for the magic's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from loadeval_nb import magic


@contextmanager
def ipython_shell(**user_ns: Any) -> Iterator[InteractiveShell]:
    """The shell, with ``user_ns`` defined; the namespace is put back and every dashboard
    stopped afterwards."""
    cfg = Config()
    cfg.HistoryManager.enabled = False  # no history thread to outlive the test
    ip = InteractiveShell.instance(config=cfg)
    ip.run_line_magic("load_ext", "loadeval_nb")
    ns_before = dict(ip.user_ns)
    ip.user_ns.update(user_ns)
    try:
        yield ip
    finally:
        magic.stop_all()
        ip.user_ns.clear()
        ip.user_ns.update(ns_before)
