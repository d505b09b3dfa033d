"""Coverage of the verdict's interval, and how often its label agrees, on constructed
truths, quiet and busy (issue 36).

Each workload is a training script written here, run **unmodified** under
``python -m loadeval_nb run`` (its default settings), against a stopwatch of the same
loop: the script itself, started with ``COVERAGE_STOPWATCH=path``, times its own loop (its
epochs as they run, up to 8, the first steps of each left out) and, after each epoch, a
block of steps over the first five batches cached, in one process, under the same load;
its truth is the ratio of the two means of steady steps. Each run of the tool has a stopwatch just before
and just after it: the run's own truth is the two together, so that a drift of the
machine over minutes (its compute speed moves by ±5 % on this VM, and an input-bound
loop's ratio with it) lands on both.

Workloads (batch of 4; the step is CPU work of a fixed size, one intra-op thread):

* ``input``    2 workers, 4 ms a sample asleep: input-bound (≈1.6×);
* ``compute``  2 workers, 0.5 ms a sample, a 30 ms step: compute-bound (≈1.0×);
* ``near``     no workers, 1.5 ms a batch asleep, a 15 ms step: a gain near the line;
* ``short32``  32 batches an epoch, 2 workers, a 20 ms step, 30 epochs: dcgan-like, too
               short for blocks (compute-bound);
* ``epoch60``  60 batches an epoch, no workers, 2 ms a batch, a 10 ms step;
* ``input-seq`` ``input`` measured with ``--sequential`` (a child per side, one after the
               other).

Loads: ``quiet``; ``busy1`` (one process spinning on a core); ``busy1.5`` (that, and one
spinning in bursts: 0.2 s on, 0.2 s off); ``heavy`` (two spinning, and the bursts: two
cores kept busy on a two-core machine).

For each cell it prints the truth (the median of the cell's stopwatches: one stopwatch
on a busy machine is as noisy as one run of the tool), the interval's coverage of it and
of each run's own stopwatch, the runs whose label agrees with the truth's (its own label,
or NOT ENOUGH DATA with an interval that holds it), the median width of the interval (its
sharpness), the share of runs that said NOT ENOUGH DATA, the worst miss as a share of the interval's width, and the mean time of a run of the tool.
``--from-log FILE`` prints the table again from the lines of an earlier run;
``--keep-logs DIR`` keeps each run's logs, and ``--rediagnose DIR`` prints the table from
them again as the rules on ``sys.path`` read them (a before and an after from the same
runs).

``--tool-args '--steps auto'`` gives every run of the tool those options.

Usage: python bench/coverage.py [--runs 10] [--only input,short32] [--loads quiet,busy1]
       [--keep-logs DIR] [--tool-args ARGS] | --rediagnose DIR
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadeval_nb import diagnose
from loadeval_nb.verdict import INPUT_BOUND, NOT_ENOUGH_DATA, NOT_INPUT_BOUND, PARTLY_INPUT_BOUND

WORKLOADS = {
    # name: (workers, sleep a sample (s), step (ms), batches, epochs)
    "input": (2, 0.004, 5.0, 400, 1),
    "compute": (2, 0.0005, 30.0, 400, 1),
    "near": (0, 0.000375, 15.0, 400, 1),
    "short32": (2, 0.001, 20.0, 32, 30),
    "epoch60": (0, 0.0005, 10.0, 60, 4),
    "input-seq": (2, 0.004, 5.0, 400, 1),
}
OPTIONS = {"input-seq": ["--sequential"]}
"""The tool's options a workload runs with (the rest: its defaults)."""
LOADS = ("quiet", "busy1", "busy1.5", "heavy")

SCRIPT = r"""
import json, os, sys, time
import torch
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)
WORKERS, SLEEP_S, STEP_REPS, BATCHES, EPOCHS = (
    int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
W = torch.randn(96, 96) / 10


class Items(Dataset):
    def __len__(self):
        return 4 * BATCHES

    def __getitem__(self, i):
        time.sleep(SLEEP_S)
        return torch.full((96,), float(i % 7))


def step(batch):
    x = batch.float()
    for _ in range(STEP_REPS):
        x = torch.tanh(x @ W)
    return float(x.sum())


loader = DataLoader(Items(), batch_size=4, num_workers=WORKERS)
out = os.environ.get("COVERAGE_STOPWATCH")
if not out:
    for epoch in range(EPOCHS):
        for batch in loader:
            step(batch)
    sys.exit(0)

# the stopwatch: the script's own loop, timed. Its epochs run as they would (each a
# fresh iter(); the first steps of each, the start and the queue the workers fill, left
# out), the first five batches kept as the cache; after each epoch, a block of cached
# steps, in the same process. (A live block that went on with an iterator after a cached
# block read 6-8 % slower than the script's epoch on `input`, 8.9 against 8.3 ms; later
# epochs, after the workers' second fork, read ~5 % slower than the first, here, and the
# script trains one epoch: the truth is its own.)
LONG = BATCHES > 100
SKIP = 20 if LONG else 10
BLOCK = 200 if LONG else BATCHES - SKIP
cache, real, ideal = [], [], []


def timed_epoch():
    it = iter(loader)
    n = 0
    while True:
        t = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        if len(cache) < 5:
            cache.append(batch)
        step(batch)
        if n >= SKIP:
            real.append(time.perf_counter() - t)
        n += 1


def timed_cached():
    for n in range(BLOCK):
        t = time.perf_counter()
        step(cache[n % len(cache)])
        ideal.append(time.perf_counter() - t)


for _ in range(min(EPOCHS, 8)):
    timed_epoch()
    timed_cached()
with open(out, "w") as f:
    json.dump({"real": sum(real) / len(real), "ideal": sum(ideal) / len(ideal)}, f)
"""


def calibrate(ms: float) -> int:
    """Repetitions of the step's matmul that take ``ms`` on this machine, quiet."""
    import torch

    torch.set_num_threads(1)
    w = torch.randn(96, 96) / 10
    x = torch.randn(4, 96)
    for _ in range(200):  # torch's first calls are slow
        x = torch.tanh(x @ w)
    reps = 5000
    t = time.perf_counter()
    for _ in range(reps):
        x = torch.tanh(x @ w)
    per = (time.perf_counter() - t) / reps
    return max(1, round(ms / 1e3 / per))


class Load:
    """Busy loops started for a cell and stopped after it."""

    def __init__(self, name: str) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        spin = "while True: pass"
        burst = (
            "import time\nwhile True:\n t=time.perf_counter()\n"
            " while time.perf_counter()-t<0.2: pass\n time.sleep(0.2)"
        )
        codes = {
            "quiet": [],
            "busy1": [spin],
            "busy1.5": [spin, burst],
            "heavy": [spin, spin, burst],  # two busy loops and bursts on two cores
        }[name]
        self.procs = [subprocess.Popen([sys.executable, "-c", c]) for c in codes]

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def label_of(speedup: float) -> str:
    if speedup >= 1.25:
        return INPUT_BOUND
    return PARTLY_INPUT_BOUND if speedup >= 1 / 0.95 else NOT_INPUT_BOUND


def one(
    script: str, args: list[str], work: str, options: tuple[str, ...] = (), keep: str = ""
) -> dict:
    """A run of the tool between two stopwatches: its own truth is theirs together (a
    drift of the machine over the run, linear in time, lands on both). With ``keep``, the
    run's logs and its row are kept in that folder (``--keep-logs``)."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    row: dict = {}
    watches: list[tuple[float, float]] = []

    def stopwatch() -> None:
        out = os.path.join(work, "stopwatch.json")
        subprocess.run(
            [sys.executable, script, *args], env={**env, "COVERAGE_STOPWATCH": out}, check=True
        )
        with open(out) as f:
            s = json.load(f)
        watches.append((s["real"], s["ideal"]))

    def tool() -> None:
        logs = tempfile.mkdtemp(dir=work)
        t = time.perf_counter()
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "loadeval_nb",
                "run",
                *options,
                "--log-dir",
                logs,
                script,
                *args,
            ],  # fmt: skip
            env=env,
            capture_output=True,
            text=True,
        )
        row["took"] = time.perf_counter() - t
        if p.returncode != 0:
            row["failed"] = p.stderr.strip().splitlines()[-1:]
            return
        real = glob.glob(os.path.join(logs, "*-real.json"))
        ideal = glob.glob(os.path.join(logs, "*-ideal.json"))
        cont = glob.glob(os.path.join(logs, "*-contended.json"))
        row["logs"] = [real[0], ideal[0], *cont[:1]]
        row.update(judged(row["logs"]))

    stopwatch()
    tool()
    stopwatch()
    real = statistics.mean(w[0] for w in watches)
    ideal = statistics.mean(w[1] for w in watches)
    row["truth"] = real / ideal
    row["sw"] = (real, ideal)
    row["sws"] = [w[0] / w[1] for w in watches]
    if keep and "logs" in row:
        os.makedirs(keep, exist_ok=True)
        for path in row["logs"]:
            shutil.copy(path, keep)
        row["logs"] = [os.path.basename(p) for p in row["logs"]]
        with open(os.path.join(keep, "row.json"), "w") as f:
            json.dump(row, f)
    return row


def judged(logs: list[str]) -> dict:
    """The tool's answer from a run's logs (real, ideal, and a contended one if any)."""
    d = diagnose(logs[0], logs[1], contended=logs[2] if len(logs) > 2 else None)
    return {
        "speedup": d.speedup,
        "lo": d.speedup_ci[0],
        "hi": d.speedup_ci[1],
        "verdict": d.verdict,
        "steps": (d.real_step_s, d.ideal_step_s),
    }


def rediagnose(folder: str) -> None:
    """The table again from the logs ``--keep-logs`` kept, each run diagnosed by the code
    on ``sys.path`` now (the same runs read by two versions of the rules: a before and an
    after that differ only in the rules)."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for kept in sorted(glob.glob(os.path.join(folder, "*", "row.json"))):
        with open(kept) as f:
            row = json.load(f)
        here = os.path.dirname(kept)
        name, load, _ = os.path.basename(here).rsplit("-", 2)
        row.update(judged([os.path.join(here, p) for p in row["logs"]]))
        cells.setdefault((name, load), []).append(row)
    print(TABLE_HEAD)
    for (name, load), rows in cells.items():
        print(summarise(name, load, rows))


def summarise(name: str, load: str, rows: list[dict]) -> str:
    """One row of the table. The truth is the cell's: the median of its runs' stopwatches
    (one stopwatch reading is as noisy as one run of the tool on a busy machine); each
    run's own stopwatch is the second coverage column."""
    ok = [r for r in rows if r.get("lo") is not None and "truth" in r]
    n = len(rows)
    truth = statistics.median(r["truth"] for r in rows if "truth" in r)
    held = sum(1 for r in ok if r["lo"] <= truth <= r["hi"])
    own = sum(1 for r in ok if r["lo"] <= r["truth"] <= r["hi"])
    want = label_of(truth)
    agree = sum(
        1
        for r in ok
        if r["verdict"] == want or (r["verdict"] == NOT_ENOUGH_DATA and r["lo"] <= truth <= r["hi"])
    )
    # a label is decided from its interval: one whose interval holds the truth says a range
    # that holds it, whatever its word (PARTLY "at least 20%; possibly much more" of a 1.8x)
    holds = sum(1 for r in ok if r["verdict"] == want or r["lo"] <= truth <= r["hi"])
    worst = 0.0
    for r in ok:
        width = math.log(r["hi"] / r["lo"]) or 1e-9
        miss = max(math.log(r["lo"] / truth), math.log(truth / r["hi"]), 0.0)
        worst = max(worst, miss / width)
    widths = [r["hi"] / r["lo"] - 1 for r in ok]
    ned = sum(1 for r in ok if r["verdict"] == NOT_ENOUGH_DATA)
    took = statistics.mean(r["took"] for r in rows if "took" in r)
    labels = ", ".join(
        f"{sum(1 for r in ok if r['verdict'] == v)} {SHORT[v]}"
        for v in SHORT
        if any(r["verdict"] == v for r in ok)
    )
    return (
        f"| {name} | {load} | {truth:.2f}× {SHORT[want]} | {held}/{n} | {own}/{n} | "
        f"{agree}/{n} · {holds}/{n} ({labels}) | "
        f"{statistics.median(widths) if widths else float('nan'):.0%} | {ned}/{n} | "
        f"{worst:.2f} | {took:.1f} s |"
    )


SHORT = {
    INPUT_BOUND: "IB",
    PARTLY_INPUT_BOUND: "PARTLY",
    NOT_INPUT_BOUND: "NOT",
    NOT_ENOUGH_DATA: "NED",
}


LINE = re.compile(
    r"^(\S+) (\S+) run \d+: truth ([\d.]+)× \| tool ([\d.]+)× \(([\d.]+)–([\d.]+)\) "
    r"(.+?) \[([\d.]+) s\]"
)


def from_log(path: str) -> None:
    """The table again, from the lines an earlier run printed."""
    cells: dict[tuple[str, str], list[dict]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                name, load, truth, sp, lo, hi, verdict, took = m.groups()
                cells.setdefault((name, load), []).append(
                    {
                        "truth": float(truth), "speedup": float(sp), "lo": float(lo),
                        "hi": float(hi), "verdict": verdict, "took": float(took),
                    }
                )  # fmt: skip
    print(TABLE_HEAD)
    for (name, load), rows in cells.items():
        print(summarise(name, load, rows))


TABLE_HEAD = (
    "| workload | load | truth (its label) | coverage | of each run's stopwatch | label: the "
    "truth's · or its interval holds it | median width | NOT ENOUGH DATA | worst miss / "
    "width | tool run |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--from-log", default="")
    ap.add_argument("--keep-logs", default="", help="keep each run's logs in this folder")
    ap.add_argument("--rediagnose", default="", help="the table from a --keep-logs folder")
    ap.add_argument(
        "--tool-args", default="", help="options for every run of the tool (e.g. '--steps auto')"
    )
    args = ap.parse_args()
    if args.from_log:
        from_log(args.from_log)
        return
    if args.rediagnose:
        rediagnose(args.rediagnose)
        return
    names = [n for n in WORKLOADS if not args.only or n in args.only.split(",")]
    loads = [x for x in args.loads.split(",") if x]
    table = [TABLE_HEAD]
    with tempfile.TemporaryDirectory() as work:
        script = os.path.join(work, "train.py")
        Path(script).write_text(SCRIPT)
        for name in names:
            workers, sleep_s, step_ms, batches, epochs = WORKLOADS[name]
            reps = calibrate(step_ms)
            wargs = [str(workers), str(sleep_s), str(reps), str(batches), str(epochs)]
            for load in loads:
                busy = Load(load)
                rows = []
                try:
                    time.sleep(0.5)
                    for k in range(args.runs):
                        keep = (
                            os.path.join(args.keep_logs, f"{name}-{load}-{k + 1:02d}")
                            if args.keep_logs
                            else ""
                        )
                        options = (*OPTIONS.get(name, ()), *args.tool_args.split())
                        r = one(script, wargs, work, options, keep)
                        rows.append(r)
                        if "failed" in r:
                            print(f"{name} {load} run {k + 1}: FAILED {r['failed']}", flush=True)
                            continue
                        print(
                            f"{name} {load} run {k + 1}: truth {r['truth']:.3f}× | tool "
                            f"{r['speedup']:.3f}× ({r['lo']:.3f}–{r['hi']:.3f}) {r['verdict']} "
                            f"[{r['took']:.1f} s] steps: stopwatch "
                            f"{r['sw'][0] * 1e3:.2f}/{r['sw'][1] * 1e3:.2f} ms, tool "
                            f"{r['steps'][0] * 1e3:.2f}/{r['steps'][1] * 1e3:.2f} ms (stopwatches "
                            f"{r['sws'][0]:.3f}×, {r['sws'][1]:.3f}×)",
                            flush=True,
                        )
                finally:
                    busy.stop()
                table.append(summarise(name, load, rows))
                print(table[-1], flush=True)
    print("\n".join(table))


if __name__ == "__main__":
    main()
