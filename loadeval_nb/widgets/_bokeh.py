"""Bokeh inside ipywidgets: a display-only BokehModel, and putting BokehJS on the page.

Two pitfalls of jupyter_bokeh 4.1.0 with bokeh 3.9 are handled here (each has a
regression test in ``tests/widgets/test_dashboard.py``):

1. The browser echoes the events it applied (our streamed rows among them) and
   ``BokehModel._sync_model`` applies them a second time in the kernel: after a
   rerun the source holds every row twice and redraws jump back to step 0.
   :class:`DisplayOnlyBokehModel` ignores everything the browser sends except
   Bokeh UI events (our plots are display-only).
2. The widget needs ``window.Bokeh`` before it renders. Bokeh's default CDN
   resources fail offline. :func:`load_bokehjs` sends BokehJS inline (it works
   offline and under any URL prefix, e.g. JupyterHub) in an output that
   :func:`unload_bokehjs_output` may empty at once: the page runs BokehJS as it
   shows that output, before any later message (the widgets that need it), and
   keeps it; a notebook saved from then on (an autosave during the run) does not
   carry megabytes of it. It is sent once per page: a page keeps BokehJS, so a rerun
   on the same page (the same front-end session in the request's header) sends
   nothing; a reloaded page, or another front end, is a new session and gets it again.

What the browser sends to these plots waits for the main shell (see :mod:`._comms`).
"""

from __future__ import annotations

from typing import Any, Optional

from jupyter_bokeh import BokehModel

from ._comms import on_main_shell


class DisplayOnlyBokehModel(BokehModel):
    """A ``BokehModel`` that never applies state sent back by the browser.

    Only ``MessageSent`` events (Bokeh UI events such as a tap) are passed on;
    ``ColumnsStreamed``, ``ColumnsPatched`` and ``ModelChanged`` echoes are dropped.
    ``close()`` may be called more than once. The browser's messages to it are handled
    by the main shell, after the cell, never beside the user's loop.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        on_main_shell(self)

    def close(self) -> None:
        # jupyter_bokeh's close() is not idempotent (KeyError from Bokeh on the second
        # call), and ipywidgets calls close() again from __del__.
        if not getattr(self, "_loadeval_closed", False):
            self._loadeval_closed = True
            super().close()

    def _sync_model(self, _model: Any, content: dict[str, Any], _buffers: list[Any]) -> None:
        if content.get("event", "") == "jsevent" and content.get("kind") == "MessageSent":
            super()._sync_model(_model, content, _buffers)


_pages_with_bokehjs: set[str] = set()
"""The front-end sessions (pages) this kernel has sent BokehJS to."""


def _page() -> Optional[str]:
    """The front-end session of the request being run: a JupyterLab or Notebook 7 page
    has one per kernel connection, and a reload makes a new one. None outside a kernel
    (a terminal IPython, an in-process shell), where BokehJS is sent every time."""
    try:
        from IPython import get_ipython

        parent = getattr(get_ipython(), "parent_header", None) or {}
        session = (parent.get("header") or {}).get("session")
    except Exception:
        return None
    return session if isinstance(session, str) and session else None


def load_bokehjs(force: bool = False) -> Optional[Any]:
    """Display BokehJS (inline) so BokehModel widgets can render; returns the display handle,
    or None when nothing was displayed.

    Sent once per page (front-end session): the page keeps BokehJS, so a rerun on it sends
    nothing (it is about 4 MB); ``force`` sends it all the same. The output is sent with
    only Bokeh's JupyterLab mimetype (rendered by the jupyter_bokeh extension), not also
    as ``application/javascript``: half the size.
    """
    from IPython.display import display

    page = _page()
    if page is not None and page in _pages_with_bokehjs and not force:
        return None

    try:
        from bokeh.embed.bundle import bundle_for_objs_and_resources
        from bokeh.io.notebook import LOAD_MIME_TYPE, _loading_js
        from bokeh.resources import INLINE

        js = _loading_js(
            bundle_for_objs_and_resources(None, INLINE), None, 10000, register_mime=False
        )
    except Exception:  # a Bokeh without these internals: let Bokeh do it (not clearable)
        from bokeh.io import output_notebook
        from bokeh.resources import INLINE

        output_notebook(INLINE, hide_banner=True)
        handle = None
    else:
        handle = display({LOAD_MIME_TYPE: js, "text/plain": ""}, raw=True, display_id=True)
    if page is not None:
        _pages_with_bokehjs.add(page)
    return handle


def unload_bokehjs_output(handle: Optional[Any]) -> None:
    """Empty the output that carried BokehJS (the page keeps it; the saved notebook does not)."""
    if handle is not None:
        handle.update({"text/plain": ""}, raw=True)
