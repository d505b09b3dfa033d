"""The child's guard: a child of ``python -m loadeval_nb run`` ends, with every process it
started, when the process that started it is gone (a scheduler's SIGKILL, a crash: no
one is left to stop it or to read what it measures), or when it has not measured its
steps within the run's time limit (``--timeout``: the parent's own limit lives in the
parent, which may be gone or unable to act). With the parent gone, the guard also does
what the parent would have done with the run logs' folder: a temporary one (no
``--log-dir``) is removed unless a run log in it holds measured steps; the one sentence the
child leaves names the folder it keeps, and nothing else of the run stays in TMPDIR.

One daemon thread, started before the script runs, sleeps in ``select`` on a pidfd of the
parent (Linux: it wakes the moment the parent exits), or polls the parent every
:data:`POLL_S` elsewhere; until the steps are measured it also looks at the child's
status file once a second. The parent is the process
named in the child's spec, found among the child's ancestors: under
``torch.distributed.run`` the child's own parent is torch's launcher, which outlives
``python -m loadeval_nb run``, so ``PR_SET_PDEATHSIG`` (which follows the direct parent
only, and whose signal would end the child before it stopped its DataLoader workers) is
not used.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import threading
import time
from typing import Optional

import psutil

from ....core._shared import drop_locks
from ..procs import STOP_S, listening_sockets, remove_sockets
from ..spec import ChildSpec, ChildStatus, status_path
from ..spec import rank_key as _rank
from ..words import describe_target, side_words, timed_out_sentence

__all__ = ["guard", "park_if_ending"]

POLL_S = 0.25
"""How often the guard looks at the parent where there is no pidfd."""
STATUS_POLL_S = 1.0
"""How often it looks at the child's status file while the time limit runs (until the
steps are measured): a stat a second, one wake-up of a thread that holds no lock."""
LATE_S = 1.0
"""The child's limit is the run's ``--timeout`` from the child's own start, this much
later: a parent that is there stops it first (and says so in one sentence)."""
TIMED_OUT_EXIT = 124
"""The child's exit status at its own time limit (as ``timeout(1)``'s), where it is not
the leader of its process group (the run's children are: they end with their group)."""
QUIET_S = 2.0
"""How long the guard of a child whose parent is gone waits for its main thread to stop
writing (it usually raises once its loader's workers are stopped, and closes its pass)."""
ENDING = threading.Event()
"""Set once the guard ends the child (its parent gone)."""
PARKED = threading.Event()
"""Set once the child's main thread waits for that end (:func:`park_if_ending`)."""
PARENT_GONE_EXIT = 129
"""The child's exit status once its parent is gone, where it is not its group's leader
(128 + SIGHUP, as a process whose terminal went away)."""


def guard(target: list[str]) -> None:
    """Start the child's guard (nothing without a spec: the child refuses to run then)."""
    spec = ChildSpec.from_env()
    if spec is None or not target:
        return
    watch = _Watch(spec, target)
    if watch.parent is None:
        watch.parent_gone()  # gone before the child started: nothing to run for
    threading.Thread(target=watch.run, name="loadeval_nb-guard", daemon=True).start()


class _Watch:
    def __init__(self, spec: ChildSpec, target: list[str]) -> None:
        self.spec, self.target = spec, target
        self.rank = _rank()
        self.status_file = status_path(spec.status_dir, self.rank) if spec.status_dir else ""
        self.status_seen: Optional[float] = None
        self.deadline = (
            time.monotonic() + spec.timeout_s + LATE_S if spec.timeout_s is not None else None
        )
        self.parent: Optional[psutil.Process] = None
        self.between: list[psutil.Process] = []
        """Processes between the child and its parent (torch's launcher)."""
        try:
            for p in psutil.Process().parents():
                if p.pid == spec.parent_pid:
                    self.parent = p
                    break
                self.between.append(p)
        except psutil.Error:  # cannot read the ancestors here: trust the pid alone
            with contextlib.suppress(psutil.Error):
                self.parent = psutil.Process(spec.parent_pid)
            self.between = []
        self.pidfd: Optional[int] = None
        if self.parent is not None:
            with contextlib.suppress(AttributeError, OSError):
                self.pidfd = os.pidfd_open(self.parent.pid)  # type: ignore[attr-defined]
            if not self._alive():  # the pid was taken by another process since
                self.parent = None

    def run(self) -> None:
        while True:
            wait: Optional[float] = POLL_S
            if self.deadline is not None:
                every = STATUS_POLL_S if self.pidfd is not None else POLL_S
                wait = max(0.0, min(every, self.deadline - time.monotonic()))
            elif self.pidfd is not None:
                wait = None  # woken by the parent's exit alone
            if self.pidfd is not None:
                ready, _, _ = select.select([self.pidfd], [], [], wait)
                gone = bool(ready)
            else:
                time.sleep(POLL_S if wait is None else wait)
                gone = not self._alive()
            if gone:
                self.parent_gone()
            if self.deadline is not None:
                st = self._status(changed_only=True)
                if st is not None and st.outcome != "running":
                    self.deadline = None  # measured (or ending on its own): no limit now
                elif time.monotonic() >= self.deadline:
                    self.timed_out()

    def _status(self, changed_only: bool = False) -> Optional[ChildStatus]:
        """The child's own status file (written once the script iterates a DataLoader,
        once its steps are measured, and at its end); with ``changed_only``, None unless
        it changed since the last look."""
        try:
            seen = os.stat(self.status_file).st_mtime if self.status_file else None
            if seen is None or (changed_only and seen == self.status_seen):
                return None
            self.status_seen = seen
            return ChildStatus.load(self.status_file)
        except (OSError, ValueError, TypeError):  # none yet, or being replaced
            return None

    def _alive(self) -> bool:
        try:
            return bool(
                self.parent is not None
                and self.parent.is_running()  # the pid and its start time: no pid reuse
                and self.parent.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.Error:
            return False

    # -- ending --------------------------------------------------------------------------
    def parent_gone(self) -> None:
        """Stop every process the child started; then, with the child's main thread quiet
        (see :func:`park_if_ending`) and the node's other ranks ended, keep the run logs'
        folder where it holds run logs and name it in one sentence, or remove it where it
        is the parent's temporary one (no ``--log-dir``) and holds none: the parent that
        would have is gone, and nothing of the run is left in TMPDIR but what is named."""
        ENDING.set()
        speaks = os.environ.get("LOCAL_RANK", "0") == "0"  # one sentence for a node's ranks
        others = self._other_ranks() if speaks else []
        self._stop_started()
        # the parent cannot remove its folder for the children's statuses now
        shutil.rmtree(self.spec.status_dir, ignore_errors=True)
        if speaks:
            # the last logs are those written by now: the main thread's, as its pass ends
            # with its loader's workers gone, and the other ranks' before they end
            if threading.current_thread() is not threading.main_thread():
                PARKED.wait(QUIET_S)
            with contextlib.suppress(psutil.Error):
                psutil.wait_procs(others, timeout=2 * STOP_S)
            name = describe_target(self.target)
            _say(
                f"loadeval_nb: the process that started {name} (pid {self.spec.parent_pid}) "
                f"is gone, so {name} was stopped with every process it started"
                f"{self._logs_left()}."
            )
        self._end(PARENT_GONE_EXIT, self.between)

    def _other_ranks(self) -> list[psutil.Process]:
        """This node's other ranks (torch's launcher's other children), found before any
        rank's guard stops the launcher."""
        if not self.between:
            return []
        try:
            return [p for p in self.between[0].children() if p.pid != os.getpid()]
        except psutil.Error:
            return []

    def _logs_left(self) -> str:
        """What becomes of the run logs' folder, as the end of the child's sentence: the
        user's ``--log-dir`` is left as it is; the parent's temporary one is kept and named
        where a run log in it holds a step past the warm-up, else removed."""
        folder = self.spec.log_dir
        kept = f"; the run logs written so far are in {folder}"
        logs = _logs(folder)
        if not self.spec.log_dir_temporary:
            return kept if logs else f"; no run log had been written to {folder} yet"
        if any(_measured(path) for path in logs):
            return kept
        shutil.rmtree(folder, ignore_errors=True)
        if _logs(folder):  # a rank's last log came as it was removed: it is kept
            return kept
        if logs:
            return "; no step past the warm-up had been logged, so no run log was kept"
        return "; no run log had been written yet"

    def timed_out(self) -> None:
        """The parent's sentence for a side at its time limit (the parent prints the same
        one if it is there to), on stderr and in a ``timed-out`` status that keeps the
        passes the script made."""
        st = self._status()
        if st is not None and st.outcome != "running":  # measured just now
            self.deadline = None
            return
        status = ChildStatus("timed-out", rank=self.rank, passes=st.passes if st else [])
        status.message = timed_out_sentence(
            describe_target(self.target),
            side_words(self.spec.side),
            bool(status.passes),
            self.spec.timeout_s,
        )
        if os.environ.get("LOCAL_RANK", "0") == "0":
            _say(f"loadeval_nb: {status.message}")
        if self.status_file:
            with contextlib.suppress(OSError):
                status.save(self.spec.status_dir)
        self._end(TIMED_OUT_EXIT, [])

    def _end(self, code: int, between: list[psutil.Process]) -> None:
        """Stop every process the child started, then ``between`` (torch's launcher, with
        the parent gone: each rank's guard stops its own rank), then the child: with its
        whole process group (the script's orphans still in it) where it leads the group,
        else alone."""
        self._stop_started()
        for p in between:  # SIGKILL: torch's launcher would SIGTERM the other ranks before
            with contextlib.suppress(psutil.Error):  # their guards stopped their workers
                p.kill()
        with contextlib.suppress(Exception):  # the run logs' lock files, and their folder
            drop_locks()
        if hasattr(os, "killpg") and os.getpgrp() == os.getpid():
            with contextlib.suppress(OSError):
                os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(code)

    @staticmethod
    def _stop_started() -> None:
        """Stop every process the child started: SIGTERM, then SIGKILL after
        :data:`STOP_S`; the sockets of killed DataLoader workers removed."""
        with contextlib.suppress(psutil.Error):
            kids = psutil.Process().children(recursive=True)
            sockets = listening_sockets(kids)
            for p in kids:
                with contextlib.suppress(psutil.Error):
                    p.terminate()
            _, left = psutil.wait_procs(kids, timeout=STOP_S)
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            psutil.wait_procs(left, timeout=STOP_S)
            remove_sockets(sockets)


def park_if_ending() -> None:
    """Where the child's main thread reports (a status, its end): once the guard is ending
    the child, the main thread writes nothing more and waits for the guard's exit, so that
    the guard's sentence names every run log the child leaves."""
    if ENDING.is_set():
        PARKED.set()
        while True:
            time.sleep(3600)


def _logs(folder: str) -> list[str]:
    """The run logs (``loadeval-*.json`` documents) in ``folder``."""
    try:
        return [os.path.join(folder, n) for n in os.listdir(folder) if _is_log(n)]
    except OSError:
        return []


def _measured(path: str) -> bool:
    """Whether the run log at ``path`` holds a step past the warm-up (worth keeping)."""
    from ....core.record import load_run

    try:
        return bool(load_run(path).steady_indices())
    except Exception:  # not readable (being written, cut short): nothing to keep
        return False


def _is_log(name: str) -> bool:
    return name.startswith("loadeval-") and name.endswith(".json")


def _say(line: str) -> None:
    """One line on stderr, written past Python's buffer (whose lock the script's thread may
    hold); a stderr whose reader is gone (a closed terminal, a dead pipe) is let go."""
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode(errors="replace"))
