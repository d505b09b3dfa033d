"""Writing ``metrics_file`` as a run goes, at a cost proportional to what is new.

A run log is one JSON document (DALI's keys at the top level), so bringing it up to
date means writing all of it: at 300,000 steps that is about a second, once per epoch.
So at an epoch's end the whole document is written only when that is cheap against
the time since it was last written (at most 1/20 of it, and always the first time);
otherwise the new epochs alone are appended as one line to ``<metrics_file>.journal``
(flushed at once, so a crash keeps them). :func:`load_run` reads the journal with the
document; the evaluator's ``close()`` writes the whole document and removes the journal.

A journal line::

    {"kind": "loadeval_nb.journal", "after_steps": int, "after_blocks": int,
     "after_ticks": int, "after_loads": int, "status": str,
     "steps": {...as in the log, new steps only...}, "blocks": [...],
     "util": {...as in the log, new ticks only...} | null, "worker_load_ns": [...] | null}
"""

from __future__ import annotations

import errno
import gc
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Optional

from .._files import expand_path
from ..errors import LoadEvalError
from .run import Run

try:
    import fcntl
except ImportError:  # Windows: the check within this process only
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("loadeval_nb")

JOURNAL_KIND = "loadeval_nb.journal"
FULL_WRITE_SHARE = 1 / 20
"""Whole-document writes take at most this share of the time between them."""


def journal_path(path: str) -> str:
    return f"{path}.journal"


def _util_ticks(util: Optional[dict[str, Any]]) -> int:
    return len((util or {}).get("t_ns") or [])


def _join_util(util: Optional[dict[str, Any]], more: Optional[dict[str, Any]]) -> Any:
    if util is None or more is None:
        return more if util is None else util
    gpu, cpu = dict(util.get("gpu") or {}), dict(util.get("cpu") or {})
    mgpu, mcpu = more.get("gpu") or {}, more.get("cpu") or {}
    for key in ("util_pct", "mem_used_bytes"):
        if gpu.get(key) is not None and mgpu.get(key) is not None:
            gpu[key] = [a + b for a, b in zip(gpu[key], mgpu[key])]
    for key in ("process_pct", "workers_pct", "workers", "other_pct"):
        if cpu.get(key) is not None and mcpu.get(key) is not None:
            cpu[key] = cpu[key] + mcpu[key]
    if gpu.get("other_procs") is not None and mgpu.get("other_procs") is not None:
        gpu["other_procs"] = gpu["other_procs"] + mgpu["other_procs"]
    return {**util, "t_ns": util["t_ns"] + more["t_ns"], "gpu": gpu, "cpu": cpu}


def _worse(a: Any, b: Any) -> Any:
    """The status of a run made of two parts (as ``build_run`` ranks them; a part that
    had not started says nothing about the other)."""
    for s in ("running", "source-error", "stopped"):
        if s in (a, b):
            return s
    if a in (None, "not-started"):
        return b if b is not None else a
    return a


# -- one writer a run log -------------------------------------------------------------
# Two writers of one path would interleave whole documents and journal lines counted from
# different runs: a log that reads as one run made of two. A writer claims its path while it
# writes: in this process a table of the live writers; across processes an flock'ed file
# per path in the temporary folder (never beside the log: a killed writer leaves no litter
# there, and the kernel drops its lock).

_claims: dict[str, weakref.ref[MetricsWriter]] = {}
_claims_lock = threading.RLock()  # a finalizer may run inside gc.collect() below


def _key(path: str) -> str:
    p = os.path.abspath(expand_path(path))
    return os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))


def _lock_path(key: str) -> str:
    digest = hashlib.sha256(os.fsencode(key)).hexdigest()[:32]
    return os.path.join(tempfile.gettempdir(), "loadeval_nb-locks", f"{digest}.lock")


BUSY_WAIT_S = 0.5
"""How long a lock file held by another process is tried again before its writer is called
busy: another process's sweep of stale lock files holds each for microseconds (two ranks
starting at once met it: "metrics_file ... is being written by another evaluator"); a
writer holds its lock for the whole run."""


def _busy(path: str, key: str, who: str) -> LoadEvalError:
    return LoadEvalError(
        f"metrics_file {path!r} is being written by another evaluator ({who}); give each "
        "evaluator its own metrics_file, or close() the other one first."
    )


def _lock_file(key: str, path: str) -> Optional[int]:
    """An open, flock'ed descriptor of ``key``'s lock file (None where there is no flock or
    the temporary folder cannot hold it); LoadEvalError when another process holds it."""
    if fcntl is None:
        return None
    lock = _lock_path(key)
    deadline = time.monotonic() + BUSY_WAIT_S
    for _ in range(10 + int(BUSY_WAIT_S / 0.01)):
        try:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the folder went with the last lock of another writer
            continue
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            if time.monotonic() < deadline:  # another process's sweep (_sweep) holds every
                # lock file for a moment to see whether it is stale: not a writer
                time.sleep(0.01)
                continue
            raise _busy(path, key, _holder(lock)) from None
        try:  # the file a releasing writer removed is not the lock: take the new one
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except OSError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            _sweep(os.path.dirname(lock), lock)
            return fd
        os.close(fd)
    return None


def drop_locks() -> None:
    """This process ends now, past its writers' clean-up (a guard's ``os._exit``): remove
    the lock files it holds (no one else can hold them), then those no process holds.
    Takes no lock of this module's: another thread may hold one as the process ends."""
    for ref in list(_claims.values()):
        writer = ref()
        claim = getattr(writer, "_claim", None)
        if claim is not None and claim.fd is not None:
            fd, claim.fd = claim.fd, None
            _unlock(claim.key, fd)
    sweep_locks()


def sweep_locks(wait_s: float = 0.0) -> None:
    """Remove the run logs' lock files no process holds (a writer killed with SIGKILL
    leaves its file), and their folder in the temporary folder once it is empty: what a
    command that started writers calls as it ends. ``wait_s``: how long to keep sweeping
    while some are still held (the processes of a writer just stopped may hold its lock
    a moment longer: forked workers share its descriptor)."""
    if fcntl is None:
        return
    folder = os.path.dirname(_lock_path("-"))
    end = time.monotonic() + wait_s
    while True:
        _sweep(folder, "")
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            pass  # a writer's lock is still in it
        if time.monotonic() >= end:
            return
        time.sleep(0.1)


def _sweep(folder: str, mine: str) -> None:
    """Remove the lock files no process holds: those of writers that were killed or stopped
    before they let go (the kernel dropped their flock; the file stayed)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if path == mine or not name.endswith(".lock"):
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                os.remove(path)  # held by us now: nobody else takes this file
        except OSError:
            pass  # a live writer's
        finally:
            os.close(fd)


def _holder(lock: str) -> str:
    try:
        with open(lock, encoding="ascii") as f:
            pid = f.read().strip()
    except (OSError, ValueError):
        pid = ""
    return f"process {pid}" if pid.isdigit() else "another process"


def _unlock(key: str, fd: Optional[int]) -> None:
    if fd is None:
        return
    lock = _lock_path(key)
    try:
        os.remove(lock)  # while still held: nobody else has taken this file
    except OSError:
        pass
    os.close(fd)
    try:
        os.rmdir(os.path.dirname(lock))  # the last lock: nothing left in the temporary folder
    except OSError:
        pass  # another writer's lock is in it


def check_free(path: str) -> None:
    """LoadEvalError now if a live writer (here or in another process) holds ``path``."""
    key = _key(path)
    with _claims_lock:
        ref = _claims.get(key)
        if ref is not None and ref() is not None:
            gc.collect()  # a writer of a dropped evaluator in a reference cycle
            if ref() is not None:
                raise _busy(path, key, "in this process")
    _unlock(key, _lock_file(key, path))


class _Claim:
    """What a writer holds while it writes: released by :meth:`release`, or when the
    writer is collected."""

    def __init__(self, key: str, fd: Optional[int]) -> None:
        self.key, self.fd = key, fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        with _claims_lock:
            ref = _claims.get(self.key)
            holder = ref() if ref is not None else None
            # the table's entry is this claim's, unless a later writer has taken the path
            if ref is not None and (holder is None or holder._claim in (None, self)):
                del _claims[self.key]
        _unlock(self.key, fd)


class MetricsWriter:
    """Keeps ``path`` (and its journal) up to date with an evaluator's epochs.

    ``snapshot(first_epoch, first_tick)`` returns a :class:`Run` of the epochs from
    ``first_epoch`` on, with utilisation ticks from ``first_tick`` on.

    A writer holds its path from its making to its last :meth:`write_all` (or until it
    is collected); one made on a path another live writer holds, in this process or in
    another, raises :class:`LoadEvalError`.
    """

    def __init__(self, path: str, timer: Callable[[], float] = time.perf_counter) -> None:
        self.path = path
        self.journal = journal_path(path)
        self._timer = timer
        self._written_at: Optional[float] = None
        self._full_cost = 0.0
        self._steps = self._blocks = self._ticks = self._loads = 0
        self._append_failed = False
        self._claim: Optional[_Claim] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._take()

    def _take(self) -> None:
        if self._claim is not None:
            return
        key = _key(self.path)
        with _claims_lock:
            ref = _claims.get(key)
            other = ref() if ref is not None else None
            if other is not None and other is not self and other._claim is not None:
                del other
                gc.collect()  # a writer of a dropped evaluator in a reference cycle
                other = ref() if ref is not None else None
                if other is not None and other._claim is not None:
                    raise _busy(self.path, key, "in this process")
            claim = _Claim(key, _lock_file(key, self.path))
            _claims[key] = weakref.ref(self)
        self._claim = claim
        self._finalizer = weakref.finalize(self, claim.release)

    def release(self) -> None:
        """Let go of the path: another writer may take it now."""
        claim, self._claim = self._claim, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if claim is not None:
            claim.release()

    def epoch_ended(self, snapshot: Callable[[int, int], Run]) -> None:
        self._take()
        now = self._timer()
        if self._written_at is None or now - self._written_at >= self._full_cost / FULL_WRITE_SHARE:
            self._write_whole(snapshot(0, 0))
        else:
            self._append(snapshot(self._blocks, self._ticks))

    def write_all(self, run: Run) -> None:
        """Write the whole document (atomically), drop the journal it now includes, and
        let go of the path (the run is over)."""
        self._take()
        try:
            self._write_whole(run)
        finally:
            self.release()

    def _write_whole(self, run: Run) -> None:
        t = self._timer()
        run.save(self.path)
        if os.path.exists(self.journal):
            os.remove(self.journal)
        self._full_cost = self._timer() - t
        self._written_at = self._timer()
        self._steps, self._blocks = run.n_steps, len(run.blocks)
        self._ticks, self._loads = _util_ticks(run.util), len(run.worker_load_ns or [])

    def _append(self, part: Run) -> None:
        loads = part.worker_load_ns
        line = {
            "kind": JOURNAL_KIND,
            "after_steps": self._steps,
            "after_blocks": self._blocks,
            "after_ticks": self._ticks,
            "after_loads": self._loads,
            "status": part.status,
            "steps": {
                "start_ns": part.start_ns,
                "wait_ns": part.wait_ns,
                "step_ns": part.step_ns,
                "samples": part.samples,
                "block": part.block,
                "complete": part.complete,
                "h2d_ns": part.h2d_ns,
            },
            "blocks": part.blocks,
            "util": part.util,
            "worker_load_ns": loads[self._loads :] if loads is not None else None,
        }
        data = json.dumps(line, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"
        try:
            self._append_line(data)
        except OSError as e:
            # a full disk: the journal holds the whole lines before this one, and the next
            # epoch's line (or close()'s document) brings these epochs too
            if not self._append_failed:
                self._append_failed = True
                log.warning(
                    "loadeval_nb: could not append to %s (%s); the run log keeps the epochs "
                    "written before, and the run goes on in memory (to_run(), save_metrics() "
                    "elsewhere).",
                    self.journal,
                    e.strerror or e,
                )
            return
        self._steps += part.n_steps
        self._blocks += len(part.blocks)
        self._ticks += _util_ticks(part.util)
        self._loads = len(loads) if loads is not None else 0

    def _append_line(self, data: bytes) -> None:
        """Append one line to the journal, whole or not at all: a write cut short (a full
        disk, Stop pressed) is taken back, so no reader meets half a line."""
        with open(self.journal, "a+b") as f:
            end = f.seek(0, os.SEEK_END)
            try:
                if end:
                    # a line cut short by a crash is closed first, so this one is whole
                    f.seek(end - 1)
                    if f.read(1) != b"\n":
                        data = b"\n" + data
                f.write(data)
                f.flush()
            except BaseException:
                try:
                    f.truncate(end)  # frees space: works on a full disk
                except OSError:
                    pass
                raise


def _count(x: Any) -> bool:
    """A count of nanoseconds as a run log holds one (no bool, no negative, fits 63 bits)."""
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63


_SERIES: dict[str, Any] = {
    "start_ns": _count,
    "step_ns": _count,
    "wait_ns": _count,
    "h2d_ns": lambda x: x is None or _count(x),
    "samples": lambda x: x is None or _count(x),
    "block": _count,
    "epoch": _count,  # schema 3's name of block
    "complete": lambda x: isinstance(x, bool),
}


def _checked_line(
    line: dict[str, Any], steps: dict[str, Optional[list[Any]]]
) -> tuple[dict[str, list[Any]], int, list[dict[str, Any]]]:
    """A journal line's steps and epochs, every value checked; ValueError for a bad one."""
    new = line["steps"]
    k = len(new["step_ns"])
    add = {}
    for key, have in steps.items():
        got = new.get(key)
        if have is None and (key != "h2d_ns" or got is None):
            continue  # a series the document does not hold (wait_ns in a replay)
        got = [None] * k if got is None else got
        if not isinstance(got, list) or len(got) != k:
            raise ValueError(f"steps.{key} is not a list of {k} entries")
        ok = _SERIES.get(key, lambda x: True)
        if not all(ok(x) for x in got):
            raise ValueError(f"steps.{key} holds a value a run log cannot")
        add[key] = list(got)
    more = line["blocks"] if "blocks" in line else line["epochs"]  # schema 3: epochs
    if not isinstance(more, list) or not all(isinstance(e, dict) for e in more):
        raise ValueError("its blocks are not a list of objects")
    return add, k, list(more)


def read_journal(doc: dict[str, Any], path: str) -> tuple[dict[str, Any], int]:
    """``doc`` (a parsed run log) with the epochs from its journal appended, and how many
    journal lines were used. A line the document already holds is skipped; a line cut
    short by a crash ends the file; a damaged line (it does not parse, or holds a value
    a run log cannot) is left out and said once, and the lines after it still load."""
    jpath = journal_path(path)
    if not os.path.isfile(jpath):
        return doc, 0
    try:
        with open(jpath, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return doc, 0
    merged, used, dropped = merge_journal_lines(doc, lines)
    if dropped:
        log.warning(
            "loadeval_nb: %s: %d damaged journal line%s left out; the rest of the run loaded.",
            jpath,
            dropped,
            "" if dropped == 1 else "s",
        )
    return merged, used


def merge_journal_lines(doc: dict[str, Any], lines: list[str]) -> tuple[dict[str, Any], int, int]:
    """``doc`` (a parsed run log, or one merged already) with the journal ``lines``
    (text, each ending in a newline but a last one cut short) appended: the merged
    document, the lines used and the damaged lines left out. :func:`read_journal` reads a
    whole journal through it; a reader following a run as it goes, the lines appended
    since its last read."""
    try:
        steps: dict[str, Optional[list[Any]]] = {
            k: list(v) if v is not None else None for k, v in doc["steps"].items()
        }
        n = len(steps["step_ns"] or [])
    except (KeyError, TypeError, AttributeError):
        return doc, 0, 0
    blocks = list(doc.get("blocks", doc.get("epochs")) or [])
    util, loads = doc.get("util"), doc.get("worker_load_ns")
    status, used = doc.get("status"), 0
    dropped = 0
    for raw in lines:
        try:
            line = json.loads(raw)
        except ValueError:
            if raw.endswith("\n"):  # a damaged line; one cut short by a crash ends the file
                dropped += 1
            continue
        if not isinstance(line, dict) or line.get("kind") != JOURNAL_KIND:
            dropped += 1
            continue
        after = line.get("after_steps")
        if not isinstance(after, int) or after < n:
            continue  # already in the document (written just before a crash)
        try:  # the whole line or nothing: checked into temporaries first
            add, k, more_blocks = _checked_line(line, steps)
        except (KeyError, TypeError, ValueError):
            dropped += 1
            continue
        for key, got in add.items():
            steps[key] = (steps[key] or [None] * n) + got  # copy times begin later: pad
        n += k
        blocks += more_blocks
        try:
            util = _join_util(util, line.get("util"))
        except Exception:  # utilisation is a bonus: never lose the steps over it
            pass
        more_loads = line.get("worker_load_ns")
        if loads is not None and isinstance(more_loads, list):
            if all(_count(x) for x in more_loads):
                loads = list(loads) + list(more_loads)
        status, used = _worse(status, line.get("status")), used + 1
    if not used:
        return doc, 0, dropped
    # summary and DALI keys are derived: recomputed on load, so they are left stale here
    merged = {**doc, "steps": steps, "blocks": blocks, "util": util, "status": status}
    merged.pop("epochs", None)  # schema 3's name
    merged["worker_load_ns"] = loads
    return merged, used, dropped
