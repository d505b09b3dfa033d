"""Which live view a ``%%loadeval`` cell shows: bokeh, html or text.

``--view`` first, then the ``LOADEVAL_VIEW`` environment variable, then the host:

* a terminal IPython (no Jupyter kernel: nothing renders HTML) gets ``text``;
* VS Code (``VSCODE_PID`` in the environment, as ``tqdm.auto`` reads it) and Colab
  (``google.colab`` imported) get ``html``: they load third-party widget JavaScript only
  when told to (``jupyter.widgetScriptSources``; ``enable_custom_widget_manager()``), and
  a Bokeh widget without it is an error box;
* everywhere else (JupyterLab, Notebook 7) ``bokeh``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, Optional

from IPython.core.error import UsageError

VIEWS = ("bokeh", "html", "text")
ENV_VAR = "LOADEVAL_VIEW"


def choose_view(
    option: Optional[str],
    shell: Any,
    environ: Optional[Mapping[str, str]] = None,
    modules: Optional[Mapping[str, Any]] = None,
) -> str:
    """The view a cell shows: ``option`` (``--view``), else ``$LOADEVAL_VIEW``, else the one
    that works in this host (``environ`` and ``modules``: ``os.environ`` and
    ``sys.modules`` by default). Raises UsageError for a view that does not exist."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if option is not None:
        return _checked(option, "--view {}")
    named = environ.get(ENV_VAR, "").strip()
    if named:
        return _checked(named, f"{ENV_VAR}={{}}")
    return host_view(shell, environ, modules)


def host_view(shell: Any, environ: Mapping[str, str], modules: Mapping[str, Any]) -> str:
    """The view that works in this host (see the module's docstring)."""
    if _is_terminal(shell, modules):
        return "text"
    if "google.colab" in modules or "VSCODE_PID" in environ:
        return "html"
    return "bokeh"


def _is_terminal(shell: Any, modules: Mapping[str, Any]) -> bool:
    """``shell`` is IPython's terminal shell (the ``ipython`` command), not a kernel's."""
    terminal = modules.get("IPython.terminal.interactiveshell")
    cls = getattr(terminal, "TerminalInteractiveShell", None)
    return cls is not None and isinstance(shell, cls) and getattr(shell, "kernel", None) is None


def _checked(value: str, spelling: str) -> str:
    view = value.strip().strip("'\"").lower()
    if view not in VIEWS:
        raise UsageError(
            f"{spelling.format(value)} is not a view; use --view bokeh, --view html or "
            "--view text (or set LOADEVAL_VIEW to one of them)."
        )
    return view
