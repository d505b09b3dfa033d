"""loadeval_nb.magic: the ``%%loadeval`` cell magic (``%load_ext loadeval_nb``)."""

from __future__ import annotations

from ._magic import LoadEvalMagics, stop_all

__all__ = ["LoadEvalMagics", "stop_all"]
