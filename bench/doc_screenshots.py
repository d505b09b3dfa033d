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

    python bench/doc_screenshots.py --hosts [--from-artifacts DIR]

The hosts instead: runs the browser tests (tests/browser/: JupyterLab with the bokeh
view, JupyterLab without jupyter_bokeh's labextension and the html view, the notebook
exported by nbconvert, Notebook 7 with the bokeh view) with their screenshots in a
temporary folder and copies them under the names in HOST_SHOTS (``--from-artifacts``:
from the folder of a browser test run already made, LOADEVAL_ARTIFACTS), then runs a
``%%loadeval`` cell in a terminal IPython (``ipython -c``: the text view) and photographs
what the terminal shows at the end (host-terminal-ipython.png).
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
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
HOST_SHOTS = {
    # JupyterLab, the bokeh view (tests/browser/test_jupyterlab.py)
    "01-live.png": "dashboard-live.png",
    "03-rerun.png": "dashboard-rerun.png",
    "04-rerun-running.png": "dashboard-rerun-running.png",
    "06-reopened.png": "notebook-reopened.png",
    # JupyterLab without jupyter_bokeh's labextension (tests/browser/test_hosts.py)
    "hosts-01-html-live.png": "view-html-live.png",
    "hosts-02-html-verdict.png": "view-html-verdict.png",
    "hosts-03-bokeh-without-js.png": "view-bokeh-without-widget-js.png",
    "hosts-04-nbconvert.png": "host-nbconvert.png",
    # Notebook 7, the bokeh view (tests/browser/test_notebook7.py)
    "nb7-01-live.png": "host-notebook7-live.png",
    "nb7-02-verdict.png": "host-notebook7-verdict.png",
}
"""The browser tests' screenshots (test-artifacts/) and their names in docs/img."""
HOST_TESTS = [
    "tests/browser/test_jupyterlab.py::test_quickstart_live_verdict_rerun_clean_console",
    "tests/browser/test_hosts.py",
    "tests/browser/test_notebook7.py",
]
TERMINAL_CELL = """\
import time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self): return 4096
    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.full((4,), float(i))

train_loader = DataLoader(Slow(), batch_size=2)
ip = get_ipython()
ip.run_line_magic("load_ext", "loadeval_nb")
ip.run_cell_magic(
    "loadeval", "train_loader --steps 120 --warmup 5 --cache 5",
    "for x in train_loader:\\n    time.sleep(0.01)\\n",
)
"""
"""A %%loadeval cell as a terminal IPython runs it (``ipython -c``): its shell is the
terminal's, so the text view is chosen."""


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


def host_shots(out: Path, chromium: str, artifacts: Path | None, work: Path) -> None:
    """The hosts' screenshots: the browser tests' (run here unless ``artifacts`` holds a
    run's), copied under HOST_SHOTS' names, and a terminal IPython's text view."""
    if artifacts is None:
        artifacts = work / "artifacts"
        env = {**os.environ, "LOADEVAL_ARTIFACTS": str(artifacts), "LOADEVAL_CHROMIUM": chromium}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *HOST_TESTS, "-q", "-p", "no:cacheprovider"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"a browser test failed; its screenshots are in {artifacts}")
    missing = [name for name in HOST_SHOTS if not (artifacts / name).exists()]
    if missing:
        raise SystemExit(f"{artifacts} lacks {', '.join(missing)}: run the browser tests first")
    for name, dest in HOST_SHOTS.items():
        shutil.copyfile(artifacts / name, out / dest)
    terminal_shot(chromium, work, out / "host-terminal-ipython.png")


def terminal_screen(raw: str, width: int = 130) -> str:
    """What a terminal shows after ``raw``: a carriage return starts its line over (the
    text view's updates), long lines wrap at ``width``."""
    lines = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part) :]
        while len(shown) > width:
            lines.append(shown[:width])
            shown = shown[width:]
        lines.append(shown)
    return "\n".join(lines).rstrip() + "\n"


def terminal_shot(chromium: str, work: Path, png: Path) -> None:
    """A terminal IPython running TERMINAL_CELL (``LOADEVAL_VIEW`` unset: the host picks
    the text view), photographed as the terminal shows it at the end."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOADEVAL_VIEW", "VSCODE_PID")}
    done = subprocess.run(
        [sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor", "-c", TERMINAL_CELL],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=600,
    )  # fmt: skip
    # bytes: text mode would read each carriage return as a new line
    raw = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0 or "Done: " not in raw:
        raise SystemExit(f"the terminal IPython cell failed:\n{raw}")
    # the prompt as a user types the cell (the run itself is ipython -c TERMINAL_CELL)
    shown = "$ ipython\nIn [1]: %%loadeval train_loader --steps 120 --warmup 5 --cache 5\n"
    shown += "   ...: for x in train_loader:\n   ...:     time.sleep(0.01)\n"
    shown += terminal_screen(raw)
    body = (
        "<pre style='background:#1e1e1e;color:#ddd;padding:14px;margin:0;font-size:13px;"
        f"line-height:1.35;font-family:DejaVu Sans Mono,monospace'>{html.escape(shown)}</pre>"
    )
    page_path = work / "terminal.html"
    page_path.write_text(page(body, "terminal IPython"), encoding="utf-8")
    screenshot(chromium, page_path, png, 1100, 900)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument(
        "--hosts", action="store_true", help="the hosts' screenshots instead of the cards'"
    )
    ap.add_argument(
        "--from-artifacts",
        metavar="DIR",
        help="with --hosts: copy the screenshots of a browser test run already made",
    )
    args = ap.parse_args()
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="loadeval-shots-"))
    if args.from_artifacts and not args.hosts:
        ap.error("--from-artifacts goes with --hosts")
    if args.hosts:
        given = Path(args.from_artifacts) if args.from_artifacts else None
        host_shots(out, args.chromium, given, work)
        print(f"pages in {work}; screenshots in {out}")
        return

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
