"""``suite``: the ``gpu``-marked tests, the demo on CUDA, and ``%%loadeval --ladder`` in a
real kernel on CUDA (the device rung cached on the GPU, with NVML readings)."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

from ..harness import ROOT, Ctx, child_env
from ..maths import pytest_counts
from ..notebook import notebook_probe
from ..report import Record, fmt_value, same

GPU_TESTS = ["tests/gpu", "tests/scripts/test_gpu.py"]


def run_cmd(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    t = time.perf_counter()
    try:
        p = subprocess.run(
            cmd,
            cwd=ROOT,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return p.returncode, p.stdout + p.stderr, time.perf_counter() - t
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out + f"\n(timed out after {timeout:.0f} s)", time.perf_counter() - t


def check(ctx: Ctx) -> list[Record]:
    recs: list[Record] = []
    # 1. the gpu-marked tests (on CPU they all skip: that is what a dry run shows)
    rc, out, secs = run_cmd(
        [sys.executable, "-m", "pytest", "-m", "gpu", *GPU_TESTS, "-q", "-p", "no:cacheprovider"],
        timeout=ctx.pick(420, 240, 120),
    )
    counts = pytest_counts(out)
    got = ", ".join(f"{v} {k}" for k, v in counts.items()) or out.strip()[-300:]
    ok = rc == 0 and counts.get("passed", 0) > 0 and not counts.get("skipped")
    rec = same(
        "suite",
        "pytest -m gpu " + " ".join(GPU_TESTS),
        f"{got} (exit {rc}, {secs:.0f} s)",
        "all pass, none skipped",
        ok,
        "exit 0",
    )
    if rc != 0:
        print(out[-3000:])
    recs.append(rec if ctx.cuda else replace(rec, ok=rc == 0, truth="exit 0 (all skip on CPU)"))
    # 2. the demo, on the device
    demo_out = ctx.tmp / "demo.html"
    cmd = [
        sys.executable,
        "-m",
        "loadeval_nb",
        "demo",
        "--device",
        ctx.dev.type,
        "--out",
        str(demo_out),
        *ctx.pick([], ["--steps", "30"], ["--steps", "12", "--warmup", "2", "--batch-size", "8"]),
    ]
    rc, out, secs = run_cmd(cmd, timeout=ctx.pick(300, 150, 120))
    verdict = next((ln.strip() for ln in out.splitlines() if ln.startswith("Verdict:")), None)
    gpu_line = next((ln.strip() for ln in out.splitlines() if "GPU utilisation:" in ln), "")
    if rc != 0 or verdict is None:
        print(out[-3000:])
    recs.append(
        same(
            "suite",
            f"demo on {ctx.dev.type}: verdict",
            f"{verdict} ({secs:.0f} s)",
            "a verdict, a report file",
            rc == 0 and verdict is not None and demo_out.exists(),
            "exit 0",
        )
    )
    recs.append(
        ctx.gpu_only(
            same(
                "suite",
                "demo on CUDA: GPU utilisation read",
                gpu_line,
                "numbers, not n/a",
                bool(gpu_line) and "n/a" not in gpu_line,
                "NVML readings",
            ),
            "NVML",
        )
    )
    # 3. %%loadeval --ladder in a real kernel
    probe, secs = notebook_probe(ctx)
    want = ["device", "host", "samples", "real"] if ctx.cuda else ["host", "samples", "real"]
    recs.append(
        same(
            "suite",
            f"%%loadeval --ladder in a kernel: rungs that ran ({secs:.0f} s)",
            ", ".join(probe["ran"]),
            ", ".join(want),
            probe["ok"] and probe["ran"] == want,
            "every rung the device allows",
            probe["conclusion"],
        )
    )
    util = (probe.get("gpu_util") or {}).get("device")
    cache_on = probe.get("device_cache_on")
    recs.append(
        ctx.gpu_only(
            same(
                "suite",
                "%%loadeval --ladder: the device rung's cache and its NVML readings",
                f"cache_on={cache_on}, GPU {fmt_value(util, '%')}",
                "cache_on=device, a reading",
                cache_on == "device" and util is not None,
                "on the GPU, read",
            ),
            "no device rung without CUDA",
        )
    )
    return recs
