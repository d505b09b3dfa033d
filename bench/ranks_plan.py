#!/usr/bin/env python
"""Ranks whose loaders differ (issue 26): launch ``python -m loadeval_nb run
--nproc-per-node 2`` on a DDP script whose ranks have other ``num_workers`` (1 vs 2, 2 vs
0) or jittered items, N times each, and count the launches that hang (stopped by the
bench's own time limit), fail, or finish with both ranks on one plan.

    python bench/ranks_plan.py                 # 10 launches of each case
    python bench/ranks_plan.py -n 3 --limit-s 60
    python bench/ranks_plan.py --pythonpath /tmp/old-checkout   # another version's code
    python bench/ranks_plan.py --api    # run_pair + gather_pair inside the job (torchrun)

A launch that hangs is killed with its process group after ``--limit-s``; the script is
tests/scripts/fixtures/ddp_train.py (gloo, DDP, a DistributedSampler, 80 batches a rank);
with ``--api``, tests/integrations/ddp_script.py under ``torchrun`` (``run_pair`` then
``gather_pair`` on every rank, as docs/torchrun.md shows).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "tests" / "scripts" / "fixtures" / "ddp_train.py")
API_SCRIPT = str(ROOT / "tests" / "integrations" / "ddp_script.py")
CASES = {
    "1 vs 2 workers": ("1,2", "0"),
    "2 vs 0 workers": ("2,0", "0"),
    "jittered items": ("0,2", "3"),
}


def launch(
    workers: str, jitter: str, limit_s: float, pythonpath: str, api: bool = False
) -> tuple[str, float, str]:
    """One launch: (outcome, seconds, the plans the ranks logged)."""
    logs = tempfile.mkdtemp(prefix="ranks-plan-")
    cmd = [
        sys.executable, "-m", "loadeval_nb", "run", "--steps", "60", "--warmup", "5",
        "--cache", "5", "--log-dir", logs, "--nproc-per-node", "2",
        SCRIPT, "--workers", workers, "--jitter-ms", jitter, "--batches", "80", "--step-ms", "2",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONWARNINGS="ignore", WORKERS=workers)
    if api:  # jitter: the api script's items take no time of their own
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", API_SCRIPT, logs]  # fmt: skip
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    t = time.perf_counter()
    p = subprocess.Popen(
        cmd,
        env=env,
        cwd=pythonpath or None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = p.communicate(timeout=limit_s)
        outcome = "ok" if p.returncode == 0 else f"exit {p.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-9", "-f", logs], check=False)  # its ranks, by the log folder
        p.communicate()
        outcome, err = "hang", b""
    seconds = time.perf_counter() - t
    plans = []
    for path in sorted(glob.glob(os.path.join(logs, "*-real-rank*.json"))):
        with open(path) as f:
            plans.append(json.load(f).get("settings", {}).get("interleaved"))
    if outcome == "ok" and (len(plans) != 2 or plans[0] != plans[1]):
        outcome = "plans differ"
    tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
    return outcome, seconds, json.dumps(plans[0]) if plans else (tail[0] if tail else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, help="launches of each case")
    ap.add_argument("--limit-s", type=float, default=120.0, help="a launch past this hangs")
    ap.add_argument("--pythonpath", default="", help="measure another checkout's code")
    ap.add_argument("--api", action="store_true", help="run_pair + gather_pair under torchrun")
    args = ap.parse_args()
    print(f"{'case':<16} {'ok':>3} {'hang':>5} {'other':>6}  median s  plan agreed (last)")
    for name, (workers, jitter) in CASES.items():
        results = [
            launch(workers, jitter, args.limit_s, args.pythonpath, args.api) for _ in range(args.n)
        ]
        ok = sum(r[0] == "ok" for r in results)
        hang = sum(r[0] == "hang" for r in results)
        secs = sorted(r[1] for r in results)[len(results) // 2]
        print(
            f"{name:<16} {ok:>3} {hang:>5} {args.n - ok - hang:>6}  {secs:8.1f}  {results[-1][2]}"
        )
        for r in results:
            if r[0] not in ("ok", "hang"):
                print(f"    {r[0]}: {r[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
