"""What paying ahead costs: the interleaved pass over a loader whose ``len()`` does not
bound its epoch (an ``IterableDataset``), against the same items behind a map-style
Dataset (a ``len()`` that does), side by side in one process (issue 37).

For an unsized loader each replayed step is paid for ahead: before an ideal (or
contended) block, as many real batches as it will serve are drawn and dropped, between
blocks and in no step's time, so that the script's epoch is never longer than without
the tool. Those batches cost loading time that a sized loader's pass does not spend.
This bench prints, per workload and kind of loader, the pass's wall time, the batches
drawn from the loader, the batches paid ahead, and the speedup with its interval; then
the unsized pass's time as a ratio of the sized one's, and whether their intervals agree.

Workloads (batch of 4, a sleeping loader, ``RunSettings(steps=120, warmup=10,
num_cached_batches=10)``):

* ``input``    2 workers, 4 ms a sample (16 ms a batch a worker), a 5 ms step;
* ``compute``  2 workers, 0.5 ms a sample, a 30 ms step;
* ``inline``   no workers, 1 ms a sample, a 10 ms step.

Usage: python bench/payahead.py [--runs 3] [--only input]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadeval_nb import RunSettings, run_pair

WORKLOADS = {
    # name: (workers, sleep a sample (s), step (s))
    "input": (2, 0.004, 0.005),
    "compute": (2, 0.0005, 0.030),
    "inline": (0, 0.001, 0.010),
}
ITEMS = 4 * 2000


class Sized(Dataset):
    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return torch.full((8,), float(i % 7))


class Unsized(IterableDataset):
    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if info is not None else (0, 1)
        for i in range(start, ITEMS, step):
            time.sleep(self.sleep_s)
            yield torch.full((8,), float(i % 7))


def one(kind: str, workers: int, sleep_s: float, step_s: float) -> dict:
    ds = Sized(sleep_s) if kind == "sized" else Unsized(sleep_s)
    loader = DataLoader(ds, batch_size=4, num_workers=workers)

    def train(batches):
        for _ in batches:
            time.sleep(step_s)

    with tempfile.TemporaryDirectory() as logs:
        settings = RunSettings(steps=120, warmup=10, num_cached_batches=10, log_dir=logs)
        t = time.perf_counter()
        res = run_pair(loader, train, settings)
        took = time.perf_counter() - t
        (real_log,) = [f for f in os.listdir(logs) if f.endswith("-real.json")]
        with open(os.path.join(logs, real_log)) as f:
            plan = json.load(f)["settings"]
    d = res.diagnosis
    return {
        "took": took,
        "paid": plan.get("paid_ahead", 0),
        "speedup": d.speedup,
        "ci": d.speedup_ci,
        "verdict": d.verdict,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    table = [
        "| workload | unsized / sized pass time | paid ahead (batches) | sized speedup | "
        "unsized speedup | intervals overlap |",
        "|---|---|---|---|---|---|",
    ]
    for name, (workers, sleep_s, step_s) in WORKLOADS.items():
        if args.only and name not in args.only.split(","):
            continue
        rows: dict[str, list[dict]] = {"sized": [], "unsized": []}
        for k in range(args.runs):
            order = ("sized", "unsized") if k % 2 == 0 else ("unsized", "sized")
            for kind in order:  # side by side, alternating which goes first
                r = one(kind, workers, sleep_s, step_s)
                rows[kind].append(r)
                print(
                    f"{name} {kind} run {k + 1}: {r['took']:.1f} s, paid ahead {r['paid']}, "
                    f"{r['speedup']:.3f}× ({r['ci'][0]:.3f}–{r['ci'][1]:.3f}) {r['verdict']}",
                    flush=True,
                )
        s, u = rows["sized"], rows["unsized"]
        ratio = statistics.mean(b["took"] for b in u) / statistics.mean(a["took"] for a in s)
        overlap = sum(
            1 for a, b in zip(s, u) if a["ci"][0] <= b["ci"][1] and b["ci"][0] <= a["ci"][1]
        )
        table.append(
            f"| {name} | {ratio:.2f}× | {statistics.mean(b['paid'] for b in u):.0f} | "
            f"{statistics.median(a['speedup'] for a in s):.2f}× | "
            f"{statistics.median(b['speedup'] for b in u):.2f}× | {overlap}/{len(s)} |"
        )
    print("\n".join(table))


if __name__ == "__main__":
    main()
