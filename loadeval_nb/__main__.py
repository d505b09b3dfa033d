"""Command line: ``python -m loadeval_nb demo | run | diagnose | report | compare | ranks``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Optional

from .core._shared import check_workers
from .core.errors import LoadEvalError, OptionError
from .core.explore import RunSettings
from .integrations._shared import CLI, add_run_parser, run_command, split_run

__all__ = ["main"]

DEMO_FLAGS = {"steps": "--steps", "warmup": "--warmup", "num_cached_batches": "--cache"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m loadeval_nb", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the built-in synthetic workload as a real + replay pair")
    d.add_argument(
        "--steps", type=int, default=65, help="steps per run, warm-up included (default 65)"
    )
    d.add_argument("--warmup", type=int, default=5, help="warm-up steps per run (default 5)")
    d.add_argument("--batch-size", type=int, default=32)
    d.add_argument("--workers", type=int, default=1, help="DataLoader num_workers (default 1)")
    d.add_argument(
        "--cache", type=int, default=10, help="batches cached for the ideal run (default 10)"
    )
    d.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    d.add_argument("--out", default="loadeval-demo.html", help="HTML report path ('' for none)")
    d.add_argument("--log-dir", default=None, help="also write the two run logs here")
    add_run_parser(sub)  # the run command's options live with it (integrations/_script)
    g = sub.add_parser("diagnose", help="print the verdict for two run logs")
    g.add_argument("real")
    g.add_argument("ideal")
    r = sub.add_parser("report", help="write a standalone HTML report for two run logs")
    r.add_argument("real")
    r.add_argument("ideal")
    r.add_argument("-o", "--out", default="loadeval-report.html")
    c = sub.add_parser(
        "compare",
        help="compare two run logs, ladders or transform splits: the step time and the stage "
        "that changed; exit 1 on a significant slowdown over the limit",
    )
    c.add_argument("before", help="a run log, a ladder or a transform split (JSON)")
    c.add_argument("after", help="the same kind of file, measured after the change")
    c.add_argument(
        "--max-slowdown",
        default="5%",
        help="slowdown allowed before it counts as a regression (default 5%%); with --stage, "
        "that stage's slowdown as a share of the whole step (a sample, for splits) before",
    )
    c.add_argument(
        "--stage",
        default=None,
        metavar="NAME",
        help="gate on this stage alone: a run's wait, compute or h2d; a ladder's rung "
        "(host, samples, real); a transform step (RandomResizedCrop)",
    )
    k = sub.add_parser(
        "ranks",
        help="gather the per-rank run logs in a folder (every node's, on a shared disk) and "
        "print the ranks' report",
    )
    k.add_argument("dir", help="the folder the ranks wrote their run logs to (--log-dir)")
    k.add_argument("-o", "--out", default=None, help="also write an HTML report here")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    target: list[str] = []
    if argv[:1] == ["run"]:
        ours, target = split_run(argv[1:])
        argv = ["run", *ours]
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return run_command(args, target)
        if args.command == "ranks":
            from .core.ranks import gather_logs

            report = gather_logs(args.dir)
            print(report.text(CLI))
            if args.out:
                from .viz import save_report

                print(
                    save_report(path=args.out, title=f"loadeval_nb ranks {args.dir}", ranks=report)
                )
        elif args.command == "demo":
            # the run's settings are checked once, by RunSettings, under the CLI's flags
            try:
                RunSettings(steps=args.steps, warmup=args.warmup, num_cached_batches=args.cache)
            except OptionError as e:
                raise LoadEvalError(e.renamed(DEMO_FLAGS.get(e.option, e.option))) from None
            if args.batch_size < 1:
                raise LoadEvalError(
                    f"--batch-size must be a positive integer, not {args.batch_size}."
                )
            check_workers(args.workers, "--workers")
            if args.device is not None:
                import torch

                try:
                    torch.device(args.device)
                except (RuntimeError, ValueError):
                    raise LoadEvalError(
                        f"--device {args.device!r} is not a device; use cpu, cuda or cuda:N."
                    ) from None
            from .demo import run_demo

            run_demo(
                steps=args.steps,
                warmup=args.warmup,
                batch_size=args.batch_size,
                num_workers=args.workers,
                num_cached_batches=args.cache,
                device=args.device,
                out=args.out or None,
                log_dir=args.log_dir,
            )
        elif args.command == "diagnose":
            from .core.verdict import diagnose

            print(diagnose(args.real, args.ideal).text(CLI))
        elif args.command == "report":
            from .viz import save_report

            print(save_report(args.real, args.ideal, args.out))
        elif args.command == "compare":
            from .core.verdict import compare_runs

            try:
                result = compare_runs(
                    args.before, args.after, max_slowdown=args.max_slowdown, stage=args.stage
                )
            except OptionError as e:
                raise LoadEvalError(e.renamed(f"--{e.option.replace('_', '-')}")) from None
            print(result.text(CLI))
            if not result.judged:  # a gate that could not compare must not pass
                return 2
            return 1 if result.regression else 0
    except LoadEvalError as e:
        print(f"loadeval_nb: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a report or log path that cannot be written
        where = f" {e.filename!r}" if e.filename else ""
        print(
            f"loadeval_nb: cannot write{where} ({e.strerror or e}); pass a path you can write to.",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
