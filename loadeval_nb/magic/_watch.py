"""``%loadeval_watch DIR [--timeout S]``: a job started elsewhere (a torchrun job on this
machine, or one writing to a shared disk), followed live from its run logs in ``DIR``.

Thin: the core's folder follower finds the job's logs (the newest job written since the
watch began) and tells when every side of every rank holds its whole run; the widgets
stream them, one line per rank and side. The cell waits in a loop of its own, reading
the files, until the job is done, ``--timeout`` seconds have passed or the kernel is
interrupted (■: the watch stops, the job goes on); then it gathers the ranks' report from
the logs (``gather_logs``), or says a single pair's verdict. No transport of our own:
only the files.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.display import display

from ..core._shared import FolderFollower, interrupts_deferred
from ..core.errors import LoadEvalError
from ..core.explore import PairResult
from ..core.ranks import gather_logs
from ..core.verdict import diagnose
from ._busy import reads_busy
from ._session import NotebookSession

FAILED_COLOR = "#c62828"


class WatchSession(NotebookSession):
    """One ``%loadeval_watch`` line's view: released when its cell runs again, closed
    when the extension is unloaded."""

    def __init__(self, shell: Any, view: Any) -> None:
        self.view = view
        self.created = time.monotonic()
        super().__init__(shell, keep=True)

    def _dashboard(self) -> Any:
        return self.view.dashboard if self.view is not None else None

    def _roots(self) -> list[Any]:
        return [self.view.box if self.view is not None else None]

    def _forget(self) -> None:
        self.view = None


def watch(shell: Any, folder: str, timeout_s: Optional[float], view_kind: str = "bokeh") -> Any:
    """Follow the job writing run logs in ``folder`` until it is done (or ``timeout_s``,
    or a kernel interrupt); show and return its gathered report (a ``RanksResult``), or a
    single pair's ``PairResult``; None when no job wrote there. Kept in ``_loadeval``."""
    from ..widgets._shared import FollowView

    path = os.path.abspath(os.path.expanduser(folder))
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(
            f"{folder!r} is a file; pass the folder the job writes its run logs to (its "
            "--log-dir, RunSettings(log_dir=...))."
        )
    if timeout_s is not None and not timeout_s > 0:
        raise UsageError(f"--timeout must be a number of seconds > 0, not {timeout_s:g}.")
    follow = FolderFollower(path)
    view = FollowView(title=f"Watching {folder}", steps_per_run=None, view=view_kind)
    view.follow(follow)
    WatchSession(shell, view)
    view.show()
    start = time.monotonic()
    why = "done"
    try:
        with reads_busy(shell):
            while True:
                view.tick()
                if follow.job is None:
                    _waiting(view, follow, time.monotonic() - start)
                elif follow.finished():
                    break
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    why = "timeout"
                    break
                time.sleep(view.next_wait())
    except KeyboardInterrupt:  # Stop: the watch ends, the job goes on
        why = "stopped"
    with interrupts_deferred():
        view.end()
        return _report(shell, view, follow, why, timeout_s)


def _waiting(view: Any, follow: FolderFollower, elapsed_s: float) -> None:
    older = (
        f"; the {follow.older_jobs} job{'s' if follow.older_jobs > 1 else ''} already there "
        "are not followed (gather_logs reads them)"
        if follow.older_jobs
        else ""
    )
    view.dashboard.set_status(
        f"Watching {follow.folder}: waiting for a job to write its run logs{older}, "
        f"{elapsed_s:.1f} s elapsed"
    )


def _report(
    shell: Any, view: Any, follow: FolderFollower, why: str, timeout_s: Optional[float]
) -> Any:
    """The gathered report (or the pair's verdict) under the live lines, in the saved copy
    and in ``_loadeval``."""
    from ..viz import verdict_html
    from ..viz._shared import pair_html, report_html
    from ..widgets import ranks_view

    dash = view.dashboard
    until = {
        "done": "",
        "timeout": f"stopped watching after --timeout {timeout_s:g} s; ",
        "stopped": "stopped watching (kernel interrupt; the job goes on); ",
    }[why]
    if follow.job is None:
        older = follow.newest_older
        there = (
            f"; the newest job already there, {older}, {follow.job_state(older)} (the watch "
            "follows a job that starts after it; python -m loadeval_nb ranks or load_run "
            "reads that one)"
            if older is not None
            else ""
        )
        dash.set_status(
            f"{until[:1].upper() + until[1:]}no new job wrote run logs in {follow.folder}{there}.",
            FAILED_COLOR,
        )
        display(dash.saved_copy([]), raw=True)
        return None
    result: Any
    try:
        if len(follow.ranks) > 1:
            result = gather_logs(follow.paths())
            card, text = report_html(result.facts()), result.text("options")
        else:
            result = _pair(follow)
            d = result.diagnosis
            card = verdict_html(d) if d is not None else report_html(result.facts())
            text = d.text("options") if d is not None else result.facts().text("options")
    except LoadEvalError as e:  # a side's log missing or unreadable: said, not raised
        dash.set_status(f"{until}the job's report cannot be made: {e}", FAILED_COLOR)
        display(dash.saved_copy([]), raw=True)
        return None
    shell.user_ns["_loadeval"] = result
    if len(follow.ranks) <= 1:  # the ranks' card comes with their view, below
        dash.verdict.value = card
    headline = result.facts().headline
    dash.set_status(
        f"{until[:1].upper() + until[1:] if until else 'Done: '}{headline}",
        "#333" if why == "done" else FAILED_COLOR,
    )
    if len(follow.ranks) > 1:
        display(ranks_view(result, live=view.live))
        display(dash.saved_copy([(card, text)]), raw=True)
    else:
        display(dash.saved_copy([(pair_html(result, []), text)]), raw=True)
    return result


def _pair(follow: FolderFollower) -> PairResult:
    """The one pair of the job (a single process, or one rank): its runs, every arm the
    pass ran (the contended arm's too: the headroom split), and the verdict."""
    runs = {name.split(" ")[0]: f for name, f in follow.followers.items()}
    got = {arm: f.to_run() for arm, f in runs.items() if f.exists}
    real, ideal, contended = got.get("real"), got.get("ideal"), got.get("contended")
    variant = got.get("variant")
    return PairResult.from_runs(
        real,
        ideal,
        label=follow.job or "",
        diagnosis=(
            diagnose(real, ideal, contended=contended, variant=variant)
            if real is not None and ideal is not None
            else None
        ),
        log_paths={s: f.path for s, f in runs.items()},
        contended=contended,
        variant=variant,
    )
