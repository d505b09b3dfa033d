"""Background utilisation samplers: GPU (NVML) and CPU (psutil).

One daemon thread per evaluator samples every ``interval_s`` (10 Hz by default)
while a run goes, on a drift-corrected schedule (``next_tick += interval``; a
tick that is already late is skipped, not bunched). The thread only appends to
lists; readers copy them.

Optional integrations fail soft: without the NVIDIA driver, ``pynvml`` or a GPU,
one log line says so (once per process) and the GPU series are ``None`` (never
zeros); without psutil the CPU series are ``None``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
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


def _init_nvml() -> dict[str, Any]:
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
    st = _init_nvml()
    return {
        "available": bool(st.get("available")),
        "reason": st.get("reason"),
        "devices": [{"index": d["index"], "name": d["name"]} for d in st.get("devices", [])],
    }


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


def gpu_mean_per_tick(per_device: Sequence[Sequence[Optional[float]]]) -> list[Optional[float]]:
    """Per sampler tick, the mean utilisation over the GPUs that answered (None where none did)."""
    out: list[Optional[float]] = []
    for vals in zip(*per_device):
        got = [v for v in vals if v is not None]
        out.append(sum(got) / len(got) if got else None)
    return out


class _CpuReader:
    """CPU % (100 = one core) of this process and of its child processes (loader workers)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        import psutil

        self._clock = clock
        self._me = psutil.Process()
        self._children: dict[int, Any] = {}
        self._last: dict[int, float] = {}
        self._last_t: Optional[int] = None
        self._ticks = 0

    def _cpu_s(self, p: Any) -> Optional[float]:
        try:
            t = p.cpu_times()
            return float(t.user + t.system)
        except Exception:  # exited, zombie or not ours
            return None

    def read(self, final: bool = False) -> tuple[Optional[float], Optional[float], int]:
        # Listing children walks /proc (milliseconds): skip it on the first tick (the
        # workers are not started yet) and the last one (stop() waits for it); do it
        # every tick for the next 2 s (workers are starting), then every 10th tick.
        t = self._ticks
        if not final and 0 < t and (t < 20 or t % 10 == 0):
            try:
                kids = self._me.children(recursive=True)
                self._children = {p.pid: p for p in kids}
            except Exception:
                pass
        self._ticks += 1
        now = self._clock()
        me = self._cpu_s(self._me)
        cur = {0: me} if me is not None else {}
        for pid, p in list(self._children.items()):
            v = self._cpu_s(p)
            if v is None:
                del self._children[pid]
            else:
                cur[pid] = v
        proc = workers = None
        if self._last_t is not None and now > self._last_t:
            dt = (now - self._last_t) / 1e9
            if 0 in cur and 0 in self._last:
                proc = max(0.0, (cur[0] - self._last[0]) / dt * 100)
            workers = 0.0
            for pid, v in cur.items():
                if pid != 0 and pid in self._last:
                    workers += max(0.0, (v - self._last[pid]) / dt * 100)
        self._last, self._last_t = cur, now
        return proc, workers, len(cur) - (1 if 0 in cur else 0)


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
        self._stop = threading.Event()
        self.t_ns: list[int] = []
        self.process_cpu_pct: Optional[list[Optional[float]]] = [] if cpu else None
        self.workers_cpu_pct: Optional[list[Optional[float]]] = [] if cpu else None
        self.num_workers_seen: Optional[list[int]] = [] if cpu else None
        self.gpu_available = False
        self.gpu_reason: Optional[str] = "GPU sampling disabled" if not gpu else None
        self.gpu_devices: list[dict[str, Any]] = []
        self.gpu_util_pct: Optional[list[list[Optional[float]]]] = None
        self.gpu_mem_used_bytes: Optional[list[list[Optional[int]]]] = None
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start sampling (no-op if already running)."""
        if self._thread is not None:
            return
        handles: list[Any] = []
        pynvml = None
        if self._want_gpu:
            st = _init_nvml()
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
                    self.gpu_mem_used_bytes = [[None] * len(self.t_ns) for _ in handles]
        cpu_reader = None
        if self._want_cpu:
            try:
                cpu_reader = _CpuReader(self._clock)
            except Exception as e:  # psutil missing or unusable
                log.warning(
                    "loadeval_nb: no CPU readings (%s); CPU utilisation is recorded as null.", e
                )
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop,
            args=(pynvml, handles, cpu_reader),
            name="loadeval-sampler",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread to end (no-op if not running)."""
        t = self._thread
        if t is None:
            return
        self._stop.set()
        t.join()
        self._thread = None

    # -- the thread ----------------------------------------------------------
    def _loop(self, pynvml: Any, handles: list[Any], cpu_reader: Optional[_CpuReader]) -> None:
        interval = int(self.interval_s * 1e9)
        deadline = self._clock()
        while True:
            self._sample(pynvml, handles, cpu_reader)
            now = self._clock()
            deadline = next_deadline(deadline, interval, now)
            if self._stop.wait((deadline - now) / 1e9):
                break
        self._sample(pynvml, handles, cpu_reader, final=True)  # a last reading at the very end

    def _sample(
        self, pynvml: Any, handles: list[Any], cpu_reader: Optional[_CpuReader], final: bool = False
    ) -> None:
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
        proc = workers = None
        nw = 0
        if cpu_reader is not None:
            try:
                proc, workers, nw = cpu_reader.read(final)
            except Exception:
                pass
        with self._lock:
            self.t_ns.append(t)
            if self.gpu_util_pct is not None and self.gpu_mem_used_bytes is not None:
                for i in range(len(self.gpu_util_pct)):
                    self.gpu_util_pct[i].append(utils[i] if i < len(utils) else None)
                    self.gpu_mem_used_bytes[i].append(mems[i] if i < len(mems) else None)
            if self.process_cpu_pct is not None:
                self.process_cpu_pct.append(proc)
                self.workers_cpu_pct.append(workers)  # type: ignore[union-attr]
                self.num_workers_seen.append(nw)  # type: ignore[union-attr]

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
                },
                "cpu": {
                    "process_pct": cut(self.process_cpu_pct),
                    "workers_pct": cut(self.workers_cpu_pct),
                    "workers": cut(self.num_workers_seen),
                },
            }
