"""loadeval_nb.magic: the ``%%loadeval`` cell magic (``%load_ext loadeval_nb``)."""

from __future__ import annotations

from ._magic import LoadEvalMagics, latest_session, stop_all
from ._session import Session

__all__ = ["LoadEvalMagics", "stop_all", "latest_session", "Session"]
