"""Keeping the kernel's status busy while a cell or a panel button runs the user's loop.

JupyterLab shows the kernel's state from the last ``status`` message on IOPub, whatever
request it answers. While our cell runs, the kernel answers other requests on other
threads, each with a busy and an idle status of its own: JupyterLab's request for a
widgets subshell (sent on the control channel when the cell's first widget appears;
jupyter_server does not list that request among those whose status JupyterLab should
ignore), a widget of the user's moved on the page, a resource monitor's usage request.
Each idle made the status bar read Idle for the rest of the cell. While the block runs,
:func:`reads_busy` follows every such idle at once with a busy for the request running
the block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional


@contextmanager
def reads_busy(shell: Any) -> Iterator[None]:
    """While the block runs, an idle status the kernel publishes for any other request is
    followed by a busy one for the request running the block (the cell, or the button's
    message). Put back in ``finally``; nothing outside an ipykernel kernel."""
    kernel: Any = getattr(shell, "kernel", None)
    publish = getattr(kernel, "_publish_status", None)
    get_parent = getattr(kernel, "get_parent", None)
    if publish is None or get_parent is None:
        yield
        return
    mine = get_parent("shell")
    my_id = _msg_id(mine)
    if my_id is None:
        yield
        return

    def publish_then_busy(status: str, channel: str, parent: Optional[dict] = None) -> None:
        publish(status, channel, parent)
        if status == "idle" and _msg_id(parent or get_parent(channel)) != my_id:
            publish("busy", "shell", mine)

    had_own = "_publish_status" in vars(kernel)  # nested: put back the outer one
    kernel._publish_status = publish_then_busy
    try:
        yield
    finally:
        if had_own:
            kernel._publish_status = publish
        else:
            del kernel._publish_status


def _msg_id(parent: Optional[dict]) -> Optional[str]:
    return ((parent or {}).get("header") or {}).get("msg_id")
