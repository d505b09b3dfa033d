"""What ``python -m loadeval_nb run`` adds to a script's own start-up.

A trivial training script (import torch, a DataLoader of 30 tiny batches, an empty
step) is run directly (A) and through the command (B), interleaved A B B A for
``--rounds`` rounds, so that a drift in the machine's load weighs on both alike. The
command runs the script twice (a child per side, each stopped once its ``--steps`` are
measured) from a parent process: by default one child measures both sides interleaved
(B, against one direct run), with ``--sequential`` a child per side (C, against two):

* ``run / direct``: the ratio of the medians (about 2: one run per side);
* ``added per side``: ``(B - 2 A) / 2``, what each side costs beyond the script's own
  start-up and run: the parent's interpreter and imports (shared by the two sides),
  importing ``loadeval_nb.core`` in the child, the DataLoader patch, writing the run
  log, reading both logs and the verdict;
* the same in interpreter starts (``python -c pass``, measured in the same rounds),
  and beside it what importing ``loadeval_nb.core`` alone costs.

Compiled modules are cached in a temporary folder during the bench (as a user's
``__pycache__`` would hold them), whatever ``PYTHONDONTWRITEBYTECODE`` says. The issue's
goal: at most one interpreter start per side. Absolute milliseconds move
from one machine to the next; the ratios taken in one run do not.

    python bench/child_start.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

SCRIPT = textwrap.dedent(
    """
    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(torch.arange(60 * 4, dtype=torch.float32), batch_size=4)
    for batch in loader:
        batch.sum()
    """
)


ENV = dict(os.environ)


def timed(cmd: list[str]) -> float:
    """Wall seconds of ``cmd``, its output discarded; fails loudly if it fails."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5, help="A B B A rounds (default 5)")
    p.add_argument("--steps", type=int, default=40, help="steps per side (default 40)")
    args = p.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        # compiled modules cached (in a folder of our own, not the source tree), as on a
        # user's machine: a PYTHONDONTWRITEBYTECODE environment would otherwise compile
        # every module of ours at every start
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
        ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        script = os.path.join(tmp, "trivial.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        direct = [py, script]
        via = [py, "-m", "loadeval_nb", "run", "--steps", str(args.steps), "--warmup", "2"]
        via += ["--cache", "2", script]
        seq = via[:4] + ["--sequential"] + via[4:]
        bare = [py, "-c", "pass"]
        core = [py, "-c", "import loadeval_nb.core"]
        for cmd in (direct, via, seq):
            timed(cmd)  # the first start fills the file cache: left out
        a: list[float] = []
        b: list[float] = []
        c: list[float] = []
        starts: list[float] = []
        imports: list[float] = []
        for _ in range(args.rounds):
            a.append(timed(direct))
            b.append(timed(via))
            c.append(timed(seq))
            c.append(timed(seq))
            b.append(timed(via))
            a.append(timed(direct))
            starts.append(timed(bare))
            imports.append(timed(core) - timed(bare))
    ma, mb, mc = statistics.median(a), statistics.median(b), statistics.median(c)
    start, imp = statistics.median(starts), statistics.median(imports)
    print(f"A B C C B A x {args.rounds} ({len(a)} runs each), medians:")
    print(f"  direct (python trivial.py):              {ma * 1e3:8.1f} ms")
    print(f"  an interpreter start (python -c pass):   {start * 1e3:8.1f} ms")
    print(f"  importing loadeval_nb.core:              {imp * 1e3:8.1f} ms")
    print(f"  via run (one child, both sides interleaved): {mb * 1e3:8.1f} ms")
    print(f"    run / direct:                          {mb / ma:8.2f}x")
    added = (mb - ma) / 2
    print(
        f"    added per side, (run - direct) / 2:    {added * 1e3:8.1f} ms = {added / start:.2f} starts"
    )
    print(f"  via run --sequential (a child per side): {mc * 1e3:8.1f} ms")
    print(f"    run / (2 x direct):                    {mc / (2 * ma):8.2f}x")
    added = (mc - 2 * ma) / 2
    print(
        f"    added per side, (run - 2 direct) / 2:  {added * 1e3:8.1f} ms = {added / start:.2f} starts"
    )


if __name__ == "__main__":
    main()
