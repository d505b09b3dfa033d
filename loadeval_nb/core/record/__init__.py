"""A measured run as a record: :class:`~.run.Run` (raw per-step arrays, their statistics
and its own JSON codec), ``load_run`` with the journal of epochs appended while a run
went on (``runlog``, ``journal``), and the rerun panel's history file (``history``).
Imports nothing above core's floor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .run import SCHEMA_VERSION, Run
    from .runlog import load_run

__all__ = [
    "Run",
    "SCHEMA_VERSION",
    "load_run",
]
__getattr__, __dir__ = lazy_face(__name__)
