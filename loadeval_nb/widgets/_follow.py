"""The live dashboard of runs in other processes: fed from their run logs on disk.

A :class:`FollowView` holds a :class:`~._dashboard.Dashboard` with one line per followed
run (``real`` and ``ideal``; ``real r0``, ``ideal r0``, ... for a job's ranks) and a
folder follower (the core's, which finds and re-reads the logs). Each :meth:`tick` looks
for new logs and streams what each run wrote since, through one :class:`~._pusher.Pusher`
per run (the same code that streams a run in this process: the follower answers what it
asks of an evaluator). Ticks come from a loop in the cell (``%loadeval_watch``) or from
:class:`Ticker`, a thread of its own, while the cell waits for child processes
(``%loadeval_run``); either way one thread at a time touches the plots. The dashboard is
built again, with the lines it lacks, when a run appears that it has none for (a rank
of another node); its verdict, panel and history come after the runs, so nothing of them
is lost.

``view="html"`` (VS Code, Colab: no widget JavaScript of jupyter_bokeh there) follows the
same runs into an :class:`~._html_view.HtmlDashboard`: the status line and the step-time
chart as an HTML output redrawn through a display handle, the rest in ipywidgets core.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional

import ipywidgets as W
from IPython.display import display

from ..core._shared import FolderFollower, RunFollower
from ._bokeh import load_bokehjs, unload_bokehjs_output
from ._dashboard import LIVE_ONLY, Dashboard
from ._html_view import HtmlDashboard, HtmlPusher
from ._pusher import Pusher, next_push_wait


class _Plots:
    """The dashboard as one run's pusher sees it: its plots, not its status line (the
    view says in one line how every run is doing)."""

    def __init__(self, dash: Dashboard) -> None:
        self._dash = dash

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dash, name)

    def set_status(self, text: str, color: str = "#333") -> None:
        pass


class FollowView:
    """A dashboard whose runs are run logs being written by other processes.

    ``names``: the runs expected (their lines are there from the start); runs found
    later are added. ``title`` begins the status line; ``steps_per_run`` as for a
    :class:`Dashboard`. ``view``: ``bokeh`` (the plots) or ``html`` (a chart redrawn
    through a display handle; ``text`` is shown as ``html``, whose plain-text part is its
    status line). ``clock`` (seconds) times the status line's "elapsed"."""

    def __init__(
        self,
        *,
        title: str,
        steps_per_run: Any,
        names: Sequence[str] = (),
        live: bool = True,
        view: str = "bokeh",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.html = view != "bokeh"
        self.title = title
        self.steps_per_run = steps_per_run
        self.live = live
        self.clock = clock
        self.folder: Optional[FolderFollower] = None
        self.names: tuple[str, ...] = tuple(names)
        self.box = W.VBox([], layout=W.Layout(width="100%"))
        self.dashboard = self._dashboard(self.names)
        self.box.children = (self.dashboard.widget,)
        self._pushers: dict[str, Pusher] = {}
        self._ended: set[str] = set()
        self._lock = threading.RLock()
        self.t_start = clock()
        self.cost_s: Optional[float] = None  # smoothed CPU time of one tick

    def _dashboard(self, names: Sequence[str]) -> Dashboard:
        self._shown = tuple(names) or ("real", "ideal")  # a pair's lines until runs show
        return (HtmlDashboard if self.html else Dashboard)(
            loader_name=self.title,
            steps_per_run=self.steps_per_run,
            live=self.live,
            runs=self._shown,
        )

    def show(self) -> None:
        """Display the view: the plots with BokehJS loaded for them (the output that loaded
        it taken out again: a saved notebook must not carry it), or the html view's live
        output and then its widgets."""
        bokehjs = None
        if not self.html:
            bokehjs = load_bokehjs()
        elif self.live:
            dash = self.dashboard
            dash.handle = display(dash.live_bundle(), raw=True, display_id=True)
        display({**self.box._repr_mimebundle_(), "text/plain": LIVE_ONLY}, raw=True)
        unload_bokehjs_output(bokehjs)

    # -- what is followed -------------------------------------------------------------
    def follow(self, folder: FolderFollower) -> None:
        """Follow the runs of ``folder`` from now on (a new run of a script: its lines
        start afresh)."""
        with self._lock:
            self.folder = folder
            self._pushers.clear()
            self._ended.clear()
            self.t_start = self.clock()

    def followers(self) -> dict[str, RunFollower]:
        return dict(self.folder.followers) if self.folder is not None else {}

    def tick(self) -> None:
        """Look for new run logs, stream what every run wrote since, say how far each is."""
        t_cpu = time.thread_time()
        with self._lock:
            folder = self.folder
            if folder is None:
                return
            folder.poll()
            found = folder.followers
            wanted = list(self.names)
            for name in found:
                for n in (name, _partner(name)):
                    if n not in wanted:
                        wanted.append(n)
            if wanted != list(self.names):
                self._rebuild(wanted)
            for name, follower in found.items():
                if name in self._ended:
                    continue
                pusher = self._pushers.get(name)
                if pusher is None:
                    kind = HtmlPusher if self.html else Pusher
                    pusher = kind(_Plots(self.dashboard), name, follower, name)
                    self._pushers[name] = pusher
                pusher.push()
            self.dashboard.set_status(self.status_text())
        cost = time.thread_time() - t_cpu
        self.cost_s = cost if self.cost_s is None else 0.7 * self.cost_s + 0.3 * cost

    def next_wait(self) -> float:
        """Seconds until the next tick, by its cost (as the pusher spaces its pushes)."""
        dash = self.dashboard
        if self.cost_s is None:
            return float(dash.push_interval_s)
        return next_push_wait(self.cost_s, dash.push_interval_s, dash.push_budget)

    def end(self, names: Optional[Sequence[str]] = None) -> None:
        """Runs that have ended (``names``; None: every run followed): their last lines,
        then each whole run drawn in place of its rolled-over live line."""
        with self._lock:
            if self.folder is None:
                return
            self.folder.poll()
            for name, follower in self.folder.followers.items():
                if name in self._ended or (names is not None and name not in names):
                    continue
                follower.refresh()
                if not follower.exists:
                    continue
                self.dashboard.run_ended(name, follower, None)
                self._ended.add(name)
            self.dashboard.set_status(self.status_text())

    def status_text(self) -> str:
        """``TITLE: real step 40, ideal step 28 (of 200), 12.3 s elapsed``."""
        parts = []
        for name, follower in self.followers().items():
            parts.append(f"{name} step {follower.total_steps}")
        if len(parts) > 6:
            parts = parts[:6] + [f"… {len(parts) - 6} more"]
        of = self.steps_per_run
        of_text = "" if of in (None, "auto") else f" (of {of} each)"
        what = ", ".join(parts) + of_text if parts else "waiting for the run logs"
        return f"{self.title}: {what}, {self.clock() - self.t_start:.1f} s elapsed"

    # -- the lines -------------------------------------------------------------------
    def _rebuild(self, names: Sequence[str]) -> None:
        """A dashboard with a line for each of ``names``, in place of the shown one; every
        followed run is streamed to it again from its start."""
        self.names = tuple(names)
        if self.names == self._shown:  # the lines shown already
            return
        old = self.dashboard
        self.dashboard = self._dashboard(self.names)
        if self.html:  # the new one draws into the live output already shown
            self.dashboard.handle = old.handle
        self.box.children = (self.dashboard.widget,)
        self._pushers.clear()
        self._ended.clear()
        old.close()
        close_tree(old.widget)


class Ticker(threading.Thread):
    """Ticks a :class:`FollowView` until stopped, each tick spaced by its cost; runs in a
    copy of its starter's context (what it sends goes out under the cell's request, as
    the pusher's does)."""

    def __init__(self, view: FollowView) -> None:
        super().__init__(name="loadeval-follow", daemon=True)
        self.view = view
        self.stop_event = threading.Event()
        self.failed: Optional[BaseException] = None
        self._context = contextvars.copy_context()

    def run(self) -> None:
        self._context.run(self._loop)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.view.next_wait()):
            try:
                self.view.tick()
            except Exception as e:  # never break the user's run over a plot
                self.failed = e

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


def _partner(name: str) -> str:
    """The other side of a run's pair: ``real r3`` -> ``ideal r3``."""
    side, sep, rank = name.partition(" ")
    other = {"real": "ideal", "ideal": "real"}.get(side, side)
    return f"{other}{sep}{rank}"


def close_tree(widget: Any) -> None:
    """Close a widget and every widget it holds: its children, and the widgets in its
    other traits (each widget's ``layout`` and ``style`` are widgets of their own, kept
    open by the kernel until closed)."""
    seen: set[int] = set()
    todo = [widget]
    while todo:
        w = todo.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        todo.extend(getattr(w, "_loadeval_held", ()))  # the plots an Output shows
        for name in getattr(w, "keys", ()):
            value = getattr(w, name, None)
            for v in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(v, W.Widget):
                    todo.append(v)
        w.close()
