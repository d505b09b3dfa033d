"""Following run logs while other processes write them (as TensorBoard reads event files):
no transport of our own, only the files the runs already write.

* :class:`RunFollower` follows one run log: the document is re-read when it is
  rewritten, and of its ``.journal`` only the lines appended since the last read are
  read. It answers what a live dashboard asks of an evaluator (``steps_since``,
  ``util_sampler``, ``started_ns``, ``to_run``), so the same pusher streams a run in
  this process or in another.
* :class:`FolderFollower` finds the run logs of one job in a folder (a pair's
  ``...-real.json`` and ``...-ideal.json``, or every rank's ``...-real-rank0.json``,
  ...) and follows each, until every side of every rank has its whole run.

A run log does not say in so many words that its run has ended (the evaluator writes
the same document at an epoch's end and at ``close()``); :func:`looks_final` tells it
from what the log holds (see there).
"""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from typing import Any, Optional

import numpy as np

from ..errors import RunLogError
from .journal import journal_path, merge_journal_lines
from .lognames import ARMS, LogName, parse_log_name
from .run import RUN_KIND, SIDES, Run, run_from_dict

__all__ = ["FolderFollower", "LogName", "RunFollower", "looks_final", "parse_log_name"]


def looks_final(run: Run, journal_waiting: bool = False) -> bool:
    """Whether a run log read while its run may still go on holds the whole run.

    * a journal still beside the document (``journal_waiting``): not yet (``close()``
      folds it into the document);
    * the run stopped early (``stopped``, ``source-error``): yes;
    * an adaptive run: once an epoch says why it stopped (``auto_stop``);
    * a block of an interleaved pair is an epoch: once the log holds the plan's blocks
      (``settings.interleaved.blocks``);
    * a run that is one pass of the loader: once its epoch is written.

    A log whose run went on for more epochs than that (``repeat``) reads as final at its
    first; a watcher that must know waits for the writer's process instead.
    """
    if journal_waiting or not run.blocks or run.status in ("running", "not-started"):
        return False
    if run.status in ("stopped", "source-error"):
        return True
    if any(isinstance(e, dict) and e.get("auto_stop") for e in run.blocks):
        return True
    settings = run.settings or {}
    if settings.get("auto_stop"):
        return False
    plan = run.plan
    if plan is not None:
        blocks = plan.get("blocks")
        return isinstance(blocks, int) and len(run.blocks) >= blocks
    return True


class _LogTicks:
    """A followed run's utilisation, as a live chart asks a sampler for it
    (:meth:`UtilSampler.since`)."""

    def __init__(self, follower: RunFollower) -> None:
        self._follower = follower

    def since(self, k: int) -> tuple[dict[str, list[Any]], int]:
        """Ticks from index ``k`` on: ``t_ns`` (since the run's start), ``gpu_pct`` (mean
        over the GPUs; absent without GPU readings), ``process_cpu_pct``,
        ``workers_cpu_pct`` (NaN where unknown). Returns (data, next k)."""
        run = self._follower.to_run()
        util = run.util or {}
        t = list(util.get("t_ns") or [])
        n = len(t)
        nan = float("nan")

        def part(values: Any) -> list[float]:
            vals = list(values or [])[k:n]
            vals += [None] * (n - k - len(vals))
            return [nan if v is None else float(v) for v in vals]

        out: dict[str, list[Any]] = {"t_ns": t[k:]}
        per_tick = run.gpu_util_per_tick()
        if per_tick is not None:
            out["gpu_pct"] = part(per_tick)
        cpu = util.get("cpu") or {}
        out["process_cpu_pct"] = part(cpu.get("process_pct"))
        out["workers_cpu_pct"] = part(cpu.get("workers_pct"))
        return out, max(n, k)


class RunFollower:
    """One run log followed as another process writes it.

    Every read (``refresh()``, and ``steps_since``, which refreshes first) looks at the
    document's and the journal's ``stat`` only; the document is parsed again only when it
    was rewritten, and of the journal only the whole lines appended since are read. A
    document that does not parse (not a run log, a newer schema) leaves the last good
    read in place and says why in ``error``. Safe to read from several threads.
    """

    started_ns = 0
    """Times in a run log are since the run's start (``steps.start_ns``, ``util.t_ns``)."""

    def __init__(self, path: str, label: Optional[str] = None) -> None:
        self.path = os.fspath(path)
        self.label = label
        self.error: Optional[str] = None
        self._lock = threading.RLock()
        self._doc_sig: Optional[tuple[int, int, int]] = None
        self._doc: Optional[dict[str, Any]] = None
        self._merged: Optional[dict[str, Any]] = None
        self._journal_id: Optional[tuple[int, int]] = None
        self._journal_at = 0
        self._journal_waiting = False
        self._run: Optional[Run] = None
        self._starts: list[int] = [0]
        self._ticks = _LogTicks(self)

    # -- reading ---------------------------------------------------------------------
    def refresh(self) -> bool:
        """Read what was written since the last read; True when the run grew or changed."""
        with self._lock:
            try:
                return self._refresh()
            except OSError as e:  # the folder went away (a temporary one, removed)
                self.error = f"cannot read {self.path!r} ({e.strerror or e})"
                return False

    def _refresh(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        changed = False
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig != self._doc_sig:
            doc = self._parse()
            if doc is None:
                return False
            self._doc_sig, self._doc, self._merged = sig, doc, doc
            self._journal_id, self._journal_at = None, 0
            changed = True
        changed = self._read_journal() or changed
        if changed:
            assert self._merged is not None
            try:
                run = run_from_dict(self._merged, source=repr(self.path))
            except Exception as e:  # a log of another version, a value it cannot hold
                self.error = str(e) if isinstance(e, RunLogError) else f"{self.path!r}: {e}"
                return False
            self.error = None
            self._run = run
            self._starts = _loader_starts(run)
        return changed

    def _parse(self) -> Optional[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8-sig") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            self.error = f"{self.path!r} does not parse as a run log ({e})"
            return None
        if not isinstance(doc, dict) or doc.get("kind") != RUN_KIND:
            self.error = f"{self.path!r} is not a loadeval_nb run log"
            return None
        return doc

    def _read_journal(self) -> bool:
        try:
            st = os.stat(journal_path(self.path))
        except FileNotFoundError:
            self._journal_waiting = False
            return False
        self._journal_waiting = True
        jid = (st.st_dev, st.st_ino)
        if jid != self._journal_id or st.st_size < self._journal_at:
            if self._journal_id is not None:  # another journal: merge it from the document
                self._merged = self._doc
            self._journal_id, self._journal_at = jid, 0
        if st.st_size <= self._journal_at or self._merged is None:
            return False
        with open(journal_path(self.path), "rb") as f:
            f.seek(self._journal_at)
            data = f.read(st.st_size - self._journal_at)
        end = data.rfind(b"\n") + 1  # whole lines only: the writer may be mid-line
        if not end:
            return False
        self._journal_at += end
        lines = data[:end].decode("utf-8", errors="replace").splitlines(keepends=True)
        merged, used, _ = merge_journal_lines(self._merged, lines)
        self._merged = merged
        return used > 0

    # -- what a live dashboard asks of an evaluator ------------------------------------
    @property
    def sides(self) -> tuple[str, ...]:
        """The one side its log holds: ``("ideal",)`` for a replayed run, else ``("real",)``."""
        run = self._run
        return ("ideal",) if run is not None and run.mode == "replay" else ("real",)

    def side_at(self, t_ns: int) -> Optional[str]:
        """Its one side, at any time since the run's start."""
        return self.sides[0] if t_ns >= 0 else None

    def steps_since(
        self, side: Any = (0, 0), cursor: Optional[tuple[int, int]] = None
    ) -> tuple[list[int], tuple[int, int]]:
        """Step times (ns) read since ``cursor``, and the new cursor, after a refresh:
        ``steps_since(side, cursor)`` as every live run answers it, or
        ``steps_since(cursor)``.

        The cursor is ``(start, step)``: how many of the loader's starts the run had made
        (its first step, and the first of each later epoch that began with an ``iter()``
        of its own, as the charts mark them) and the steps read since the last of those,
        so that a live chart marks each start-up step as it does an evaluator's
        (a block of an interleaved pair is an epoch but no start)."""
        if not isinstance(side, str):
            side, cursor = None, side
        cursor = cursor or (0, 0)
        with self._lock:
            self.refresh()
            run = self._run
            if run is None:
                return [], cursor
            starts, n = self._starts, run.n_steps
            g, i = cursor
            at = (starts[g] if g < len(starts) else n) + i
            if at >= n:
                return [], cursor
            g2 = bisect.bisect_right(starts, n) - 1
            return list(run.step_ns[at:n]), (g2, n - starts[g2])

    @property
    def util_sampler(self) -> Optional[_LogTicks]:
        """The run's utilisation ticks (None: the run was not sampled, or nothing read)."""
        run = self._run
        return self._ticks if run is not None and run.util is not None else None

    @property
    def total_steps(self) -> int:
        run = self._run
        return run.n_steps if run is not None else 0

    def to_run(self, side: Optional[str] = None) -> Run:
        """The run as last read (an empty one before the file is there); ``side``: its one."""
        run = self._run
        return run if run is not None else Run(mode="log", start_ns=[], step_ns=[])

    @property
    def exists(self) -> bool:
        return self._run is not None

    @property
    def final(self) -> bool:
        """Whether the log holds the whole run (:func:`looks_final`), after a refresh."""
        with self._lock:
            self.refresh()
            return self._run is not None and looks_final(self._run, self._journal_waiting)


def _loader_starts(run: Run) -> list[int]:
    """The steps that start the loader: the first, and the first of each later epoch
    whose record shows set-up time (an ``iter()`` of its own)."""
    if not run.n_steps:
        return [0]
    e = np.asarray(run.block)
    firsts = np.flatnonzero(np.r_[True, e[1:] != e[:-1]]).tolist()
    summaries = run.blocks or []

    def started(k: int) -> bool:
        i = int(e[k])
        setup = summaries[i].get("setup_ns") if 0 <= i < len(summaries) else None
        return setup is None or setup > 0

    return [firsts[0]] + [k for k in firsts[1:] if started(k)]


class FolderFollower:
    """The run logs of one job in ``folder``, followed as they appear and grow.

    ``prefix``: only logs whose names start with it (one run's, when its name is known).
    Otherwise the job followed is the newest one (its logs written last) among those
    written at or after ``since_unix`` (default: now), so that the finished jobs
    already in the folder are left alone; once chosen, it stays chosen.

    ``followers`` maps each run's series name (``real``, ``ideal``, or ``real r0``,
    ``ideal r0``, ... for ranks) to its :class:`RunFollower`, in order.
    """

    def __init__(
        self, folder: str, *, prefix: str = "", since_unix: Optional[float] = None
    ) -> None:
        self.folder = os.fspath(folder)
        self.prefix = prefix
        self.since_ns = int((time.time() if since_unix is None else since_unix) * 1e9)
        self.job: Optional[str] = None
        self.followers: dict[str, RunFollower] = {}
        self.names: dict[str, LogName] = {}
        self.older_jobs = 0
        """Jobs in the folder written before ``since_unix`` (not followed)."""
        self.newest_older: Optional[str] = None
        """The newest of those jobs (None: none)."""

    def _scan(self) -> dict[str, dict[str, tuple[LogName, int]]]:
        """The pairs' run logs in the folder by job: file name -> (what it says, mtime)."""
        jobs: dict[str, dict[str, tuple[LogName, int]]] = {}
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return jobs
        for entry in entries:
            if not entry.name.startswith(self.prefix):
                continue
            parsed = parse_log_name(entry.name)
            if parsed is None:
                continue
            try:
                mtime = entry.stat().st_mtime_ns
            except OSError:
                continue
            jobs.setdefault(parsed.job, {})[entry.name] = (parsed, mtime)
        return jobs

    def poll(self) -> bool:
        """Look for new logs; True when a run was added to ``followers``."""
        jobs = self._scan()
        if self.job is None:
            fresh = {
                j: max(m for _, m in files.values())
                for j, files in jobs.items()
                if self.prefix or any(m >= self.since_ns for _, m in files.values())
            }
            self.older_jobs = len(jobs) - len(fresh)
            older = {j: max(m for _, m in f.values()) for j, f in jobs.items() if j not in fresh}
            self.newest_older = max(older, key=lambda j: (older[j], j)) if older else None
            if not fresh:
                return False
            self.job = max(fresh, key=lambda j: (fresh[j], j))
        added = False
        for name, (parsed, _) in sorted(jobs.get(self.job, {}).items()):
            key = parsed.series
            if key in self.followers:
                continue
            self.followers[key] = RunFollower(os.path.join(self.folder, name), label=key)
            self.names[key] = parsed
            added = True
        if added:
            self.followers = dict(sorted(self.followers.items(), key=lambda kv: _order(kv[0])))
        return added

    def job_state(self, job: str) -> str:
        """How a job's run logs in the folder ended, in words: ``was measured`` where every
        side's log holds its whole run, else which run did not end (a job that failed, or
        was stopped, leaves such logs)."""
        files = self._scan().get(job, {})
        sides: dict[str, str] = {}
        for name, (parsed, _) in sorted(files.items()):
            try:
                with open(os.path.join(self.folder, name), encoding="utf-8") as f:
                    status = str(json.load(f).get("status", "?"))
            except (OSError, ValueError):
                status = "unreadable"
            sides[parsed.series] = status
        missing = [s for s in SIDES if not any(k.split(" ")[0] == s for k in sides)]
        unended = {k: v for k, v in sides.items() if v != "complete"}
        if not missing and not unended:
            return "was measured"
        said = [f"no {s} run log" for s in missing]
        said += [f"its {k} run {_STATUS_WORDS.get(v, v)}" for k, v in unended.items()]
        return f"ended before its pair was measured ({'; '.join(said)}): it failed or was stopped"

    @property
    def ranks(self) -> list[int]:
        """The ranks whose logs were seen (empty for a pair that is not a rank's)."""
        return sorted({n.rank for n in self.names.values() if n.rank is not None})

    def paths(self) -> list[str]:
        return [f.path for f in self.followers.values()]

    def finished(self) -> bool:
        """Every rank (or the one pair) has both sides' logs, and every arm's log it has
        (the contended arm's, where the pass had it) holds its whole run."""
        if not self.followers:
            return False
        ranks: dict[Optional[int], set[str]] = {}
        for key, name in self.names.items():
            if not self.followers[key].final:
                return False
            ranks.setdefault(name.rank, set()).add(name.side)
        return all(arms >= set(SIDES) for arms in ranks.values())


_STATUS_WORDS = {
    "not-started": "never started",
    "stopped": "was stopped before its steps were measured",
    "source-error": "ended on its loader's error",
    "running": "was still being written",
}


def _order(series: str) -> tuple[int, int]:
    """``real r0, ideal r0, contended r0, real r1, ...``: by rank, then in the order of
    the arms."""
    side, _, rank = series.partition(" r")
    return (int(rank) if rank.isdigit() else -1, ARMS.index(side) if side in ARMS else len(ARMS))
