"""The resource behind the stage: what a DataLoader's workers spent their time on.

The sampler reads, at each tick, what the operating system says of each worker
(:class:`~.readers.ProcReader`: time on a CPU and waiting in a run queue from
``/proc/<pid>/task/*/schedstat``, time blocked on I/O from delay accounting, bytes
read from storage from ``/proc/<pid>/io``, page faults, threads, and whether the
worker was running, in disk sleep or sleeping right then). :func:`worker_resource`
turns a run's ticks into a :class:`WorkerResource`: shares of the workers' wall time
and one name for the resource, by this rule (the thresholds are the constants below):

1. Under :data:`MIN_WORKER_S` worker-seconds read: ``unknown`` (too short to say).
2. ``idle``: the workers spent :data:`IDLE_SHARE` or more of their time outside
   making a batch and not waiting for a CPU (the per-batch timing inside the workers,
   at the mean time a batch took for as many batches as the run took: one side of an
   interleaved pass takes only some of the batches the workers make; less all of their
   wait for a CPU, since a worker woken to make a batch waits for one before it starts,
   outside the timing, on a busy machine; the rest of the time they wait for the loop to
   take one: the queue is full). Without that timing:
   the loop waited for batches under :data:`LOOP_KEEPS_UP` of its time and the
   workers used a CPU (or waited for one) under half theirs.
3. Otherwise the largest of: on a CPU, blocked on I/O, and waiting otherwise (the
   rest: sleeping, a lock, the network, a pipe). Waiting for a CPU is left out of
   this comparison: on a busy machine every worker waits for one after each wake-up,
   whatever it needs; it only says whether a CPU-bound worker is contended.

   * on a CPU: ``cpu`` (CPU-bound), or ``threads`` when the workers waited for a
     CPU :data:`RUNQ_SHARE` or more of the time they wanted one (on a CPU + waiting
     for one) while the training process itself used :data:`MAIN_COMPETES_PCT` % of
     a core or more: they fight the training's threads (intra-op threads, the loop)
     for the cores. Waiting for a CPU while the training process is light (other
     processes take the cores) stays ``cpu``, with that said.
   * blocked on I/O: ``storage``.
   * waiting otherwise: ``storage`` when the workers read at least
     :data:`STORAGE_BYTES_PER_S` from storage per second of that wait (the time
     blocked on I/O was not exposed, or missed reads the kernel does not count
     as blocking); else ``waiting`` (not on a CPU, not storage).

Time blocked on I/O comes from delay accounting when it is on; when it is off
(``kernel.task_delayacct=0``, the usual default) it is estimated from how often
the workers were seen in disk sleep (``D``) at the ticks, and the reading says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from .._format import fmt_bytes, fmt_pct

__all__ = [
    "CLOSE_SHARE",
    "IDLE_SHARE",
    "LOOP_KEEPS_UP",
    "MAIN_COMPETES_PCT",
    "KINDS",
    "MIN_WORKER_S",
    "REMEDIES",
    "RUNQ_SHARE",
    "STORAGE_BYTES_PER_S",
    "WorkerResource",
    "reading_of",
    "resource_text",
    "worker_resource",
]

MIN_WORKER_S = 0.5
"""Fewer worker-seconds read than this: too short to name a resource."""
IDLE_SHARE = 0.5
"""Workers outside making a batch this share of their time or more: idle, queue full."""
LOOP_KEEPS_UP = 0.05
"""Without timing inside the workers: the loop waiting for batches under this share of
its time means the workers keep up."""
RUNQ_SHARE = 0.25
"""Waiting for a CPU this share of the time the workers want one or more: contended."""
MAIN_COMPETES_PCT = 50.0
"""The training process using this much CPU (100 = one core) or more competes."""
STORAGE_BYTES_PER_S = 1 << 20
"""Bytes from storage per second of off-CPU wait that make the wait a wait on storage."""
CLOSE_SHARE = 0.10
"""On a CPU and off it (blocked on I/O, or waiting otherwise) within this share of the
workers' time of each other: a close call. Advice that turns on which of the two holds
the workers says neither for it (two runs that read a few points apart would name each
in turn: "fewer workers", then "fewer workers would not buy it back")."""

KINDS = {
    "cpu": "the workers are CPU-bound",
    "threads": "the workers fight the training's threads for the CPUs",
    "storage": "the workers wait on storage",
    "waiting": "the workers wait, neither on a CPU nor on storage (sleep, a lock, the network)",
    "idle": "the workers sit idle with a full queue (they make batches faster than the loop takes them)",
    "unknown": "too little of the workers' time was read to name a resource",
}
"""Each resource's name in words."""

REMEDIES = {
    "cpu": (
        "more workers where cores are free, or cheaper per-sample work (cheaper transforms, "
        "done once ahead of training, or on the GPU)"
    ),
    "threads": (
        "fewer workers, or fewer intra-op threads in the training process "
        "(torch.set_num_threads), so that the two stop taking turns on the cores"
    ),
    "storage": (
        "faster storage, reading ahead (more workers or a larger prefetch_factor keep more "
        "reads in flight), or caching the files (in memory, on a local disk, or packed into "
        "fewer, larger files)"
    ),
    "waiting": (
        "more workers, to overlap the waits (a waiting worker costs little CPU), or removing "
        "what they wait on"
    ),
    "idle": "nothing on the workers' side: they are not the limit",
}
"""What usually helps, for each resource (``unknown``: nothing to say)."""


@dataclass(frozen=True)
class WorkerResource:
    """What the workers of one run spent their time on: shares of their wall time
    (``worker_s`` worker-seconds read) and the resource that holds them (``kind``: one
    of :data:`KINDS`). A share is None where the machine does not expose it;
    ``not_exposed`` says which and why."""

    kind: str
    workers: int
    worker_s: float
    on_cpu: Optional[float] = None
    runq: Optional[float] = None
    """Waiting in a run queue for a CPU."""
    blocked_io: Optional[float] = None
    io_from: Optional[str] = None
    """Where ``blocked_io`` comes from: "delayacct" (measured) or "d-state" (the share
    of ticks the workers were seen in disk sleep: an estimate)."""
    idle: Optional[float] = None
    """Outside making a batch and not waiting for a CPU: waiting for the loop to take a
    batch (None: not timed inside the workers)."""
    waiting: Optional[float] = None
    """The rest: sleeping or blocked otherwise while making a batch."""
    read_bytes: Optional[int] = None
    rchar: Optional[int] = None
    majflt: Optional[int] = None
    minflt: Optional[int] = None
    threads: Optional[int] = None
    """The most threads one worker had."""
    main_cpu_pct: Optional[float] = None
    main_threads: Optional[int] = None
    other_cpu_pct: Optional[float] = None
    cpu_count: Optional[int] = None
    loop_wait_share: Optional[float] = None
    not_exposed: tuple[str, ...] = field(default_factory=tuple)

    # -- plain data ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the run log's ``worker_resource``)."""
        d = asdict(self)
        d["not_exposed"] = list(self.not_exposed)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkerResource:
        """From :meth:`to_dict`; keys it does not know are ignored (a newer log)."""
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["not_exposed"] = tuple(kw.get("not_exposed") or ())
        return cls(**kw)

    # -- words -----------------------------------------------------------------------
    def headline(self) -> str:
        """The resource in words, with the competitor for ``threads``."""
        text = KINDS.get(self.kind, self.kind)
        if self.kind == "threads" and self.main_cpu_pct is not None:
            threads = f" with {self.main_threads} threads" if self.main_threads else ""
            cores = f" on {self.cpu_count} cores" if self.cpu_count else ""
            other = (
                f"; other processes {self.other_cpu_pct:.0f}%"
                if self.other_cpu_pct and self.other_cpu_pct >= MAIN_COMPETES_PCT
                else ""
            )
            text += (
                f" (the training process used {self.main_cpu_pct:.0f}% CPU{threads}{cores}"
                f"{other}; 100% = one core)"
            )
        elif self.kind == "cpu" and self.contended():
            other = f" ({self.other_cpu_pct:.0f}% CPU)" if self.other_cpu_pct else ""
            text += f", and wait for a CPU behind other processes{other}"
        return text

    def close_call(self) -> bool:
        """The workers were read about as long on a CPU as off it (within
        :data:`CLOSE_SHARE` of their time): whether they take CPU from the step is not
        told by this reading."""
        if self.kind not in ("cpu", "threads", "storage", "waiting") or self.on_cpu is None:
            return False
        off = max(self.blocked_io or 0.0, self.waiting or 0.0)
        return abs(self.on_cpu - off) < CLOSE_SHARE

    def contended(self) -> bool:
        """The workers waited for a CPU :data:`RUNQ_SHARE` or more of the time they
        wanted one."""
        want = (self.on_cpu or 0.0) + (self.runq or 0.0)
        return self.runq is not None and want > 0 and self.runq >= RUNQ_SHARE * want

    def numbers(self) -> str:
        """``"workers: 92% on CPU, 3% waiting for a CPU, 0% blocked on I/O, 5% idle; 0 B
        read from storage"``: the shares behind the name (a reading not exposed: left out)."""
        parts = [f"{fmt_pct(self.on_cpu)} on CPU"]
        if self.runq is not None:
            parts.append(f"{fmt_pct(self.runq)} waiting for a CPU")
        if self.blocked_io is not None:
            est = " (est.)" if self.io_from == "d-state" else ""
            parts.append(f"{fmt_pct(self.blocked_io)} blocked on I/O{est}")
        if self.waiting is not None:
            parts.append(f"{fmt_pct(self.waiting)} waiting otherwise")
        if self.idle is not None:
            parts.append(f"{fmt_pct(self.idle)} idle")
        n = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        text = f"{n}: {', '.join(parts)}"
        if self.read_bytes is not None:
            text += f"; {fmt_bytes(self.read_bytes)} read from storage"
            if self.rchar is not None and self.rchar > self.read_bytes:
                text += f" ({fmt_bytes(self.rchar)} through read calls)"
        if self.majflt:
            text += f"; {self.majflt:,} major page faults"
        return text

    def gist(self) -> str:
        """The share behind the name, for a sentence of advice: ``"92% of their time on
        CPU"``; empty for ``unknown``."""
        if self.kind in ("cpu", "threads"):
            runq = f", {fmt_pct(self.runq)} waiting for one" if self.runq is not None else ""
            return f"{fmt_pct(self.on_cpu)} of their time on a CPU{runq}"
        if self.kind == "storage":
            est = "an estimated " if self.io_from == "d-state" else ""
            said = (
                f"{est}{fmt_pct(self.blocked_io)} of their time blocked on I/O"
                if self.blocked_io
                else f"{fmt_pct(self.waiting)} of their time waiting"
            )
            read = (
                f", {fmt_bytes(self.read_bytes)} read from storage"
                if self.read_bytes is not None
                else ""
            )
            return said + read
        if self.kind == "waiting":
            return f"{fmt_pct(self.waiting)} of their time waiting, {fmt_pct(self.on_cpu)} on a CPU"
        if self.kind == "idle":
            if self.idle is not None:
                return f"{fmt_pct(self.idle)} of their time idle"
            return f"the loop waited {fmt_pct(self.loop_wait_share)} of its time"
        return ""

    def text(self) -> str:
        """One line: the numbers and the resource, then what the machine did not expose."""
        if self.kind == "unknown":
            return f"{KINDS['unknown']} ({self.worker_s:.2g} worker-seconds)."
        hidden = "; ".join(self.not_exposed)
        return f"{self.numbers()}: {self.headline()}." + (f" ({hidden}.)" if hidden else "")


def reading_of(reading: Optional[dict[str, Any]]) -> Optional[WorkerResource]:
    """A run log's ``worker_resource`` as a :class:`WorkerResource` (None: none, or not
    one this version can read)."""
    if not isinstance(reading, dict) or not reading:
        return None
    try:
        return WorkerResource.from_dict(reading)
    except (TypeError, ValueError):
        return None


def resource_text(reading: Optional[dict[str, Any]]) -> Optional[str]:
    """:meth:`WorkerResource.text` of a run log's ``worker_resource`` (None: none)."""
    found = reading_of(reading)
    return found.text() if found is not None else None


def _total(series: Any) -> Optional[float]:
    vals = [v for v in series or [] if v is not None]
    return float(sum(vals)) if vals else None


def _mean(series: Any) -> Optional[float]:
    vals = [v for v in series or [] if v is not None]
    return sum(vals) / len(vals) if len(vals) >= 2 else None


def worker_resource(
    util: Optional[dict[str, Any]],
    *,
    num_workers: Any,
    worker_load_ns: Optional[Sequence[int]] = None,
    wait_ns: Optional[Sequence[int]] = None,
    step_ns: Optional[Sequence[int]] = None,
    cpu_count: Optional[int] = None,
) -> Optional[WorkerResource]:
    """The resource the workers of a run spent their time on, from its utilisation ticks
    (``util["workers_os"]``), the per-batch times inside the workers, and the loop's
    waits and steps (see the module's rule). None: no workers (``num_workers`` 0), or no
    readings of them."""
    if not isinstance(num_workers, int) or num_workers <= 0 or not util:
        return None
    w = util.get("workers_os")
    if not isinstance(w, dict) or not w.get("alive_ns"):
        return None
    exposed = w.get("exposed") or {}
    cpu = util.get("cpu") or {}
    alive = _total(w.get("alive_ns")) or 0.0
    seen = max((v for v in cpu.get("workers") or [] if isinstance(v, int)), default=0)
    base: dict[str, Any] = {
        "workers": seen or num_workers,
        "worker_s": alive / 1e9,
        "main_cpu_pct": _mean(cpu.get("process_pct")),
        "main_threads": max((v for v in w.get("main_threads") or [] if v), default=None),
        "other_cpu_pct": _mean(cpu.get("other_pct")),
        "cpu_count": cpu_count or os.cpu_count(),
        "threads": max((v for v in w.get("threads") or [] if v), default=None),
    }
    if step_ns and wait_ns is not None and sum(step_ns):
        base["loop_wait_share"] = min(1.0, sum(wait_ns) / sum(step_ns))
    if alive / 1e9 < MIN_WORKER_S:
        return WorkerResource(kind="unknown", **base)

    def share(key: str) -> Optional[float]:
        t = _total(w.get(key))
        return None if t is None else min(1.0, t / alive)

    on = share("on_cpu_ns") or 0.0
    runq = share("runq_ns")
    hidden: list[str] = []
    if not exposed.get("proc", True):
        hidden.append("run-queue wait, I/O wait and bytes read not exposed: no /proc here")
    elif runq is None:
        hidden.append("run-queue wait not exposed (/proc/<pid>/schedstat unreadable)")
    io_from: Optional[str] = None
    blocked = share("blkio_ns")
    if blocked is not None:
        io_from = "delayacct"
    else:
        d, states = (
            _total(w.get("in_d")),
            sum(_total(w.get(k)) or 0.0 for k in ("in_r", "in_d", "in_s")),
        )
        if d is not None and states:
            blocked, io_from = d / states, "d-state"
        if exposed.get("proc", True):
            why = (
                "delay accounting off (sysctl kernel.task_delayacct=1 turns it on)"
                if exposed.get("delayacct") is False
                else "no delay accounting"
            )
            est = "; estimated from the ticks the workers were in disk sleep" if io_from else ""
            hidden.append(f"I/O wait not exposed: {why}{est}")
    read_bytes = _total(w.get("read_bytes"))
    rchar = _total(w.get("rchar"))
    if read_bytes is None and exposed.get("proc", True):
        hidden.append("bytes read not exposed (/proc/<pid>/io unreadable)")
    over = on + (runq or 0.0) + (blocked or 0.0)
    if over > 1.0:
        # the workers' counters and their alive time are read at each tick, and a tick
        # that straddles two arms' blocks charges the run time from the other arm: the
        # shares of one worker's time cannot add up to more than all of it, so they are
        # scaled to it, each keeping its part
        on, runq = on / over, None if runq is None else runq / over
        blocked = None if blocked is None else blocked / over
    idle: Optional[float] = None
    if worker_load_ns:
        # the timing inside the workers covers every batch they made; the ticks, only the
        # run's own time (one side of an interleaved pass, whose cache fill and other arms
        # also drew batches): the batches the run took, at the mean time a batch took
        taken = len(step_ns) if step_ns else len(worker_load_ns)
        made = sum(worker_load_ns) / len(worker_load_ns) * min(taken, len(worker_load_ns))
        # a wait for a CPU outside the timing (woken with a batch to make) is no idling:
        # all of it is taken out, so that a busy machine never makes workers look idle
        idle = max(0.0, 1.0 - made / alive - (runq or 0.0))
    want = on + (runq or 0.0)
    blocked_s = blocked or 0.0
    rest = max(0.0, 1.0 - want - blocked_s - (idle or 0.0))
    reading = dict(
        base,
        on_cpu=on,
        runq=runq,
        blocked_io=blocked,
        io_from=io_from,
        idle=idle,
        waiting=rest,
        read_bytes=None if read_bytes is None else int(read_bytes),
        rchar=None if rchar is None else int(rchar),
        majflt=None if _total(w.get("majflt")) is None else int(_total(w.get("majflt")) or 0),
        minflt=None if _total(w.get("minflt")) is None else int(_total(w.get("minflt")) or 0),
        not_exposed=tuple(hidden),
    )
    return WorkerResource(kind=_classify(reading), **reading)


def _classify(r: dict[str, Any]) -> str:
    """The module's rule, on the shares of :func:`worker_resource`."""
    on, runq, idle = r["on_cpu"], r["runq"], r["idle"]
    want = on + (runq or 0.0)
    if idle is not None and idle >= IDLE_SHARE:
        return "idle"
    loop = r.get("loop_wait_share")
    if idle is None and loop is not None and loop < LOOP_KEEPS_UP and want < 0.5:
        return "idle"
    blocked, rest = r["blocked_io"] or 0.0, r["waiting"]
    if on >= blocked and on >= rest:
        contended = runq is not None and want > 0 and runq >= RUNQ_SHARE * want
        main = r.get("main_cpu_pct")
        if contended and main is not None and main >= MAIN_COMPETES_PCT:
            return "threads"
        return "cpu"
    if blocked >= rest:
        return "storage"
    wait_s = rest * r["worker_s"]
    read = r.get("read_bytes")
    if read is not None and wait_s > 0 and read / wait_s >= STORAGE_BYTES_PER_S:
        return "storage"
    return "waiting"
