"""Which kernel thread handles what the browser sends to our widgets.

JupyterLab 4.6 sends widget messages over a kernel subshell ("comms over subshells",
its default), and ipykernel 7.4 hands a comm's messages to the subshell that the comm
last sent under: a thread of its own, running beside the cell. Two kinds of ours must
wait for the main shell instead:

* the plots: the browser echoes every update back, and each echo handled on a subshell
  would run beside the user's loop (taking the interpreter from it while it is being
  measured) and publish a busy and an idle status, which JupyterLab shows as the
  kernel's state: Idle while the cell still runs;
* the rerun panel's buttons: a rerun runs the user's loop, which must run on the main
  thread, where the stop button (a kernel interrupt) reaches it and other cells wait.
"""

from __future__ import annotations

from typing import Any, Optional


def on_main_shell(widget: Any) -> None:
    """Have ipykernel hand what the browser sends to ``widget`` to the main shell (queued
    while a cell runs) rather than to a subshell; nothing on kernels without subshells."""
    comm = getattr(widget, "comm", None)
    if comm is not None and hasattr(comm, "_reply_subshell_for"):
        comm._reply_subshell_for = _main_shell


def _main_shell(_data: Any, _default: Optional[str]) -> Optional[str]:
    return None  # ipykernel's id for the main shell
