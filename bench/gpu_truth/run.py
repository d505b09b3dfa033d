"""The command: which checks run, on what, for how long; each check's records printed as
they come and written to ``--json`` after every check; the closing line."""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

import torch

from loadeval_nb import __version__
from loadeval_nb.core.measure import step_path

from . import __doc__ as DOC
from . import fake_nvml
from .checks import CHECKS
from .harness import Ctx
from .nocuda import NO_CUDA_LINE, dry_by_env
from .report import Record, format_record, markdown_table, same, summary_line, write_json

# what a bare GPU machine lacks and docs/gpu.md carries as wheels (prepare.sh)
CARRIED = ("bokeh", "jupyter_bokeh", "ipywidgets", "ipython", "ipykernel", "nbclient")


def parse_only(text: Optional[str]) -> list[str]:
    """``--only util,seed`` -> the checks in the order a run takes them."""
    if not text:
        return list(CHECKS)
    asked = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in asked if x not in CHECKS]
    if unknown or not asked:
        raise ValueError(
            f"--only {text}: {', '.join(unknown) or 'nothing'} is not a check; name one or "
            f"more of {', '.join(CHECKS)}, separated by commas."
        )
    return [name for name in CHECKS if name in asked]


def run_check(name: str, ctx: Ctx) -> tuple[list[Record], bool]:
    """Run one check; an exception is one failed record, and the other checks still run.
    Returns the records and whether it raised."""
    raised = False
    try:
        recs = CHECKS[name](ctx) or [same(name, "records", "none", "some", False, "reports")]
    except Exception as e:
        raised = True
        print("    " + traceback.format_exc().replace("\n", "\n    ").rstrip())
        recs = [
            same(
                name,
                "ran to the end",
                f"raised {type(e).__name__}: {e}",
                "no exception",
                False,
                "runs",
            )
        ]
    finally:
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
    return recs, raised


def versions() -> dict[str, str]:
    out = {}
    for name in CARRIED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def header(ctx: Ctx, names: Sequence[str]) -> dict[str, Any]:
    return {
        "device": torch.cuda.get_device_name() if ctx.cuda else "CPU (dry run)",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "loadeval_nb": __version__,
        "step_path": step_path(),
        "runs": "dry" if ctx.dry else "quick" if ctx.quick else "full",
        "checks_asked": list(names),
        "started": dt.datetime.now().isoformat(timespec="seconds"),
        "packages": versions(),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.gpu_truth",
        description=DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--quick", action="store_true", help="shorter runs (wider noise)")
    ap.add_argument("--only", metavar="CHECKS", help=f"some of {','.join(CHECKS)}")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        default=dry_by_env(),
        help="run every check's code on CPU with tiny sizes (figures mean nothing)",
    )
    ap.add_argument("--json", type=Path, metavar="PATH", help="write the figures here")
    ap.add_argument(
        "--table",
        action="store_true",
        help="print the figures at the end as docs/gpu.md's results table (markdown)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        metavar="SECONDS",
        help="start no check once this many seconds have passed (the rest: not run)",
    )
    args = ap.parse_args(argv)
    try:
        names = parse_only(args.only)
    except ValueError as e:
        ap.error(str(e))
    if args.budget_s is not None and not args.budget_s > 0:
        ap.error(f"--budget-s {args.budget_s:g}: give a positive number of seconds.")
    if not args.dry_run and not torch.cuda.is_available():  # main() called from Python
        print(NO_CUDA_LINE)
        return 0
    if args.dry_run:
        fake_nvml.install()  # the tool's NVML series exists, so the code that reads it runs
        # tiny tensors: one thread, not threads that spin for cores a busy machine lacks
        torch.set_num_threads(1)
    dev = torch.device("cpu" if args.dry_run else "cuda")
    torch.backends.cudnn.benchmark = True  # convolutions tuned once per shape, in warm-ups
    started = time.perf_counter()
    records: list[Record] = []
    timings: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpu_truth-") as tmp:
        ctx = Ctx(dev, args.dry_run, args.quick, Path(tmp))
        head = header(ctx, names)
        print(
            f"gpu_truth: {head['device']}; torch {head['torch']} (CUDA {head['cuda']}), "
            f"Python {head['python']}, loadeval_nb {head['loadeval_nb']} ({head['step_path']} "
            f"step path); {head['runs']} runs; checks: {', '.join(names)}\n"
            f"  packages: {', '.join(f'{k} {v}' for k, v in head['packages'].items())}",
            flush=True,
        )
        for name in names:
            print(f"\n[{name}]", flush=True)
            spent = time.perf_counter() - started
            if args.budget_s is not None and spent >= args.budget_s:
                recs, raised = (
                    [
                        same(
                            name,
                            "not run",
                            f"{spent:.0f} s spent",
                            f"a budget of {args.budget_s:g} s",
                            False,
                            "runs within --budget-s",
                            f"run it alone: --only {name}",
                        )
                    ],
                    False,
                )
                secs = 0.0
            else:
                t = time.perf_counter()
                recs, raised = run_check(name, ctx)
                secs = time.perf_counter() - t
            for r in recs:
                print(format_record(r), flush=True)
            print(f"  ({secs:.0f} s)", flush=True)
            records += recs
            timings[name] = {"seconds": round(secs, 1), "raised": raised}
            if args.json:
                write_json(args.json, head, records, checks=timings, finished=False)
    total = time.perf_counter() - started
    if args.json:
        write_json(args.json, head, records, checks=timings, finished=True, seconds=round(total, 1))
    if args.table:
        print("\n" + markdown_table(records))
    print(f"\n({total:.0f} s in all)")
    print(summary_line(records, args.dry_run), flush=True)
    if args.dry_run:
        return 1 if any(t["raised"] for t in timings.values()) else 0
    return 0 if all(r.ok is not False for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
