"""Background utilisation samplers: GPU (NVML) and CPU (psutil).

One daemon thread per sampler samples every ``interval_s`` (10 Hz by default)
while a run goes, on a drift-corrected schedule (``next_tick += interval``; a
tick that is already late is skipped, not bunched). The thread only appends to
lists; readers copy them. It is started once and then paused and resumed (an
event, no thread start or join on the loop's path at each epoch); everything it
needs (imports, NVML, psutil, the first reading) is set up by the first
``start()``, before the first timed step. It ends at ``stop()`` or when the
sampler is collected.

Optional integrations fail soft: without the NVIDIA driver, ``pynvml`` or a GPU,
one log line says so (once per process) and the GPU series are ``None`` (never
zeros); without psutil the CPU series are ``None``. What the workers spend their time on
(on a CPU, waiting for one, blocked on I/O, bytes read: ``workers_os``) is read from the
operating system at the same ticks (:class:`~.readers.ProcReader`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Optional

from ..record.run import gpu_mean_per_tick
from .readers import PROC_KEYS, CpuReader, ProcReader, init_nvml

log = logging.getLogger("loadeval_nb")


def next_deadline(previous: int, interval: int, now: int) -> int:
    """Drift-corrected schedule: the next tick after ``previous``, skipping missed ones.

    >>> next_deadline(100, 10, 105)
    110
    >>> next_deadline(100, 10, 137)  # late: skip to the next tick still ahead
    140
    """
    nxt = previous + interval
    if nxt <= now:
        nxt += ((now - nxt) // interval + 1) * interval
    return nxt


def _sampler_thread(
    ref: weakref.ref[UtilSampler], wake: threading.Event, interval: int, clock: Callable[[], int]
) -> None:
    """The sampling thread. It holds the sampler only weakly between readings, so a sampler
    nobody holds is collected and the thread ends."""
    deadline = clock()
    while True:
        s = ref()
        if s is None:
            return
        if s._ended:
            if s._ended == "read":
                s._sample(final=True)  # stop(): a last reading at the very end
            return
        if not s._active:
            s._sample(final=True)  # pause(): the epoch's last reading, then sleep
            del s
            wake.wait()
            wake.clear()
            s = ref()
            if s is None:
                return
            if s._active:
                s._sample()  # resumed: the first reading of the next stretch
                deadline = clock()
            del s
            continue
        del s
        now = clock()
        deadline = next_deadline(deadline, interval, now)
        if wake.wait((deadline - now) / 1e9):
            wake.clear()
            continue  # paused, resumed or stopped: look again
        s = ref()
        if s is not None and s._active:
            s._sample()
        del s


class UtilSampler:
    """Samples GPU and CPU utilisation on a background thread between ``start()`` and ``stop()``.

    Series accumulate over several start/stop cycles (one per epoch). Times are
    clock values (ns) from ``clock``, the same clock as the step stamps.
    """

    def __init__(
        self,
        interval_s: float = 0.1,
        *,
        gpu: bool = True,
        cpu: bool = True,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be a positive number of seconds, not {interval_s!r}")
        self.interval_s = float(interval_s)
        self._clock = clock
        self._want_gpu = gpu
        self._want_cpu = cpu
        self._thread: Optional[threading.Thread] = None
        self._wake = threading.Event()
        self._active = False
        self._ended = ""
        """Set by stop(): "read" (take a last reading) or "quiet" (already paused)."""
        self._pynvml: Any = None
        self._handles: list[Any] = []
        self._cpu_reader: Optional[CpuReader] = None
        self._proc_reader: Optional[ProcReader] = None
        weakref.finalize(self, self._wake.set)  # a collected sampler ends its thread
        self.t_ns: list[int] = []
        self.process_cpu_pct: Optional[list[Optional[float]]] = [] if cpu else None
        self.workers_cpu_pct: Optional[list[Optional[float]]] = [] if cpu else None
        self.num_workers_seen: Optional[list[int]] = [] if cpu else None
        self.other_cpu_pct: Optional[list[Optional[float]]] = [] if cpu else None
        """CPU % of every other process on the machine (not ours): a busy machine."""
        self.workers_os: Optional[dict[str, list[Optional[int]]]] = (
            {k: [] for k in PROC_KEYS} if cpu else None
        )
        """Per tick, what the workers spent the time since the last tick on (the keys of
        :data:`~.readers.PROC_KEYS`; None entries: not exposed)."""
        self.worker_pids: Optional[Callable[[], Optional[set[int]]]] = None
        """The DataLoader's worker pids now, so that "workers" counts them only."""
        self.gpu_available = False
        self.gpu_reason: Optional[str] = "GPU sampling disabled" if not gpu else None
        self.gpu_devices: list[dict[str, Any]] = []
        self.gpu_util_pct: Optional[list[list[Optional[float]]]] = None
        self.gpu_mem_used_bytes: Optional[list[list[Optional[int]]]] = None
        self.gpu_other_procs: Optional[list[Optional[int]]] = None
        """Per tick, how many other processes ran work on the visible GPUs (NVML)."""
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    @property
    def running(self) -> bool:
        """Sampling now (started or resumed, not paused or stopped)."""
        return self._active

    def start(self) -> None:
        """Start sampling, or resume after :meth:`pause` (no-op if running). The first call
        sets everything up and takes the first reading here, before the caller goes on."""
        if self._active:
            return
        t = self._thread
        if t is None or not t.is_alive():
            self._reset_readers()  # restarted after stop(): not a rate over the gap
            self._setup()
            self._sample()  # the first reading primes the CPU rates, off the timed steps
            self._active = True
            self._wake.clear()
            self._thread = threading.Thread(
                target=_sampler_thread,
                args=(weakref.ref(self), self._wake, int(self.interval_s * 1e9), self._clock),
                name="loadeval-sampler",
                daemon=True,
            )
            self._thread.start()
            return
        self._reset_readers()
        self._active = True
        self._wake.set()  # the thread takes a reading now and goes on with its schedule

    def _reset_readers(self) -> None:
        if self._cpu_reader is not None:
            self._cpu_reader.reset()
        if self._proc_reader is not None:
            self._proc_reader.reset()

    def pause(self) -> None:
        """Stop sampling until the next :meth:`start`, without waiting: the thread takes a
        last reading and sleeps (an epoch's end; nothing is started or joined)."""
        if self._active:
            self._active = False
            self._wake.set()

    def stop(self) -> None:
        """Stop sampling and end the thread, waiting for its last reading (no-op if not
        started)."""
        was_active, self._active = self._active, False
        t = self._thread
        if t is None:
            return
        # paused: the last reading was taken at the pause; one now would rate the idle gap
        self._ended = "read" if was_active else "quiet"
        self._wake.set()
        if t is not threading.current_thread():
            t.join()
        self._thread = None
        self._ended = ""
        if self._proc_reader is not None:
            self._proc_reader.close()  # its open /proc files; reopened if started again

    def _setup(self) -> None:
        handles: list[Any] = []
        pynvml = None
        if self._want_gpu:
            st = init_nvml()
            self.gpu_available = bool(st.get("available"))
            self.gpu_reason = st.get("reason")
            if self.gpu_available:
                pynvml = st["pynvml"]
                handles = [d["handle"] for d in st["devices"]]
                if not self.gpu_devices:
                    self.gpu_devices = [
                        {"index": d["index"], "name": d["name"]} for d in st["devices"]
                    ]
                    self.gpu_util_pct = [[None] * len(self.t_ns) for _ in handles]
                    self.gpu_other_procs = [None] * len(self.t_ns)
                    self.gpu_mem_used_bytes = [[None] * len(self.t_ns) for _ in handles]
        self._pynvml, self._handles = pynvml, handles
        if self._want_cpu and self._cpu_reader is None:
            try:
                self._cpu_reader = CpuReader(self._clock)
                self._cpu_reader.min_dt_ns = int(self.interval_s * 1e9 / 2)
                self._cpu_reader.worker_pids = self.worker_pids
                self._cpu_reader._list_children()  # its imports, before the loop
            except Exception as e:  # psutil missing or unusable
                log.warning(
                    "loadeval_nb: no CPU readings (%s); CPU utilisation is recorded as null.", e
                )
        if self._want_cpu and self._proc_reader is None:
            try:
                self._proc_reader = ProcReader(self._clock)
            except Exception as e:  # pragma: no cover - /proc missing where it should be
                log.warning("loadeval_nb: no readings of the workers' time (%s).", e)

    def _sample(self, final: bool = False) -> None:
        pynvml, handles, cpu_reader = self._pynvml, self._handles, self._cpu_reader
        t = self._clock()
        utils: list[Optional[float]] = []
        mems: list[Optional[int]] = []
        for h in handles:
            try:
                utils.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
            except Exception:
                utils.append(None)
            try:
                mems.append(int(pynvml.nvmlDeviceGetMemoryInfo(h).used))
            except Exception:
                mems.append(None)
        others = self._gpu_others(pynvml, handles, cpu_reader) if handles else None
        proc = workers = other = None
        nw = 0
        if cpu_reader is not None:
            try:
                proc, workers, nw, other = cpu_reader.read(final)
            except Exception:
                pass
        os_reading = self._read_os(cpu_reader)
        with self._lock:
            self.t_ns.append(t)
            if self.gpu_util_pct is not None and self.gpu_mem_used_bytes is not None:
                for i in range(len(self.gpu_util_pct)):
                    self.gpu_util_pct[i].append(utils[i] if i < len(utils) else None)
                    self.gpu_mem_used_bytes[i].append(mems[i] if i < len(mems) else None)
                if self.gpu_other_procs is not None:
                    self.gpu_other_procs.append(others)
            if self.process_cpu_pct is not None:
                self.process_cpu_pct.append(proc)
                self.workers_cpu_pct.append(workers)  # type: ignore[union-attr]
                self.num_workers_seen.append(nw)  # type: ignore[union-attr]
                self.other_cpu_pct.append(other)  # type: ignore[union-attr]
            if self.workers_os is not None:
                for key, series in self.workers_os.items():
                    series.append(os_reading.get(key) if os_reading is not None else None)

    def _read_os(self, cpu_reader: Optional[CpuReader]) -> Optional[dict[str, Optional[int]]]:
        """The workers' time from the operating system: the pids the CPU reader read."""
        reader = self._proc_reader
        if reader is None:
            return None
        try:
            if cpu_reader is not None:
                pids: Any = list(cpu_reader._children)
            else:
                pids = (self.worker_pids() if self.worker_pids is not None else None) or ()
            return reader.read(pids)
        except Exception:
            return None

    @property
    def workers_os_exposed(self) -> dict[str, Optional[bool]]:
        """Which of the workers' readings this machine exposes (``schedstat``: run-queue
        wait; ``io``: bytes read; ``delayacct``: time blocked on I/O; ``proc``: Linux's
        /proc at all); empty before the first start."""
        return dict(self._proc_reader.exposed) if self._proc_reader is not None else {}

    @staticmethod
    def _gpu_others(pynvml: Any, handles: list[Any], cpu_reader: Any) -> Optional[int]:
        """How many processes that are not this one or its children run work on the
        visible GPUs (None: NVML cannot say)."""
        ours = {os.getpid(), *(cpu_reader._children if cpu_reader is not None else ())}
        pids: set[int] = set()
        try:
            for h in handles:
                pids.update(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h))
        except Exception:  # not supported (MIG, some drivers) or no permission
            return None
        return len(pids - ours)

    # -- reading ---------------------------------------------------------------
    def since(self, k: int) -> tuple[dict[str, list[Any]], int]:
        """Samples taken from index ``k`` on, for live plots: ``t_ns``, ``gpu_pct`` (mean over
        GPUs, NaN without a reading; absent without a GPU), ``process_cpu_pct``,
        ``workers_cpu_pct`` (NaN where unknown). Returns (data, next k)."""
        nan = float("nan")
        with self._lock:
            n = len(self.t_ns)
            out: dict[str, list[Any]] = {"t_ns": self.t_ns[k:n]}
            if self.gpu_util_pct is not None:
                per_tick = gpu_mean_per_tick([dev[k:n] for dev in self.gpu_util_pct])
                out["gpu_pct"] = [nan if v is None else v for v in per_tick]
            for key, series in (
                ("process_cpu_pct", self.process_cpu_pct),
                ("workers_cpu_pct", self.workers_cpu_pct),
            ):
                vals = series[k:n] if series is not None else [None] * (n - k)
                out[key] = [nan if v is None else v for v in vals]
        return out, n

    def series(self, t0_ns: int = 0, since: int = 0) -> dict[str, Any]:
        """A JSON-ready copy of everything sampled so far (ticks from index ``since`` on);
        times relative to ``t0_ns``."""
        k = since
        with self._lock:

            def cut(s: Optional[list[Any]]) -> Optional[list[Any]]:
                return list(s[k:]) if s is not None else None

            return {
                "interval_s": self.interval_s,
                "t_ns": [t - t0_ns for t in self.t_ns[k:]],
                "gpu": {
                    "available": self.gpu_available,
                    "reason": self.gpu_reason,
                    "devices": [dict(d) for d in self.gpu_devices],
                    "util_pct": [s[k:] for s in self.gpu_util_pct]
                    if self.gpu_util_pct is not None
                    else None,
                    "mem_used_bytes": [s[k:] for s in self.gpu_mem_used_bytes]
                    if self.gpu_mem_used_bytes is not None
                    else None,
                    "other_procs": cut(self.gpu_other_procs),
                },
                "cpu": {
                    "process_pct": cut(self.process_cpu_pct),
                    "workers_pct": cut(self.workers_cpu_pct),
                    "workers": cut(self.num_workers_seen),
                    "other_pct": cut(self.other_cpu_pct),
                },
                **(
                    {
                        "workers_os": {
                            **{key: list(v[k:]) for key, v in self.workers_os.items()},
                            "exposed": self.workers_os_exposed,
                        }
                    }
                    if self.workers_os is not None
                    else {}
                ),
            }


def ticks_within(
    series: dict[str, Any], spans: list[tuple[int, Optional[int]]], t0: int, first: int = 0
) -> dict[str, Any]:
    """``series`` (times relative to ``t0``) cut to the ticks inside ``spans`` (clock
    times; an end of None: still open), from the ``first`` of those on: one side's
    utilisation in an interleaved pass."""
    t = series.get("t_ns") or []
    inside = [any(a - t0 <= x and (b is None or x <= b - t0) for a, b in spans) for x in t]
    keep, seen = [], 0
    for k in inside:
        keep.append(k and seen >= first)
        seen += k

    def cut(v: Any) -> Any:
        if isinstance(v, list) and len(v) == len(t):
            return [x for x, k in zip(v, keep) if k]
        if isinstance(v, list) and v and all(isinstance(x, list) and len(x) == len(t) for x in v):
            return [[x for x, k in zip(d, keep) if k] for d in v]
        return v

    out = {k: cut(v) for k, v in series.items()}
    for part in ("gpu", "cpu", "workers_os"):
        if isinstance(series.get(part), dict):
            out[part] = {k: cut(v) for k, v in series[part].items()}
    return out
