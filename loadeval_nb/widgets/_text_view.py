"""The text view: one line that updates in place, then the verdict, for a terminal IPython.

No widgets and no HTML: the status line (the pusher's, as the other views say it) is
written to standard output behind a carriage return, about twice a second, by a
:class:`TextPusher` (the :class:`~._pusher.Pusher`'s thread, reading and budget); each run
ends its line; the verdict comes as the saved copy's plain text (in a kernel, its card).
"""

from __future__ import annotations

import sys
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Optional

from IPython.display import display

from ..core._shared import HistoryRow
from ..core.explore import LadderResult, PairResult, SweepHooks, SweepPoint, SweepResult
from ..core.measure import LoaderEvaluator
from ._dashboard import RUN_TITLES, done_status, gpu_notice
from ._pusher import Pusher
from ._saved import static_bundle


class TextPusher(Pusher):
    """The pusher of the text view: counts each side's new steps and says so in the line."""

    def _held(self) -> AbstractContextManager[None]:
        return nullcontext()

    def _push(self) -> None:
        self.read_steps()
        self.dash.set_status(self.status_text())


class TextDashboard(SweepHooks):
    """The hooks of a pair, a ladder or a sweep, said in lines of text: one line per run
    that updates in place while it runs, a line when it is done; ``live=False``: only the
    lines of runs that end. The rerun panel is shown where widgets can be (a kernel)."""

    def __init__(
        self,
        *,
        loader_name: str,
        steps_per_run: Any,
        live: bool = True,
        push_interval_s: float = 0.5,
        push_budget: float = 0.0025,
        runs: tuple[str, ...] = (),
        sweep: bool = False,
        width: int = 900,
        stream: Any = None,
    ) -> None:
        self.loader_name, self.steps_per_run, self.live = loader_name, steps_per_run, live
        self.push_interval_s, self.push_budget = push_interval_s, push_budget
        self.sweep = sweep
        self.note = gpu_notice()
        self.rows: list[HistoryRow] = []
        self.advised_sweep: Optional[str] = None
        self.widget: Any = None  # no widget of its own
        self.shows_panel = _in_kernel()
        """Whether a rerun panel can show: in a kernel (a notebook), not in a terminal."""
        self._stream = stream
        self._pusher: Optional[Pusher] = None
        self._pair_label = ""
        self._status_text = ""
        self._open = 0  # the length of the line being updated (0: none)
        self._lock = threading.Lock()
        self._before: dict[str, int] = {}  # each side's steps when the run began (a repeat)

    @property
    def pusher(self) -> Optional[Pusher]:
        return self._pusher

    # -- the line ----------------------------------------------------------------------
    def _write(self, text: str) -> None:
        out = self._stream or sys.stdout  # the stdout of the moment (a kernel's, a capture)
        out.write(text)
        out.flush()

    def set_status(self, text: str, color: str = "#333") -> None:
        """Say ``text`` in place of the line being updated."""
        with self._lock:
            self._status_text = text
            self._write("\r" + text.ljust(self._open))
            self._open = max(len(text), 1)

    def say(self, text: str) -> None:
        """Say ``text`` on a line of its own (the line being updated ends first)."""
        with self._lock:
            self._end_line()
            self._status_text = text
            self._write(text + "\n")

    def _end_line(self) -> None:
        if self._open:
            self._write("\n")
            self._open = 0

    def status_text(self) -> str:
        return self._status_text

    # -- display ---------------------------------------------------------------------
    def show(self) -> None:
        if self.note:
            self.say(f"loadeval_nb: {self.note}")

    def saved_copy(self, cards: list[tuple[str, str]]) -> Optional[dict[str, str]]:
        """The result as an output: its text in a terminal, its card in a notebook; None
        before there is one (a line saying so would only be noise in a terminal)."""
        return static_bundle("loadeval-text-view", cards) if cards else None

    def sweep_view(self) -> TextDashboard:
        return TextDashboard(
            loader_name=self.loader_name,
            steps_per_run=self.steps_per_run,
            live=self.live,
            sweep=True,
            stream=self._stream,
        )

    # -- the hooks -------------------------------------------------------------------
    def pair_starting(self, label: str = "") -> None:
        self._pair_label = label

    def run_started(self, which: str, ev: LoaderEvaluator, index: int, total: int) -> None:
        what = RUN_TITLES.get(which, which)
        if which == "real" and ev.label not in (None, "real"):
            what = f"real loader, {ev.label}"
        label = f"Run {index + 1} of {total} ({what})"
        if self._pair_label:
            label = f"{self._pair_label}: {label[0].lower()}{label[1:]}"
        if self.live:
            self.set_status(f"{label}: starting")
            self._pusher = TextPusher(self, which, ev, label)
            self._pusher.start()
        self._label = label
        self._before = {side: run.n_steps for side, run in ev.to_runs().items()}

    def run_ended(self, which: str, ev: LoaderEvaluator, error: Optional[BaseException]) -> None:
        elapsed_s = None
        if self._pusher is not None:
            self._pusher.stop()  # its last push: the run's last count
            elapsed_s = self._pusher.clock() - self._pusher.t_start
            self._pusher = None
        if error is not None:
            what = (
                "interrupted"
                if isinstance(error, KeyboardInterrupt)
                else f"failed: {type(error).__name__}: {error}"
            )
            self.say(
                f"{'interleaved pair' if which == 'pair' else which + ' run'} {what} after "
                f"{ev.total_steps} steps (partial run kept)"
            )
        elif self.live:
            self.set_status(f"{self._label}: {done_text(ev, self._before, elapsed_s)}")
            with self._lock:
                self._end_line()
        else:
            self.say(f"{getattr(self, '_label', which)}: {done_text(ev, self._before)}")

    def progress(self, text: str) -> None:
        self.say(text)

    def pair_done(self, result: PairResult) -> None:
        done = done_status(result)
        if done is not None:
            self.say(done[0])
        self.rows.append(result.row())

    def add_history(self, rows: list[HistoryRow]) -> None:
        self.rows.extend(rows)

    def ladder_done(self, result: LadderResult) -> None:
        self.say(f"Done: {result.conclusion()}")

    def point_done(self, point: SweepPoint, result: SweepResult) -> None:
        self.say(f"{point.label}: done")

    def sweep_done(self, result: SweepResult) -> None:
        self.say(f"Done: {result.recommendation()}")

    def set_panel(self, panel: Any) -> None:
        """Show the rerun panel where widgets show (a kernel); a terminal has no use for it."""
        if self.shows_panel:
            display(panel)

    def add_view(self, view: Any) -> None:
        pass  # a sweep's text view says its lines itself

    def show_error(self, exc: BaseException) -> None:
        self.say(f"loadeval_nb: {type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._pusher is not None:
            self._pusher.stop_event.set()
            self._pusher.join()
            self._pusher = None


def done_text(ev: Any, before: dict[str, int], elapsed_s: Optional[float] = None) -> str:
    """How a run ended, for its last line: the steps the loop ran against the steps
    planned, then how many of them were steady (measured; an interleaved pass: each side's),
    ``done: 188 of 188 steps, 164 of them steady (real 84, ideal 80), 0.7 s elapsed``. ``before``:
    each side's steps when the run began (a repeat runs the same wrapper again)."""
    runs = ev.to_runs()
    ran = sum(run.n_steps - before.get(side, 0) for side, run in runs.items())
    steady = {
        side: sum(1 for k in run.steady_indices() if k >= before.get(side, 0))
        for side, run in runs.items()
    }
    try:
        planned: Optional[int] = None if ev.auto_stop is not None else len(ev)
    except TypeError:  # an unsized loader without steps: no plan to count against
        planned = None
    if planned is not None:
        text = f"done: {ran} of {planned} steps"
    else:
        text = f"done: {ran} steps" + (" (adaptive stop)" if ev.auto_stop is not None else "")
    text += f", {sum(steady.values())} of them steady"
    if len(steady) > 1:
        text += " (" + ", ".join(f"{side} {n}" for side, n in steady.items()) + ")"
    return text + (f", {elapsed_s:.1f} s elapsed" if elapsed_s is not None else "")


def _in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (its shell has a kernel: widgets can show)."""
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None
