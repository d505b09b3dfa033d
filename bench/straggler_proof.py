#!/usr/bin/env python
"""A straggler proven, not guessed (issue 29): launch a 2-rank DDP job under torchrun
(gloo, CPU) N times for each case, each launch measuring its pair, gathering it
(``gather_pair``: the skew test names a suspect) and putting the suspect to
``prove_straggler``; print each launch's suspect, the fleet's step with every loader
real and with the suspect's loader free (and with the runner-up's, the control), the
gain with its interval, the stopwatched cost of the slow rank's loading (the gain that
was built in), and the verdict.

    python bench/straggler_proof.py            # 5 launches of each case, ~5 min on 2 cores
    python bench/straggler_proof.py -n 2
    python bench/straggler_proof.py --runner   # the same through the zero-code runner

With ``--runner`` each launch is ``torchrun --nproc-per-node 2 -m loadeval_nb run
--prove-straggler --steps 60 --warmup 5 --cache 5 --log-dir DIR
tests/scripts/fixtures/ddp_train.py --batches 400`` (the pair, then the proof, in one pass
of the script's own loop; the proof read back with ``gather_logs(DIR)``); "slow rank 1":
``--slow-rank 1`` (4 ms an item on rank 1, 32 ms a batch: the built-in gain is that
constructed sleep, which a stopwatch reads a little longer); "equal ranks":
``--base-item-ms 1`` on both.

The ranks' script is tests/integrations/test_straggler_proof.py (its ``main``): a batch
of 8 items, a step of 10 ms of sleep and a DDP all-reduce; "slow rank 1": rank 1's items
sleep 4 ms more (32 ms a batch, in the main process); "equal ranks": every item sleeps
1 ms on both ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "tests" / "integrations" / "test_straggler_proof.py")
CASES = {"slow rank 1": {"SLOW_RANK": "1"}, "equal ranks": {"ITEM_S": "0.001"}}
DDP_TRAIN = str(ROOT / "tests" / "scripts" / "fixtures" / "ddp_train.py")
RUNNER_CASES = {"slow rank 1": ["--slow-rank", "1"], "equal ranks": ["--base-item-ms", "1"]}
RUNNER_BUILT_S = 8 * 0.004
"""The slow rank's constructed extra loading a batch under ``--runner``: 8 items × 4 ms."""


def _torchrun(args: Callable[[str], list[str]], limit_s: float, env: dict[str, str]) -> dict:
    """One 2-rank launch under torchrun of ``args(out)`` (``out`` a fresh folder):
    ``{"out": out, "launch_s": ...}``, or ``{"error": ...}``."""
    out = tempfile.mkdtemp(prefix="straggler-proof-")
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    full.pop("CUDA_VISIBLE_DEVICES", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", "2", *args(out)]  # fmt: skip
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return {"error": f"no report within {limit_s:g} s"}
    # a rank that aborts at its exit in torch's own teardown ("terminate called without an
    # active exception": gloo's threads, after destroy_process_group) once the reports are
    # written ended after the measurement: what it wrote is judged (as the tests do)
    torn_down = "terminate called without an active exception" in p.stderr
    if p.returncode != 0 and not (torn_down and os.listdir(out)):
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    return {"out": out, "launch_s": time.perf_counter() - t}


def launch(env: dict[str, str], limit_s: float) -> dict:
    """One launch: rank 0's report (or ``{"error": ...}``)."""
    done = _torchrun(lambda out: [SCRIPT, out], limit_s, env)
    if "error" in done:
        return done
    report = json.loads(Path(done["out"], "report.json").read_text())
    report["launch_s"] = done["launch_s"]
    return report


def launch_runner(args: list[str], limit_s: float) -> dict:
    """One launch through ``python -m loadeval_nb run --prove-straggler``: the proof the
    ranks wrote, as ``launch`` reports it (or ``{"error": ...}``)."""
    sys.path.insert(0, str(ROOT))
    from loadeval_nb.ranks import gather_logs

    done = _torchrun(
        lambda out: [
            "-m",
            "loadeval_nb",
            "run",
            "--prove-straggler",
            "--steps",
            "60",
            "--warmup",
            "5",
            "--cache",
            "5",
            "--log-dir",
            out,
            DDP_TRAIN,
            "--batches",
            "400",
            *args,
        ],  # fmt: skip
        limit_s,
        {},
    )
    if "error" in done:
        return done
    ranks = gather_logs(done["out"])
    proof = ranks.proof
    if proof is None:
        return {"error": "no proof in the ranks' report"}
    slow = "--slow-rank" in args
    return {
        "skew_straggler": ranks.straggler,
        "suspect": proof.suspect,
        "proven": proof.proven,
        "real_step_s": proof.real_step_s,
        "free_step_s": proof.free_step_s,
        "control_step_s": proof.control_step_s,
        "gain_s": proof.gain_s,
        "gain_ci": list(proof.gain_ci),
        "loading_s": [0.0, RUNNER_BUILT_S if slow else 0.0],
        "launch_s": done["launch_s"],
        "text": ranks.text("cli"),
    }


def ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="launches of each case")
    ap.add_argument("--limit-s", type=float, default=300.0, help="one launch's time limit")
    ap.add_argument(
        "--runner",
        action="store_true",
        help="launch python -m loadeval_nb run --prove-straggler on ddp_train.py instead",
    )
    ap.add_argument("--show", action="store_true", help="print each launch's ranks' report")
    args = ap.parse_args()
    head = (
        f"{'case':<12} {'#':>2} {'suspect':>7} {'skew':>5}  {'fleet step ms: real → free':>26}"
        f" {'(control)':>9}  {'gain ms [95% CI]':<22} {'built-in':>8}  {'gain/built':>10}  verdict"
    )
    print(head)
    print("-" * len(head))
    summary = []
    cases = RUNNER_CASES if args.runner else CASES
    for name, case in cases.items():
        proven, ratios = 0, []
        for k in range(1, args.n + 1):
            r = (
                launch_runner(case, args.limit_s)  # type: ignore[arg-type]
                if args.runner
                else launch(case, args.limit_s)  # type: ignore[arg-type]
            )
            if "error" in r:
                print(f"{name:<12} {k:>2}  failed: {r['error']}")
                continue
            lo, hi = r["gain_ci"]
            built = r["loading_s"][1] - r["loading_s"][0] if name.startswith("slow") else 0.0
            ratio = r["gain_s"] / built if built else None
            if ratio is not None:
                ratios.append(ratio)
            proven += bool(r["proven"])
            skew = "named" if r["skew_straggler"] == r["suspect"] else "-"
            steps = f"{ms(r['real_step_s'])} → {ms(r['free_step_s'])}"
            ci = f"{ms(r['gain_s'])} [{ms(lo)}, {ms(hi)}]"
            print(
                f"{name:<12} {k:>2} {r['suspect']:>7} {skew:>5}  {steps:>26}"
                f" {'(' + ms(r['control_step_s']) + ')':>9}  {ci:<22}"
                f" {ms(built):>8}  {'' if ratio is None else f'{ratio:.3f}':>10}  "
                f"{'proven' if r['proven'] else 'not a straggler'}"
            )
            if args.show and "text" in r:
                print(r["text"])
        summary.append((name, proven, ratios))
    print()
    for name, proven, ratios in summary:
        extra = f"; gain / built-in gain {min(ratios):.3f} to {max(ratios):.3f}" if ratios else ""
        print(f"{name}: proven in {proven} of {args.n} launches{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
