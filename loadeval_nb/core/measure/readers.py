"""What the sampler reads: GPU utilisation and memory through NVML (initialised once per
process, failing soft with one line) and CPU time of this process and its loader workers.

These readers run on the sampler's thread (see :mod:`.sampler`); they never raise.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import weakref
from typing import Any, Callable, Optional

log = logging.getLogger("loadeval_nb")

_nvml_lock = threading.Lock()
_nvml_state: dict[str, Any] = {}


def _visible_indices(count: int) -> list[int]:
    """NVML indices of the GPUs this process may use (``CUDA_VISIBLE_DEVICES`` as integers)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None or env.strip() == "":
        return list(range(count)) if env is None else []
    out = []
    for part in env.split(","):
        part = part.strip()
        if not part.isdigit():  # UUIDs or MIG names: fall back to all devices
            return list(range(count))
        if int(part) < count:
            out.append(int(part))
    return out


def init_nvml() -> dict[str, Any]:
    """Initialise NVML once per process; remember why it failed if it did."""
    with _nvml_lock:
        if _nvml_state:
            return _nvml_state
        try:
            import pynvml  # provided by nvidia-ml-py

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            devices = []
            for i in _visible_indices(count):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                if isinstance(name, bytes):
                    name = name.decode()
                devices.append({"index": i, "name": str(name), "handle": h})
            if not devices:
                raise RuntimeError("no NVIDIA GPU is visible to this process")
            _nvml_state.update(available=True, reason=None, pynvml=pynvml, devices=devices)
        except Exception as e:  # no driver, no library, no device
            reason = _nvml_reason(e)
            _nvml_state.update(available=False, reason=reason, devices=[])
            log.warning("loadeval_nb: %s; GPU utilisation is recorded as null.", reason)
        return _nvml_state


def _nvml_reason(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    if isinstance(e, ImportError):
        return "pynvml is not installed (pip install nvidia-ml-py)"
    if "NVML Shared Library Not Found" in text or "libnvidia-ml" in text:
        return "no NVIDIA driver found (NVML library missing)"
    if "Driver Not Loaded" in text:
        return "the NVIDIA driver is not loaded"
    return f"no GPU readings ({text})"


def gpu_status() -> dict[str, Any]:
    """``{"available": bool, "reason": str | None, "devices": [{"index", "name"}]}``."""
    st = init_nvml()
    return {
        "available": bool(st.get("available")),
        "reason": st.get("reason"),
        "devices": [{"index": d["index"], "name": d["name"]} for d in st.get("devices", [])],
    }


_LINUX = sys.platform.startswith("linux")


def _cpu_clock(pid: int) -> int:
    """Linux's CPU-time clock of process ``pid`` (``clock_getcpuclockid``): read with
    ``time.clock_gettime_ns``, one system call that keeps the GIL, no file."""
    return ((~pid) << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)


class CpuReader:
    """CPU % (100 = one core) of this process and of its child processes (loader workers).

    A reading is made to hand the GIL to the training loop as rarely as possible: each file
    read releases it, and taking it back waits for the loop's next switch (5 ms) and then
    interrupts it. On Linux a worker's CPU time is its CPU clock (no file), the machine's
    is one ``pread`` of ``/proc/stat`` on a file kept open, and when the evaluator knows
    its loader's workers, no directory is listed: one release a reading. Elsewhere psutil.
    """

    def __init__(self, clock: Callable[[], int]) -> None:
        import psutil

        self._clock = clock
        self._me = psutil.Process()
        self._children: dict[int, Any] = {}
        self._last: dict[int, float] = {}
        self._last_t: Optional[int] = None
        self._ticks = 0
        self._cap = 100.0 * (os.cpu_count() or 1)
        self.min_dt_ns = 0
        self.worker_pids: Optional[Callable[[], Optional[set[int]]]] = None
        """The DataLoader's worker pids now (None: count every child process)."""
        self._psutil = psutil
        self._stat_fd: Optional[int] = None
        if _LINUX:
            try:
                self._stat_fd = os.open("/proc/stat", os.O_RDONLY)
                self._ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
                weakref.finalize(self, os.close, self._stat_fd)
            except (OSError, ValueError):
                self._stat_fd = None

    def reset(self) -> None:
        """The next reading only primes (a paused stretch is not a rate of this run), and
        the next readings list the children again (a new epoch starts new workers)."""
        self._last, self._last_t = {}, None
        self._ticks = 1

    def _list_children(self) -> list[Any]:
        """This process's children. psutil's recursive walk reads /proc/*/stat of every
        process on the machine; while the training loop holds the GIL, each read waits a
        GIL switch (5 ms), so one walk took 250 ms. Linux lists a task's children in
        /proc/self/task/*/children (loader workers are direct children): a few reads."""
        import psutil

        try:
            pids: list[int] = []
            for tid in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{tid}/children") as f:
                    pids += [int(x) for x in f.read().split()]
        except OSError:
            return list(self._me.children(recursive=True))
        out = []
        for pid in pids:
            p = self._children.get(pid)
            if p is None:
                try:
                    p = psutil.Process(pid)
                except psutil.Error:
                    continue
            out.append(p)
        return out

    def _cpu_s(self, p: Any) -> Optional[float]:
        if p is self._me:  # no file to read for our own process: a clock, GIL held
            return time.process_time_ns() / 1e9
        try:
            t = p.cpu_times()
            return float(t.user + t.system)
        except Exception:  # exited, zombie or not ours
            return None

    def _pid_cpu_s(self, pid: int, p: Any) -> Optional[float]:
        if _LINUX:
            try:
                return time.clock_gettime_ns(_cpu_clock(pid)) / 1e9
            except OSError:  # exited (or not visible): no reading
                return None
        return self._cpu_s(p)

    def _system_busy_s(self) -> Optional[float]:
        """CPU seconds every process on the machine has used (all cores), from /proc/stat."""
        if self._stat_fd is not None:
            try:
                line = os.pread(self._stat_fd, 512, 0).split(b"\n", 1)[0].split()
                # cpu user nice system idle iowait irq softirq steal guest guest_nice; guest
                # time is inside user/nice already
                v = [int(x) for x in line[1:11]]
                busy = sum(v[:8]) - v[3] - v[4]
                return busy / self._ticks_per_s
            except (OSError, ValueError, IndexError):
                pass
        try:
            t = self._psutil.cpu_times()
            # guest time is inside user/nice already (psutil leaves it in both)
            counted = t.idle + sum(getattr(t, k, 0.0) for k in ("iowait", "guest", "guest_nice"))
            return float(sum(t) - counted)
        except Exception:
            return None

    def read(
        self, final: bool = False
    ) -> tuple[Optional[float], Optional[float], int, Optional[float]]:
        """CPU % over the time since the last reading (100 = one core): this process, its
        DataLoader workers, how many workers, and every other process on the machine."""
        # Listing children walks /proc (milliseconds): skip it on the first tick (the
        # workers are not started yet) and the last one (stop() waits for it); do it
        # every tick for the next 2 s (workers are starting), then every 10th tick.
        t = self._ticks
        try:
            wanted = self.worker_pids() if self.worker_pids is not None else None
        except Exception:
            wanted = None
        unseen = wanted is not None and not wanted.issubset(self._children)
        if _LINUX and wanted is not None:
            # the evaluator knows its workers: read their CPU clocks, list nothing
            self._children = dict.fromkeys(wanted)
        elif not final and 0 < t and (t < 20 or t % 10 == 0 or unseen):
            try:
                kids = self._list_children()
                self._children = {p.pid: p for p in kids}
            except Exception:
                pass
        self._ticks += 1
        now = self._clock()
        me = self._cpu_s(self._me)
        cur = {0: me} if me is not None else {}
        system = self._system_busy_s()
        if system is not None:
            cur[-1] = system
        for pid, p in list(self._children.items()):
            v = self._pid_cpu_s(pid, p)
            if v is None:
                del self._children[pid]
            else:
                cur[pid] = v
        kids = [pid for pid in cur if pid > 0]
        n_workers = len(kids) if wanted is None else len(wanted.intersection(kids))
        proc = workers = other = None
        if self._last_t is not None and now - self._last_t < self.min_dt_ns:
            # too soon after the last reading: CPU times tick in 10 ms steps, so a rate over
            # a few ms reads 0 % or 1,000 %; keep the older reading as the base
            return None, None, n_workers, None
        if self._last_t is not None and now > self._last_t:
            dt = (now - self._last_t) / 1e9
            cap = self._cap

            def rate(key: int) -> Optional[float]:
                if key not in cur or key not in self._last:
                    return None
                return min(cap, max(0.0, (cur[key] - self._last[key]) / dt * 100))

            proc = rate(0)
            children = {pid: rate(pid) or 0.0 for pid in kids}
            workers = min(
                cap, sum(v for pid, v in children.items() if wanted is None or pid in wanted)
            )
            system = rate(-1)
            if system is not None:  # ours: this process and its loader's workers
                other = min(cap, max(0.0, system - (proc or 0.0) - workers))
        self._last, self._last_t = cur, now
        return proc, workers, n_workers, other
