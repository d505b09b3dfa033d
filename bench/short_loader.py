"""A short loader measured by every front end, against a stopwatch (issue 47).

The loop: 8 epochs of a 32-batch loader (2 workers, 2 ms a sample asleep, 4 samples a
batch, a 10 ms step of CPU work: compute-bound, the truth about 1.0×). Measured three
ways, each its front end's own default:

* ``cell``   ``run_pair`` over a function looping the 8 epochs (what ``%%loadeval`` runs);
* ``script`` ``python -m loadeval_nb run`` over a script looping them;
* ``evaluator`` ``LoaderEvaluator(loader, mode="pair")`` iterated 8 times, then ``diagnose``.

Each run sits between two stopwatches of the same loop in one process (its real epochs,
each a fresh ``iter()``, and cached epochs of its first batches, in A B B A order, the
first 4 steps of each epoch left out); the run's truth is their mean. Printed per front
end and load: the method its run logs say (``settings.method``), the speedup and its
interval, whether the interval holds the truth, the verdict.

Usage: python bench/short_loader.py [--runs 3] [--loads quiet,busy1] [--only cell,script]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.coverage import Load  # noqa: E402

SCRIPT = r"""
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
W = torch.randn(96, 96) / 10
BATCHES, EPOCHS, SKIP = 32, 8, 4


class Items(Dataset):
    def __len__(self):
        return 4 * BATCHES

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.full((96,), float(i % 7))


def calibrate(ms):
    x = torch.randn(4, 96)
    for _ in range(200):
        x = torch.tanh(x @ W)
    t = time.perf_counter()
    for _ in range(2000):
        x = torch.tanh(x @ W)
    return max(1, round(ms / 1e3 / ((time.perf_counter() - t) / 2000)))


REPS = int(os.environ.get("SHORT_REPS") or 0) or calibrate(10.0)


def step(batch):
    x = batch.float()
    for _ in range(REPS):
        x = torch.tanh(x @ W)
    return float(x.sum())


def loader():
    return DataLoader(Items(), batch_size=4, num_workers=2)


def loop(dl):
    for _ in range(EPOCHS):
        for batch in dl:
            step(batch)


def stopwatch(out):
    dl = loader()
    cache = [b for _, b in zip(range(20), dl)]
    real, ideal = [], []

    def epoch(live):
        it = iter(dl) if live else iter([cache[k % len(cache)] for k in range(BATCHES)])
        n = 0
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            step(batch)
            if n >= SKIP:
                (real if live else ideal).append(time.perf_counter() - t)
            n += 1

    for live in (True, False, False, True) * 2:
        epoch(live)
    with open(out, "w") as f:
        json.dump({"real": sum(real) / len(real), "ideal": sum(ideal) / len(ideal)}, f)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "train"
    if what == "stopwatch":
        stopwatch(sys.argv[2])
    elif what == "train":
        loop(loader())
    elif what in ("cell", "evaluator"):
        from loadeval_nb import LoaderEvaluator, RunSettings, diagnose, run_pair

        if what == "cell":
            res = run_pair(loader(), loop, RunSettings(sample_interval_s=0.1))
            d, real = res.diagnosis, res.real
        else:
            ev = LoaderEvaluator(loader(), mode="pair")
            loop(ev)
            ev.close()
            runs = ev.to_runs()
            d, real = diagnose(runs["real"], runs["ideal"]), runs["real"]
        with open(sys.argv[2], "w") as f:
            json.dump({"speedup": d.speedup, "lo": d.speedup_ci[0], "hi": d.speedup_ci[1],
                       "verdict": d.verdict, "method": real.method}, f)
"""


def tool(front: str, script: str, work: str, env: dict) -> dict:
    out = os.path.join(work, "tool.json")
    if front in ("cell", "evaluator"):
        subprocess.run([sys.executable, script, front, out], env=env, check=True,
                       capture_output=True)  # fmt: skip
        with open(out) as f:
            return json.load(f)
    logs = tempfile.mkdtemp(dir=work)
    subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "run", "--log-dir", logs, script],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    from loadeval_nb import diagnose, load_run

    real = load_run(glob.glob(os.path.join(logs, "*-real.json"))[0])
    ideal = load_run(glob.glob(os.path.join(logs, "*-ideal.json"))[0])
    d = diagnose(real, ideal)
    return {"speedup": d.speedup, "lo": d.speedup_ci[0], "hi": d.speedup_ci[1],
            "verdict": d.verdict, "method": real.method}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--loads", default="quiet,busy1")
    ap.add_argument("--only", default="cell,script,evaluator")
    args = ap.parse_args()
    rows = ["| front end | load | method | truth (stopwatches) | tool | holds | verdict |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "train.py")
        Path(script).write_text(SCRIPT)
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        reps = subprocess.run(
            [sys.executable, "-c", f"import runpy; m = runpy.run_path({script!r}); "
             "print(m['REPS'])"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.split()[-1]  # fmt: skip
        env["SHORT_REPS"] = reps  # one step size for every process
        for load in args.loads.split(","):
            busy = Load(load)
            try:
                for front in args.only.split(","):
                    for _ in range(args.runs):
                        watches = []
                        for when in ("before", "after"):
                            if when == "after":
                                r = tool(front, script, work, env)
                            out = os.path.join(work, "sw.json")
                            subprocess.run([sys.executable, script, "stopwatch", out], env=env,
                                           check=True)  # fmt: skip
                            with open(out) as f:
                                s = json.load(f)
                            watches.append(s["real"] / s["ideal"])
                        truth = statistics.mean(watches)
                        holds = r["lo"] <= truth <= r["hi"]
                        line = (
                            f"| {front} | {load} | {r['method']} | {truth:.2f}× "
                            f"({watches[0]:.2f}, {watches[1]:.2f}) | {r['speedup']:.2f}× "
                            f"({r['lo']:.2f}–{r['hi']:.2f}×) | {'yes' if holds else 'NO'} | "
                            f"{r['verdict']} |"
                        )
                        print(line, flush=True)
                        rows.append(line)
            finally:
                busy.stop()
    print("\n".join(rows))


if __name__ == "__main__":
    main()
