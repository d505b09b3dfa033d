"""How well does the DataLoader model predict other num_workers settings?

For each workload: measure per-batch load times inside the workers
(WorkerFetchTimer) at one setting (num_workers=2) and the loop's compute step
alone (as the ideal, replayed run would), predict steps/s for num_workers
0, 1, 2, 3, 4, 6, 8, then run the real loop at each setting and compare.

Workloads (batch_size 8):

* ``sleep``        loading sleeps 4 ms a sample, the step sleeps 12 ms: no CPU
                   used, so cores do not limit (contention model off);
* ``cpu/cpu``      loading burns CPU (~4 ms a sample of small matmuls), the step
                   burns ~12 ms of CPU in the main process (reserve_cores=1);
* ``cpu/idle``     loading burns CPU, the step sleeps 12 ms like a GPU step the
                   main process only waits for (reserve_cores=0).

Usage: python bench/simulator_accuracy.py [--quick] [--svg docs/img/simulator-accuracy.svg]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadeval_nb.measure import WorkerFetchTimer
from loadeval_nb.whatif import predict

warnings.filterwarnings("ignore", message="This DataLoader will create")

BATCH = 8
SAMPLE_S = 0.004
STEP_S = 0.012
WORKERS = (0, 1, 2, 3, 4, 6, 8)
MEASURED_AT = 2
_W = torch.randn(48, 48)


def burn(rounds: int) -> float:
    x = torch.ones(48, 48)
    for _ in range(rounds):
        x = torch.tanh(x @ _W)
    return float(x[0, 0])


def calibrate(target_s: float) -> int:
    """Matmul rounds that take ``target_s`` on one idle core."""
    torch.set_num_threads(1)
    rounds = 200
    while True:
        t = time.perf_counter()
        burn(rounds)
        dt = time.perf_counter() - t
        if dt > 0.05:
            return max(1, round(rounds * target_s / dt))
        rounds *= 2


class Samples(Dataset):
    def __init__(self, n: int, kind: str, rounds: int) -> None:
        self.n, self.kind, self.rounds = n, kind, rounds

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.kind == "sleep":
            time.sleep(SAMPLE_S)
        else:
            burn(self.rounds)
        return torch.full((16,), float(i))


def make_step(kind: str, rounds: int):
    if kind == "sleep":
        return lambda: time.sleep(STEP_S)
    return lambda: burn(rounds)


def real_run(ds, step, num_workers: int, warm: int, n: int, timed: bool = False):
    """steps/s over ``n`` steps after ``warm``; with ``timed``, also the worker load
    times and the waits in ``next()`` (what log mode records)."""
    loader = DataLoader(ds, batch_size=BATCH, num_workers=num_workers)
    timer = WorkerFetchTimer(loader)
    it = timer.iter() if timed else iter(loader)
    got, waits = [], []
    for _ in range(warm + n + 1):
        t = time.perf_counter()
        next(it)
        got.append(time.perf_counter())
        waits.append(got[-1] - t)
        step()
    del it
    loads = [x / 1e9 for x in timer.load_ns()] if timed else []
    timer.close()
    return n / (got[warm + n] - got[warm]), loads, waits[warm:]


def ideal_steps(step, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        out.append(time.perf_counter() - t)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and settings (~20 s)")
    ap.add_argument("--svg", type=Path, help="also draw predicted vs measured into this SVG")
    args = ap.parse_args(argv)
    warm, n = (4, 30) if args.quick else (8, 60)
    workers = (0, 1, 2, 4) if args.quick else WORKERS
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(1)  # the main process uses one core, as its model assumes
    sample_rounds = calibrate(SAMPLE_S)
    step_rounds = calibrate(STEP_S)
    print(f"torch {torch.__version__}, {cores} cores, batch {BATCH}, {n} steps after {warm}")
    cases = [
        ("sleep", "sleep", "sleep", dict(contention=False)),
        ("cpu/cpu", "cpu", "cpu", dict(reserve_cores=1.0)),
        ("cpu/idle", "cpu", "sleep", dict(reserve_cores=0.0)),
    ]
    n_samples = (warm + n + 40) * BATCH
    rows = []
    t_start = time.perf_counter()
    for name, load_kind, step_kind, model in cases:
        ds = Samples(n_samples, load_kind, sample_rounds)
        step = make_step(step_kind, step_rounds)
        steps = ideal_steps(step, n)
        _, loads, waits = real_run(ds, step, MEASURED_AT, warm, n, timed=True)
        handoff = statistics.quantiles(waits, n=10)[0]  # the floor of log mode's waits
        pred = predict(
            loads, steps, num_workers=MEASURED_AT, cores=cores, handoff_s=handoff, **model
        )
        print(
            f"\n{name}: load {statistics.median(loads) * 1e3:.1f} ms/batch at "
            f"num_workers={MEASURED_AT}, step {statistics.median(steps) * 1e3:.1f} ms, "
            f"hand-over {handoff * 1e3:.2f} ms; {pred.line()}"
        )
        print(f"{'W':>3} {'predicted':>10} {'measured':>10} {'error':>8}")
        for w in workers:
            p = pred.result(w).steps_per_s
            m, _, _ = real_run(ds, step, w, warm, n)
            err = (p - m) / m
            rows.append((name, w, p, m, err))
            print(f"{w:>3} {p:>10.1f} {m:>10.1f} {err * 100:>+7.1f}%")
    within = sum(abs(r[4]) <= 0.10 for r in rows)
    print(f"\n{within} of {len(rows)} within 10 % ({time.perf_counter() - t_start:.0f} s)")
    if args.svg:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(svg_chart(rows, [c[0] for c in cases]))
        print(f"wrote {args.svg}")
    return 0


def svg_chart(rows, names) -> str:
    """Small multiples: predicted (line) and measured (dots) steps/s against num_workers."""
    pw, ph, pad = 260, 180, 40
    width = pad + len(names) * (pw + pad)
    height = ph + 2 * pad + 20
    wmax = max(r[1] for r in rows)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
    ]
    for k, name in enumerate(names):
        data = [r for r in rows if r[0] == name]
        ymax = max(max(r[2], r[3]) for r in data) * 1.15
        x0, y0 = pad + k * (pw + pad), pad

        def X(w, x0=x0):
            return x0 + w / wmax * pw

        def Y(v, y0=y0, ymax=ymax):
            return y0 + ph - v / ymax * ph

        parts.append(f'<text x="{x0}" y="{y0 - 12}" font-weight="bold">{name}</text>')
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>'
        )
        for w in sorted({r[1] for r in data}):
            parts.append(f'<text x="{X(w)}" y="{y0 + ph + 14}" text-anchor="middle">{w}</text>')
        for frac in (0.0, 0.5, 1.0):
            v = ymax / 1.15 * frac
            parts.append(f'<text x="{x0 - 4}" y="{Y(v) + 4}" text-anchor="end">{v:.0f}</text>')
        pts = " ".join(f"{X(r[1]):.1f},{Y(r[2]):.1f}" for r in data)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        for r in data:
            parts.append(f'<circle cx="{X(r[1]):.1f}" cy="{Y(r[3]):.1f}" r="4" fill="#d62728"/>')
        parts.append(
            f'<text x="{x0 + pw / 2}" y="{y0 + ph + 30}" text-anchor="middle">num_workers</text>'
        )
    parts.append(
        f'<text x="{pad}" y="{height - 6}">steps/s: line = predicted, dots = measured</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
