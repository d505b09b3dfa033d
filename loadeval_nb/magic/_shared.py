"""magic's private door, for the tests (no layer sits above the magic): the notebook
sessions alive, the view a front end chooses, the busy state the kernel reports and the
``--view`` option a follow magic takes (see ``core._shared`` for the same idea in core)."""

from __future__ import annotations

from ._busy import reads_busy
from ._script import take_view
from ._session import sessions
from ._view import choose_view

__all__ = ["choose_view", "reads_busy", "sessions", "take_view"]
