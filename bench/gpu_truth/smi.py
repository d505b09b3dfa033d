"""``nvidia-smi -lms 100`` read alongside a run: the driver's own reading of the counter the
tool reads through NVML, taken outside the tool, with its lines put on our clock."""

from __future__ import annotations

import datetime as dt
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional

from .harness import now


def parse_smi_line(line: str) -> Optional[tuple[float, float]]:
    """``2025/01/15 10:23:45.123, 97`` -> (Unix seconds, 97.0); None for anything else
    ("[N/A]", an error message)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 2:
        return None
    try:
        stamp = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        return stamp, float(parts[1])
    except ValueError:
        return None


def smi_times_on_our_clock(
    stamps_unix: Sequence[float], arrivals_ns: Sequence[int], unix_minus_clock_ns: int
) -> list[float]:
    """nvidia-smi's own time stamps moved onto perf_counter_ns. Its stamps are used rather
    than when a line arrived (a pipe may hold lines back); if they disagree with the arrivals
    by over a minute (a clock or time-zone mismatch), they are shifted by the median gap."""
    times = [s * 1e9 - unix_minus_clock_ns for s in stamps_unix]
    if not times:
        return []
    gap = statistics.median(a - t for a, t in zip(arrivals_ns, times))
    return [t + gap for t in times] if abs(gap) > 60e9 else times


class Smi:
    """``nvidia-smi --query-gpu=timestamp,utilization.gpu -lms 100`` in a subprocess. (The
    time stamp is in the query so that the two series line up.) ``ids`` are tried in turn
    (the UUID first) until one gives readings. ``stand_in``: a Python child that prints
    nvidia-smi's format (``stand_in_pct`` each line), so that a dry run reads and parses."""

    QUERY = ["--query-gpu=timestamp,utilization.gpu", "--format=csv,noheader,nounits"]
    STAND_IN = (
        "import datetime, sys, time\n"
        "while True:\n"
        "    t = datetime.datetime.now().strftime('%Y/%m/%d %H:%M:%S.%f')[:-3]\n"
        "    print(t + ', ' + sys.argv[1], flush=True)\n"
        "    time.sleep(0.1)\n"
    )

    def __init__(self, ids: Sequence[str], stand_in: bool = False, stand_in_pct: int = 0):
        if stand_in:
            self.cmds = [[sys.executable, "-c", self.STAND_IN, str(stand_in_pct)]]
        else:
            self.cmds = [["nvidia-smi", *self.QUERY, "-lms", "100", "-i", i] for i in ids]
        self.cmd = self.cmds[0]
        self.lines: list[tuple[int, str]] = []
        self.proc: Optional[subprocess.Popen] = None
        self.reader: Optional[threading.Thread] = None
        self.unix_minus_clock_ns = time.time_ns() - now()

    def __enter__(self) -> Smi:
        for cmd in self.cmds:
            self.cmd, self.lines = cmd, []
            try:
                self.proc = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
                )
            except OSError as e:  # no nvidia-smi: the figure fails with the reason, no crash
                self.lines, self.proc = [(now(), f"cannot start: {e}")], None
                break
            self.reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
            self.reader.start()
            deadline = time.monotonic() + 5  # nvidia-smi takes a moment to start
            while not self.series()[0] and time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break  # refused this id (its message is in self.lines): try the next
                time.sleep(0.05)
            if self.series()[0]:
                break
            self._stop()
        return self

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append((now(), line.strip()))

    def _stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # lets it flush; kill it if it will not end
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.reader is not None:
            self.reader.join(3)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __exit__(self, *exc: Any) -> None:
        self._stop()

    def series(self) -> tuple[list[float], list[float]]:
        parsed = [(a, p) for a, line in list(self.lines) if (p := parse_smi_line(line))]
        times = smi_times_on_our_clock(
            [p[0] for _, p in parsed], [a for a, _ in parsed], self.unix_minus_clock_ns
        )
        return times, [p[1] for _, p in parsed]

    def describe(self) -> str:
        first = f", e.g. {self.lines[0][1]!r}" if self.lines else ""
        cmd = "a stand-in for nvidia-smi" if self.cmd[0] == sys.executable else " ".join(self.cmd)
        return f"{cmd}: {len(self.lines)} lines{first}"


def smi_gpu_ids() -> list[str]:
    """The GPU torch uses, as nvidia-smi -i names it: its UUID (indices may be renumbered by
    CUDA_VISIBLE_DEVICES), then its index."""
    import torch

    index = str(torch.cuda.current_device())
    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        return [uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", index]
    except Exception:
        return [index]
