"""Starting a side's processes and making sure none outlives it: the child (or torch's
own launcher, ``torch.distributed.run``, with one child per rank), a time limit, a grace
period once the steps are measured, and every descendant stopped on a timeout, a Ctrl-C
or a stop signal (torchrun starts its ranks in sessions of their own, so a process group
is not enough: the descendants are followed while they run). The child guards itself
too (``child/guard.py``): it ends when the parent is gone and at the time limit."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Optional

import psutil

from ....core.errors import LoadEvalError
from ..procs import STOP_S, listening_sockets, remove_sockets
from ..spec import ENV as CHILD_ENV

CHILD_MODULE = "loadeval_nb.integrations._script.child"
GRACE_S = 60.0
"""How long a side's processes may take to exit once every rank's steps are measured
(the script's ``finally`` blocks and atexit handlers) before they are stopped."""
DEFAULT_PORT = 29400
"""torchrun's rendezvous port when the endpoint names none."""
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that stop a run (Ctrl-C, a scheduler's kill, a closed terminal)."""


class Signalled(BaseException):
    """A stop signal reached the parent: :func:`run_side` stopped every process of its
    side, then raised this (a :class:`BaseException`, as ``KeyboardInterrupt`` is, so
    that nothing on the way takes it for the script's error)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopRequest:
    """The first stop signal received while :func:`stop_on_signals` is in force."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None

    @property
    def exit_code(self) -> int:
        """``128 + n``, as a shell reports a process that signal ``n`` ended."""
        return 128 + int(self.signum or 0)

    @property
    def name(self) -> str:
        """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
        if self.signum == signal.SIGINT:
            return "Ctrl-C"
        return signal.Signals(self.signum).name if self.signum else ""


_REQUEST: Optional[StopRequest] = None
"""The request :func:`run_side` answers, while :func:`stop_on_signals` is in force."""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """While in force, SIGINT, SIGTERM and SIGHUP only record a request to stop (the
    first one; the others are let go): :func:`run_side` answers it within its poll,
    stopping every process of its side and raising :class:`Signalled`, so that the
    run's ``finally`` blocks (the temporary folders) run whole instead of being cut by
    an exception raised anywhere. The handlers are put back on the way out. Outside
    the main thread, where Python runs no handlers, nothing is installed."""
    global _REQUEST
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def record(signum: int, frame: object) -> None:
        if request.signum is None:
            request.signum = signum

    before = {s: signal.signal(s, record) for s in STOP_SIGNALS}
    outer, _REQUEST = _REQUEST, request
    try:
        yield request
    finally:
        _REQUEST = outer
        for s, handler in before.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def _requested() -> Optional[int]:
    return _REQUEST.signum if _REQUEST is not None else None


@dataclass(frozen=True)
class Torchrun:
    """How torch's launcher starts the ranks of one side: ``nproc_per_node`` ranks on this
    node; with ``nnodes > 1``, this node's agent meets the others' at ``rdzv_endpoint``
    (c10d rendezvous, job ``rdzv_id``), as ``torchrun`` does. The rendezvous numbers the
    nodes in the order of their host names, so a rank keeps its number from the real
    side to the ideal side (agents sharing one host are numbered by process id)."""

    nproc_per_node: int
    nnodes: int = 1
    rdzv_endpoint: Optional[str] = None
    rdzv_id: Optional[str] = None

    def launcher_args(self, side: str) -> list[str]:
        args = ["--nproc-per-node", str(self.nproc_per_node)]
        if self.nnodes == 1:
            return ["--standalone", *args]
        args = ["--nnodes", str(self.nnodes), *args]
        # each side is a job of its own: its agents meet afresh, the ideal side one port up,
        # so that an agent early for it can never join the real side's rendezvous
        args += [
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            self.endpoint(side),
            "--rdzv-id",
            f"{self.rdzv_id}-{side}",
        ]
        return args

    def endpoint(self, side: str) -> str:
        """Where the nodes meet for ``side``: ``rdzv_endpoint`` (torchrun's default port
        29400 when it names none), one port up for the ideal side."""
        host, _, port = str(self.rdzv_endpoint).rpartition(":")
        if not host or not port.isdigit():
            host, port = str(self.rdzv_endpoint), str(DEFAULT_PORT)
        return f"{host}:{int(port) + (1 if side == 'ideal' else 0)}"


@dataclass(frozen=True)
class LauncherRank:
    """This process is one rank of a job the user's own launcher started (``torchrun``,
    ``accelerate launch``, ``srun``, a Kubernetes PyTorchJob): ``RANK`` and ``WORLD_SIZE``
    are set, and not by ``--nproc-per-node`` (whose ranks run the child, never the
    command). Its child runs the script with this environment, so the script's
    ``init_process_group`` joins the launcher's job exactly as it would without us."""

    rank: int
    world_size: int
    job: str
    """The job's id in every rank's log names, alike on every rank (:func:`job_id`)."""
    own_folders: bool = False
    """The ranks are known to run on several machines (or pods), each with its own
    temporary folder: they need a ``--log-dir`` they share."""

    def default_log_dir(self) -> str:
        """Where the ranks write without ``--log-dir``: one folder per job in the temporary
        folder, the same path on every rank of one machine (kept: it is the job's)."""
        return os.path.join(tempfile.gettempdir(), f"loadeval-run-{self.job}")


def job_id(environ: Mapping[str, str]) -> str:
    """The job's id, from what the launcher set alike on every rank: torchrun's
    ``TORCHELASTIC_RUN_ID`` (its ``--rdzv-id``; a fresh one on one node), else SLURM's
    ``SLURM_JOB_ID`` (``.SLURM_STEP_ID`` after it inside a job step), else, for
    torchrun's ``none`` on one node (``accelerate launch``), the name of torchrun's agent
    folder, else ``MASTER_ADDR-MASTER_PORT``; only characters a file name takes."""
    run_id = environ.get("TORCHELASTIC_RUN_ID", "")
    job = ""
    if run_id and run_id != "none":
        job = run_id
    elif environ.get("SLURM_JOB_ID"):
        step = environ.get("SLURM_STEP_ID", "")
        job = f"{environ['SLURM_JOB_ID']}.{step}" if step else environ["SLURM_JOB_ID"]
    elif environ.get("LOCAL_WORLD_SIZE") == environ.get("WORLD_SIZE"):
        # torchrun's agent names a folder of its own per job: every local rank's error
        # file is in it (``.../none_k2j3x/attempt_0/1/error.json``)
        agent = re.search(r"([^/]+)/attempt_\d+/\d+/error\.json$", environ.get(ERROR_FILE, ""))
        job = agent.group(1) if agent else ""
    if not job and environ.get("MASTER_ADDR") and environ.get("MASTER_PORT"):
        job = f"{environ['MASTER_ADDR']}-{environ['MASTER_PORT']}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", job)[:64] or "job"


ERROR_FILE = "TORCHELASTIC_ERROR_FILE"


def launcher_rank(environ: Optional[Mapping[str, str]] = None) -> Optional[LauncherRank]:
    """The rank this process is of a job its launcher started, or None (no ``RANK`` and
    ``WORLD_SIZE``, or a child of our own). :class:`LoadEvalError` for values that name
    no rank."""
    environ = os.environ if environ is None else environ
    rank, world = environ.get("RANK"), environ.get("WORLD_SIZE")
    if rank is None or world is None or environ.get(CHILD_ENV):
        return None
    if not (rank.isdigit() and world.isdigit() and int(rank) < int(world)):
        raise LoadEvalError(
            f"RANK={rank!r} and WORLD_SIZE={world!r} name no rank of a job (a number below "
            "the number of ranks); set them as your launcher does, or unset both."
        )

    def count(name: str) -> int:
        value = environ.get(name, "")
        return int(value) if value.isdigit() else 0

    local = count("LOCAL_WORLD_SIZE")
    own = (
        count("GROUP_WORLD_SIZE") > 1
        or 0 < local < int(world)
        or max(count("SLURM_STEP_NUM_NODES"), count("SLURM_NNODES")) > 1
        or (bool(environ.get("KUBERNETES_SERVICE_HOST")) and local != int(world))  # pods
    )
    return LauncherRank(int(rank), int(world), job_id(environ), own_folders=own)


def wait_until(done: Callable[[], bool], timeout_s: float, poll_s: float = 0.2) -> bool:
    """Poll ``done()`` until it is true (True) or ``timeout_s`` has passed (False); a stop
    signal :func:`stop_on_signals` recorded raises :class:`Signalled`."""
    end = time.monotonic() + timeout_s
    while True:
        if done():
            return True
        signum = _requested()
        if signum is not None:
            raise Signalled(signum)
        if time.monotonic() > end:
            return False
        time.sleep(poll_s)


def command(target: Sequence[str], side: str, ranks: Optional[Torchrun]) -> list[str]:
    """The command line that runs one side: the child, or torch's launcher over it."""
    if ranks is None:
        return [sys.executable, "-m", CHILD_MODULE, *target]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *ranks.launcher_args(side),
        "-m",
        CHILD_MODULE,
        *target,
    ]


class Tree:
    """The processes started under one root, followed while they run (so that one whose
    parent has gone is still found), and stopped together."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.known: dict[int, psutil.Process] = {}
        self.follow()

    def follow(self) -> None:
        try:
            root = psutil.Process(self.root)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            self.known.setdefault(p.pid, p)  # a Process checks its start time: no pid reuse

    def alive(self) -> list[psutil.Process]:
        out = []
        for p in self.known.values():
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
        return out

    def stop(self) -> None:
        """SIGTERM to every process of the tree (the root's group too), SIGKILL to those
        left after :data:`STOP_S`."""
        self.follow()
        sockets = listening_sockets(self.alive())
        with contextlib.suppress(OSError):
            os.killpg(self.root, signal.SIGTERM)
        procs = self.alive()
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        _, left = psutil.wait_procs(procs, timeout=STOP_S)
        self.follow()
        for p in {*left, *self.alive()}:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(self.alive(), timeout=STOP_S)
        remove_sockets(sockets)


@dataclass
class Ended:
    """How a side's processes ended."""

    returncode: Optional[int]
    timed_out: bool = False
    """Stopped at the time limit, before every rank's steps were measured (by the
    parent, or by the child's own guard when the parent could not act in time)."""
    lingered: bool = False
    """Stopped :data:`GRACE_S` after every rank's steps were measured (the script kept
    a thread or a process of its own running)."""
    leftovers: int = 0
    """Processes of the script's still running after it exited, stopped."""
    abandoned: Optional[str] = None
    """Stopped before its steps were measured because ``abandon()`` said why (another rank
    of the job measured nothing: this one would only wait for it)."""
    first_gone: Optional[str] = None
    """Under torch's launcher, the rank whose process ended first while the others still
    ran (``RANK``), where one did: the launcher stops the others after it, and may do so
    before they say why they stopped."""


class RankExits:
    """The order in which the ranks a launcher started end. A daemon thread finds the
    launcher's children that carry a ``RANK`` (every :data:`FIND_S`) and sleeps in
    ``select`` on a pidfd of each (Linux), so each end is timed the moment it happens:
    the launcher stops the other ranks only after its next look (torchrun's
    ``--monitor-interval``, 0.1 s), and a rank it stops may die before it writes why.
    Without pidfds nothing is recorded."""

    FIND_S = 0.05

    def __init__(self, launcher_pid: int) -> None:
        self.launcher_pid = launcher_pid
        self.ended: list[tuple[float, str]] = []
        self._fds: dict[int, str] = {}
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if hasattr(os, "pidfd_open"):
            self._thread = threading.Thread(target=self._run, name="loadeval_nb-ranks", daemon=True)
            self._thread.start()

    def _find(self) -> None:
        try:
            kids = psutil.Process(self.launcher_pid).children()
        except psutil.Error:
            return
        for p in kids:
            if p.pid in self._seen:
                continue
            try:
                rank = p.environ().get("RANK")  # (none yet between its fork and its exec)
            except psutil.Error:
                continue
            if rank is None:
                continue
            try:
                fd = os.pidfd_open(p.pid)  # type: ignore[attr-defined]
            except OSError:
                continue
            self._seen.add(p.pid)
            self._fds[fd] = rank

    def _run(self) -> None:
        while not self._stop.is_set():
            self._find()
            if not self._fds:
                self._stop.wait(self.FIND_S)
                continue
            ready, _, _ = select.select(list(self._fds), [], [], self.FIND_S)
            now = time.monotonic()
            for fd in ready:
                self.ended.append((now, self._fds.pop(fd)))
                os.close(fd)

    def first(self) -> Optional[str]:
        """The rank that ended before every other (none ended in the same instant, and at
        least one other rank was seen), or None."""
        if len(self._seen) < 2 or not self.ended:
            return None
        t0, rank = self.ended[0]
        if len(self.ended) > 1 and self.ended[1][0] <= t0:
            return None
        return rank

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()


def run_side(
    cmd: list[str],
    env: dict[str, str],
    *,
    timeout_s: Optional[float],
    measured: Callable[[], bool],
    grace_s: float = GRACE_S,
    poll_s: float = 0.1,
    abandon: Optional[Callable[[], Optional[str]]] = None,
    abandon_every_s: float = 1.0,
    ranks: bool = False,
) -> Ended:
    """Run ``cmd`` in a session of its own and wait for it: stopped (with everything it
    started) after ``timeout_s``, or ``grace_s`` after ``measured()`` turns true; on
    Ctrl-C (or any exception here) everything is stopped and the exception re-raised;
    on a signal :func:`stop_on_signals` recorded, everything is stopped and
    :class:`Signalled` raised. A side that ended by itself past ``timeout_s`` without
    ``measured()`` (its child's own time limit, while this process could not act) is
    timed out too. Processes left behind once it exits (orphans of the script's) are
    stopped too. ``abandon()`` (asked every ``abandon_every_s``): a reason to stop the
    side before its steps are measured, or None. With ``ranks`` (``cmd`` is torch's
    launcher), the rank that ended first is recorded (:class:`RankExits`)."""
    signum = _requested()
    if signum is not None:  # between two sides: the next one is not started
        raise Signalled(signum)
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    tree = Tree(proc.pid)
    order = RankExits(proc.pid) if ranks else None
    try:
        ended = _run(proc, tree, timeout_s, measured, grace_s, poll_s, abandon, abandon_every_s)
    finally:
        if order is not None:
            order.close()
    if order is not None:
        ended.first_gone = order.first()
    return ended


def _run(
    proc: subprocess.Popen[bytes],
    tree: Tree,
    timeout_s: Optional[float],
    measured: Callable[[], bool],
    grace_s: float,
    poll_s: float,
    abandon: Optional[Callable[[], Optional[str]]],
    abandon_every_s: float,
) -> Ended:
    start = time.monotonic()
    measured_at: Optional[float] = None
    asked = start
    exited = _exit_waiter(proc)
    try:
        while True:
            rc = exited(poll_s)
            if rc is not None:
                break
            signum = _requested()
            if signum is not None:
                raise Signalled(signum)  # everything is stopped below
            tree.follow()
            now = time.monotonic()
            if measured_at is None and measured():
                measured_at = now
            if measured_at is not None and now - measured_at > grace_s:
                tree.stop()
                return Ended(proc.wait(), lingered=True)
            if measured_at is None and timeout_s is not None and now - start > timeout_s:
                tree.stop()
                return Ended(proc.wait(), timed_out=True)
            if abandon is not None and measured_at is None and now - asked >= abandon_every_s:
                asked = now
                why = abandon()
                if why is not None:
                    tree.stop()
                    return Ended(proc.wait(), abandoned=why)
    except BaseException:
        tree.stop()
        proc.wait()
        raise
    finally:
        exited(None)
    late = (
        measured_at is None
        and timeout_s is not None
        and time.monotonic() - start > timeout_s
        and not measured()
    )
    tree.follow()
    # workers still on their way out are given a moment; the rest are the script's leftovers
    _, left = psutil.wait_procs([p for p in tree.alive() if p.pid != proc.pid], timeout=2.0)
    if left:
        tree.stop()
    return Ended(rc, timed_out=late, leftovers=len(left))


def _exit_waiter(proc: subprocess.Popen[bytes]) -> Callable[[Optional[float]], Optional[int]]:
    """``exited(timeout_s)``: the process's exit code, once it has exited, waiting at
    most ``timeout_s`` (None: let go of what it holds). A pidfd wakes the wait the moment
    the process exits (Linux); elsewhere ``Popen.wait``'s polling (up to 50 ms late)."""
    try:
        fd: Optional[int] = os.pidfd_open(proc.pid)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        fd = None

    def exited(timeout_s: Optional[float]) -> Optional[int]:
        nonlocal fd
        if timeout_s is None:
            if fd is not None:
                os.close(fd)
                fd = None
            return None
        if fd is not None:
            select.select([fd], [], [], timeout_s)
            return proc.poll()
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    return exited
