"""Sweep num_workers on the image pipeline of ``notebooks/image_pipeline.ipynb`` and compare
the simulator's predictions (fed from the first configuration) with the measured rates.

    python bench/image_sweep.py --workers 1,2,4,8,12 --steps 40

Runs on CUDA when present (the notebook's wider network), else on the CPU. Prints the
sweep report and, per configuration, predicted vs measured steps/s and the error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import nbformat

from loadeval_nb import RunSettings, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def pipeline_namespace() -> dict:
    """Run the notebook's setup cell (dataset, transforms, loader, model) in a namespace."""
    nb = nbformat.read(ROOT / "notebooks" / "image_pipeline.ipynb", as_version=4)
    setup = next(
        c.source for c in nb.cells if c.cell_type == "code" and "class SyntheticJPEGs" in c.source
    )
    ns: dict = {"__name__": "image_pipeline"}
    exec(compile(setup, "image_pipeline_setup", "exec"), ns)
    return ns


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    ns = pipeline_namespace()
    loader, device, train_step = ns["train_loader"], ns["device"], ns["train_step"]

    def run_once(ev):
        for images, labels in ev:
            train_step(images.to(device, non_blocking=True), labels.to(device, non_blocking=True))

    t = time.perf_counter()
    res = run_sweep(
        loader,
        run_once,
        f"num_workers={args.workers}",
        RunSettings(steps=args.steps, warmup=args.warmup, num_cached_batches=10),
        max_repeats=1,
    )
    print(f"device {device}, {time.perf_counter() - t:.0f} s")
    print(res.text())
    within = 0
    rows = [r for r in res.table() if r["steps_per_s"] and r["predicted_steps_per_s"]]
    print(f"{'config':<8} {'predicted':>10} {'measured':>10} {'error':>8}")
    for r in rows:
        err = r["predicted_steps_per_s"] / r["steps_per_s"] - 1
        within += abs(err) <= 0.10
        print(
            f"{r['label']:<8} {r['predicted_steps_per_s']:>10.2f} {r['steps_per_s']:>10.2f} {err:>+8.1%}"
        )
    print(f"{within} of {len(rows)} within 10 % (the first configuration feeds the model)")


if __name__ == "__main__":
    main()
