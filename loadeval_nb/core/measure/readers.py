"""What the sampler reads: GPU utilisation and memory through NVML (initialised once per
process, failing soft with one line), CPU time of this process and its loader workers, and
what the operating system says each worker spent its time on (:class:`ProcReader`).

These readers run on the sampler's thread (see :mod:`.sampler`); they never raise.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
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
            # said once per command: a process whose parent said it (the script runner's
            # children, set NVML_SAID_ENV) keeps it to the debug log
            say = log.debug if os.environ.get(NVML_SAID_ENV) else log.warning
            say("loadeval_nb: %s; GPU utilisation is recorded as null.", reason)
        return _nvml_state


NVML_SAID_ENV = "LOADEVAL_NB_NVML_SAID"
"""Set (to 1) in the environment of processes whose parent has said why there are no GPU
readings: they do not say it again."""


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


# -- what each worker spends its time on (Linux /proc) ------------------------------------

PROC_KEYS = (
    "alive_ns",
    "on_cpu_ns",
    "runq_ns",
    "blkio_ns",
    "read_bytes",
    "rchar",
    "majflt",
    "minflt",
    "threads",
    "in_r",
    "in_d",
    "in_s",
    "main_threads",
)
"""The per-tick series :class:`ProcReader` gives, summed over the workers: ``alive_ns`` is
the wall time the deltas cover (each worker read at both ends counts its interval),
``on_cpu_ns`` and ``runq_ns`` time on a CPU and waiting in a run queue (all the worker's
threads), ``blkio_ns`` time blocked on block I/O (delay accounting), ``read_bytes`` bytes
fetched from storage, ``rchar`` bytes through read calls, ``majflt``/``minflt`` page faults;
``threads`` is the most threads one worker had, ``in_r``/``in_d``/``in_s`` how many workers
were running or runnable, in disk sleep, or sleeping at the tick, ``main_threads`` this
process's threads. None: the machine does not expose that reading."""

_BUF = 4096


def _gil_pread() -> Optional[Callable[[int], bytes]]:
    """``pread(fd, 4096, 0)`` that keeps the GIL (libc through ``ctypes.PyDLL``): reading
    a /proc file takes microseconds, and each ``os.pread`` would hand the GIL away and wait
    a switch interval (5 ms) for it, interrupting the training loop once per file."""
    try:
        import ctypes

        libc = ctypes.PyDLL(None, use_errno=True)
        fn = libc.pread
        fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64]
        fn.restype = ctypes.c_ssize_t
        buf = ctypes.create_string_buffer(_BUF)
    except Exception:  # no ctypes, or no libc symbol: the ordinary call
        return None

    def read(fd: int) -> bytes:
        n = fn(fd, buf, _BUF, 0)
        if n < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return buf.raw[:n]

    return read


def delayacct_state() -> Optional[bool]:
    """Whether the kernel's delay accounting is on (``kernel.task_delayacct``), which
    fills a process's time blocked on I/O (``/proc/<pid>/stat`` field 42); None: unknown."""
    try:
        with open("/proc/sys/kernel/task_delayacct") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


class _Proc:
    """The open /proc files of one worker: ``stat``, ``io`` and each thread's
    ``schedstat``, kept open and read from offset 0 (a file of a process that exited reads
    ESRCH: the pid is never mistaken for a new process that got the same number)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.stat = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        try:
            self.io: Optional[int] = os.open(f"/proc/{pid}/io", os.O_RDONLY)
        except OSError:
            self.io = None
        self.tasks: dict[int, int] = {}

    def refresh_tasks(self) -> None:
        tids = {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}
        for tid in set(self.tasks) - tids:
            os.close(self.tasks.pop(tid))
        for tid in tids - set(self.tasks):
            try:
                self.tasks[tid] = os.open(f"/proc/{self.pid}/task/{tid}/schedstat", os.O_RDONLY)
            except OSError:
                pass

    def close(self) -> None:
        for fd in (self.stat, self.io, *self.tasks.values()):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.tasks = {}
        self.io = None


def _close_all(procs: dict[int, _Proc]) -> None:
    for p in procs.values():
        p.close()
    procs.clear()


class ProcReader:
    """Per tick, what the DataLoader's workers spent the time since the last reading on,
    from the operating system (see :data:`PROC_KEYS`): Linux's ``/proc/<pid>/stat``,
    ``/proc/<pid>/io`` and ``/proc/<pid>/task/*/schedstat``, each kept open and read with
    the GIL held (microseconds). Elsewhere psutil gives CPU time and threads, and the rest
    is None. Readings that the machine does not expose are None and said in
    :attr:`exposed` (``schedstat``, ``io``, ``delayacct``: True, False or None unknown).
    Never raises from :meth:`read`."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._procs: dict[int, _Proc] = {}
        self._last: dict[int, dict[str, Any]] = {}
        self._last_t: Optional[int] = None
        self._pread = (_gil_pread() if _LINUX else None) or (lambda fd: os.pread(fd, _BUF, 0))
        self._hz = float(os.sysconf("SC_CLK_TCK")) if _LINUX else 100.0
        self._self_stat: Optional[int] = None
        self.exposed: dict[str, Optional[bool]] = {
            "proc": _LINUX,
            "schedstat": None,
            "io": None,
            "delayacct": delayacct_state() if _LINUX else None,
        }
        if _LINUX:
            try:
                self._self_stat = os.open("/proc/self/stat", os.O_RDONLY)
                weakref.finalize(self, os.close, self._self_stat)
            except OSError:
                self._self_stat = None
        weakref.finalize(self, _close_all, self._procs)

    def reset(self) -> None:
        """The next reading only primes (a paused stretch is not part of the run)."""
        self._last, self._last_t = {}, None

    def close(self) -> None:
        _close_all(self._procs)

    def _stat_fields(self, fd: int) -> list[bytes]:
        raw = self._pread(fd)
        return raw[raw.rindex(b")") + 2 :].split()  # the name may hold spaces and ')'

    def _read_pid(self, pid: int) -> Optional[dict[str, Any]]:
        if not _LINUX:
            return self._read_psutil(pid)
        p = self._procs.get(pid)
        try:
            if p is None:
                p = self._procs[pid] = _Proc(pid)
            f = self._stat_fields(p.stat)
        except (OSError, ValueError):
            if p is not None:
                self._procs.pop(pid, None)
                p.close()
            return None
        try:
            threads = int(f[17])
            out: dict[str, Any] = {
                "state": f[0][:1].decode(),
                "minflt": int(f[7]),
                "majflt": int(f[9]),
                "cpu_ns": round((int(f[11]) + int(f[12])) * 1e9 / self._hz),
                "threads": threads,
                "blkio_ns": round(int(f[39]) * 1e9 / self._hz) if len(f) > 39 else None,
            }
        except (ValueError, IndexError):
            return None
        try:  # every thread's run time and run-queue wait, in ns
            if len(p.tasks) != threads:
                p.refresh_tasks()
            run = wait = 0
            for fd in p.tasks.values():
                v = self._pread(fd).split()
                run, wait = run + int(v[0]), wait + int(v[1])
            out["run_ns"], out["wait_ns"] = (run, wait) if p.tasks else (None, None)
        except (OSError, ValueError, IndexError):
            out["run_ns"] = out["wait_ns"] = None
        out["read_bytes"] = out["rchar"] = None
        if p.io is not None:
            try:
                io = dict(
                    line.split(b": ") for line in self._pread(p.io).splitlines() if b": " in line
                )
                out["read_bytes"], out["rchar"] = int(io[b"read_bytes"]), int(io[b"rchar"])
            except (OSError, ValueError, KeyError):
                pass  # hidden (a hardened /proc, another user): not exposed
        return out

    def _read_psutil(self, pid: int) -> Optional[dict[str, Any]]:
        try:
            import psutil

            proc = psutil.Process(pid)
            t = proc.cpu_times()
            return {
                "state": None,
                "cpu_ns": round((t.user + t.system) * 1e9),
                "threads": proc.num_threads(),
            }
        except Exception:
            return None

    def _main_threads(self) -> Optional[int]:
        if self._self_stat is None:
            return None
        try:
            return int(self._stat_fields(self._self_stat)[17])
        except (OSError, ValueError, IndexError):
            return None

    def read(self, pids: Iterable[int]) -> dict[str, Optional[int]]:
        """One tick: the workers ``pids`` now, as deltas since the last reading (a worker
        first seen now only primes its counters). Keys: :data:`PROC_KEYS`."""
        now = self._clock()
        cur: dict[int, dict[str, Any]] = {}
        try:
            for pid in pids:
                r = self._read_pid(pid)
                if r is not None:
                    cur[pid] = r
            for pid in set(self._procs) - set(cur):
                self._procs.pop(pid).close()
        except Exception:  # a reading is a bonus: never break the sampler
            cur = {}
        out: dict[str, Optional[int]] = dict.fromkeys(PROC_KEYS, 0)
        dt = now - self._last_t if self._last_t is not None else 0
        runq_seen = io_seen = False
        for pid, r in cur.items():
            st = r.get("state")
            for key, s in (("in_r", "R"), ("in_d", "D"), ("in_s", "S")):
                out[key] = (out[key] or 0) + (st == s)
            out["threads"] = max(out["threads"] or 0, r.get("threads") or 0)
            last = self._last.get(pid)
            if last is None or dt <= 0:
                continue

            def delta(key: str, r: dict[str, Any] = r, last: dict[str, Any] = last) -> Any:
                a, b = r.get(key), last.get(key)
                return max(0, a - b) if a is not None and b is not None else None

            out["alive_ns"] = (out["alive_ns"] or 0) + dt
            run = delta("run_ns")
            out["on_cpu_ns"] = (out["on_cpu_ns"] or 0) + (
                run if run is not None else (delta("cpu_ns") or 0)
            )
            for key, src in (
                ("runq_ns", "wait_ns"),
                ("read_bytes", "read_bytes"),
                ("rchar", "rchar"),
                ("majflt", "majflt"),
                ("minflt", "minflt"),
                ("blkio_ns", "blkio_ns"),
            ):
                d = delta(src)
                if d is not None:
                    out[key] = (out[key] or 0) + d
            runq_seen |= r.get("wait_ns") is not None
            io_seen |= r.get("read_bytes") is not None
        if cur:
            self.exposed["schedstat"] = self.exposed["schedstat"] or runq_seen
            self.exposed["io"] = self.exposed["io"] or io_seen
        if not runq_seen:
            out["runq_ns"] = None
        if not io_seen:
            out["read_bytes"] = out["rchar"] = None
        if not self.exposed["delayacct"]:
            out["blkio_ns"] = None
        if not _LINUX:
            out["majflt"] = out["minflt"] = out["in_r"] = out["in_d"] = out["in_s"] = None
        out["main_threads"] = self._main_threads()
        self._last, self._last_t = cur, now
        return out
