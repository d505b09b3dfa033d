"""Make the screenshots in docs/: verdict cards and the standalone report, from real runs.

    python bench/doc_screenshots.py [--out docs/img] [--chromium /usr/bin/chromium]

Runs sleep-based pairs (their costs are known and take no core): a quiet input-bound
one, whose card ends with the advice, and one with busy-loop processes started during
its ideal run, whose card says the machine was busy. Each card is written into a
small HTML page and photographed with headless Chromium, as is the report of the
quiet pair. A quiet pair that comes out disturbed anyway (someone else's work on the
machine) is run again, up to five times.

Writes verdict-advice.png, verdict-busy-machine.png and report.png (plus the HTML
pages they were taken from, in a temporary folder that is printed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb import RunSettings, run_pair, save_report
from loadeval_nb.explore import RunHooks
from loadeval_nb.viz import verdict_html

ROOT = Path(__file__).resolve().parents[1]
BUSY = "while True: pass"


class SleepyItems(Dataset):
    """Items that take ``item_s`` seconds each to make (a sleep: no core is used)."""

    def __init__(self, n: int, item_s: float) -> None:
        self.n, self.item_s = n, item_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.item_s)
        return torch.full((3,), float(i))


def sleep_steps(step_s: float):
    def run_once(loader) -> None:
        for _ in loader:
            time.sleep(step_s)

    return run_once


class Disturb(RunHooks):
    """Busy loops, one per core, while the ``which`` run runs."""

    def __init__(self, which: str) -> None:
        self.which, self.procs = which, []

    def run_started(self, which, ev, index, total):
        if which == self.which:
            n = os.cpu_count() or 1
            self.procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]

    def run_ended(self, which, ev, error):
        self.stop()

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()
        self.procs = []


def input_bound_pair(hooks=None):
    # 8 items of 5 ms per batch over 2 workers: a batch every 20 ms against a 10 ms step
    loader = DataLoader(SleepyItems(4000, 0.005), batch_size=8, num_workers=2)
    settings = RunSettings(steps=120, warmup=5, num_cached_batches=10, sample_interval_s=0.05)
    return run_pair(loader, sleep_steps(0.010), settings, hooks=hooks)


def page(body: str, title: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body style='margin:12px;background:white'>{body}</body></html>"
    )


def screenshot(chromium: str, html_path: Path, png: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--hide-scrollbars",
                "--virtual-time-budget=5000",  # let BokehJS lay the page out
                f"--user-data-dir={profile}",
                f"--screenshot={png}",
                f"--window-size={width},{height}",
                html_path.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    crop_bottom(png)


def crop_bottom(png: Path, margin: int = 12) -> None:
    """Cut the blank band under the content (needs Pillow; left as is without it)."""
    try:
        from PIL import Image, ImageChops
    except ImportError:
        return
    with Image.open(png) as im:
        rgb = im.convert("RGB")
    box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, "white")).getbbox()
    if box is not None:
        rgb.crop((0, 0, rgb.width, min(rgb.height, box[3] + margin))).save(png)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="loadeval-shots-"))

    for attempt in range(5):
        quiet = input_bound_pair()
        if quiet.diagnosis is not None and not quiet.diagnosis.disturbed:
            break
        print(f"the quiet pair was disturbed (attempt {attempt + 1}); running it again")
    else:
        raise SystemExit("the machine is busy: every quiet pair came out disturbed")
    print(quiet.diagnosis, end="\n\n")

    hooks = Disturb("ideal")
    try:
        busy = input_bound_pair(hooks)
    finally:
        hooks.stop()
    print(busy.diagnosis, end="\n\n")

    for name, result in (("verdict-advice", quiet), ("verdict-busy-machine", busy)):
        html_path = work / f"{name}.html"
        html_path.write_text(page(verdict_html(result.diagnosis), name), encoding="utf-8")
        screenshot(args.chromium, html_path, out / f"{name}.png", 1000, 700)
    report = Path(save_report(quiet.real, quiet.ideal, work / "report.html"))
    screenshot(args.chromium, report, out / "report.png", 1200, 1500)
    print(f"pages in {work}; screenshots in {out}")


if __name__ == "__main__":
    main()
