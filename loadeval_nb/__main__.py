"""Command line: ``python -m loadeval_nb demo | run | diagnose | report | compare | ranks``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any, Optional

from .core import LoadEvalError, OptionError, RunSettings
from .core._shared import check_workers

__all__ = ["main"]

CLI = "cli"
"""How every verdict and result this command prints spells a next step: as its own
options (``--steps 400``), not as a script's keywords (``steps=400``)."""
DEMO_FLAGS = {"steps": "--steps", "warmup": "--warmup", "num_cached_batches": "--cache"}
RUN_USAGE = (
    "python -m loadeval_nb run [options] SCRIPT [ARGS...]\n"
    "       python -m loadeval_nb run [options] -m MODULE [ARGS...]"
)


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
    _run_parser(sub)
    g = sub.add_parser("diagnose", help="print the verdict for two run logs")
    g.add_argument("real")
    g.add_argument("ideal")
    r = sub.add_parser("report", help="write a standalone HTML report for two run logs")
    r.add_argument("real")
    r.add_argument("ideal")
    r.add_argument("-o", "--out", default="loadeval-report.html")
    c = sub.add_parser(
        "compare",
        help="compare two run logs' step times; exit 1 on a significant slowdown over the limit",
    )
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument(
        "--max-slowdown",
        default="5%",
        help="slowdown allowed before it counts as a regression (default 5%%)",
    )
    k = sub.add_parser(
        "ranks",
        help="gather the per-rank run logs in a folder (every node's, on a shared disk) and "
        "print the ranks' report",
    )
    k.add_argument("dir", help="the folder the ranks wrote their run logs to (--log-dir)")
    k.add_argument("-o", "--out", default=None, help="also write an HTML report here")
    return p


def _run_parser(sub: Any) -> None:
    r = sub.add_parser(
        "run",
        usage=RUN_USAGE,
        help="measure a training script as it is: a real run, then an ideal run, each in a "
        "fresh process",
        description="Run SCRIPT unmodified in a fresh process for each side (the real run, "
        "then the ideal run with its training DataLoader's batches replayed from memory), "
        "print the verdict and exit 0. Options go before SCRIPT; everything after it is "
        "the script's. See docs/scripts.md.",
    )
    r.add_argument(
        "--steps",
        default="200",
        help="steps per run, warm-up included, or 'auto' (default 200)",
    )
    r.add_argument("--warmup", type=int, default=10, help="warm-up steps per run (default 10)")
    r.add_argument(
        "--cache", type=int, default=20, help="batches cached for the ideal run (default 20)"
    )
    r.add_argument(
        "--cache-on",
        choices=["host", "device"],
        default="host",
        help="keep the cached batches in host or GPU memory (default host)",
    )
    r.add_argument("--log-dir", default=None, help="keep the run logs here")
    r.add_argument("-o", "--out", default=None, help="write an HTML report here")
    r.add_argument(
        "--loader",
        type=int,
        default=None,
        metavar="K",
        help="measure the K-th DataLoader the script iterates (default: the first pass "
        "with gradients on that draws more than the warm-up's batches)",
    )
    r.add_argument(
        "--sequential",
        action="store_true",
        help="a fresh process per side: the real run, then the ideal run (default: one "
        "process measures both, interleaved in blocks, so that a drift of the machine lands "
        "on both and the live plots move block by block)",
    )
    r.add_argument("--interleave", action="store_true", help=argparse.SUPPRESS)  # the default
    r.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds a side may run before its steps are measured (default 1800)",
    )
    t = r.add_argument_group("ranks (torch.distributed.run)")
    t.add_argument(
        "--nproc-per-node", type=int, default=None, help="launch each side on N ranks per node"
    )
    t.add_argument("--nnodes", type=int, default=1, help="nodes (default 1)")
    t.add_argument("--rdzv-endpoint", default=None, help="HOST:PORT where the nodes meet")
    t.add_argument("--rdzv-id", default=None, help="the job's id, the same on every node")


RUN_VALUED = {
    "--steps",
    "--warmup",
    "--cache",
    "--cache-on",
    "--log-dir",
    "-o",
    "--out",
    "--loader",
    "--timeout",
    "--nproc-per-node",
    "--nnodes",
    "--rdzv-endpoint",
    "--rdzv-id",
}


def split_run(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``run``'s own options, and the script with its arguments (``SCRIPT ARGS...`` or
    ``-m MODULE ARGS...``): everything from the first word that is not one of ours is the
    script's, options included."""
    ours: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return ours, list(argv[i:])
        if a == "--":
            return ours, list(argv[i + 1 :])
        if a.split("=", 1)[0] in RUN_VALUED and "=" not in a:
            ours += argv[i : i + 2]
            i += 2
            continue
        if a.startswith("-") and a != "-":
            ours.append(a)  # ours, or argparse says it is not
            i += 1
            continue
        return ours, list(argv[i:])
    return ours, []


def _check_out(path: str) -> None:
    """One sentence for a report path that cannot be written, before the script runs."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise LoadEvalError(
            f"Cannot write the report to {path!r}; pass -o a file path in a folder you can "
            "write to."
        )


def script_settings(args: argparse.Namespace) -> tuple[RunSettings, Any]:
    """``run``'s options (parsed by its parser) as the settings and the ranks
    (``Torchrun`` or None) to run a script with; :class:`LoadEvalError` naming the option
    for a bad one. ``%loadeval_run`` takes the same options through here."""
    from .integrations import Torchrun

    steps: Any = "auto" if args.steps == "auto" else args.steps
    if steps != "auto":
        try:
            steps = int(steps)
        except ValueError:
            raise LoadEvalError(
                f"--steps must be a number of steps or auto, not {args.steps!r}."
            ) from None
    try:
        settings = RunSettings(
            steps=steps,
            warmup=args.warmup,
            num_cached_batches=args.cache,
            cache_on=args.cache_on,
            log_dir=args.log_dir,
            interleave=not args.sequential,
        )
    except OptionError as e:
        raise LoadEvalError(e.renamed(DEMO_FLAGS.get(e.option, e.option))) from None
    if args.out:
        _check_out(args.out)
    ranks = None
    if args.nproc_per_node is not None or args.nnodes != 1:
        if args.nproc_per_node is None:
            raise LoadEvalError("--nnodes needs --nproc-per-node (ranks on each node).")
        if args.nproc_per_node < 1:
            raise LoadEvalError(
                f"--nproc-per-node must be a number of ranks from 1, not {args.nproc_per_node}."
            )
        check_workers(args.nproc_per_node, "--nproc-per-node")
        if args.nnodes < 1:
            raise LoadEvalError(f"--nnodes must be 1 or more, not {args.nnodes}.")
        if args.nnodes > 1 and not (args.rdzv_endpoint and args.rdzv_id):
            raise LoadEvalError(
                "Several nodes meet at a rendezvous: pass --rdzv-endpoint HOST:PORT and "
                "--rdzv-id JOB, the same on every node (and a --log-dir they share)."
            )
        ranks = Torchrun(
            nproc_per_node=args.nproc_per_node,
            nnodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_id=args.rdzv_id,
        )
    return settings, ranks


def run_parser(prog: str = "python -m loadeval_nb") -> argparse.ArgumentParser:
    """The ``run`` command's own options (``split_run`` separates them from the script's)."""
    p = argparse.ArgumentParser(prog=prog)
    sub = p.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    return sub.choices["run"]


def _run(args: argparse.Namespace, target: list[str]) -> int:
    from .integrations import ScriptHooks, run_script
    from .integrations._shared import Signalled, stop_on_signals

    settings, ranks = script_settings(args)

    class Say(ScriptHooks):
        def side_started(self, which: str, log_dir: str, stamp: str) -> None:
            what = {
                "real": "the real run (the script as it is)",
                "ideal": "the ideal run (its training loader's batches replayed from memory)",
                "interleave": "the real and the ideal run, interleaved",
            }[which]
            print(f"loadeval_nb: {what} ...", file=sys.stderr, flush=True)

    with stop_on_signals() as stop:
        started = time.time()
        try:
            result = run_script(
                target,
                settings,
                ranks=ranks,
                loader=args.loader,
                timeout_s=args.timeout,
                hooks=Say(),
            )
        except OptionError as e:
            raise LoadEvalError(e.renamed(RUN_FLAGS.get(e.option, e.option))) from None
        except Signalled:
            result = None  # every process of the script was stopped; ``stop`` says by what
        except KeyboardInterrupt:  # where no handler could be installed
            result, stop.signum = None, signal.SIGINT
        code = 0
        if stop.signum is None and result is not None:
            code = _say_result(args, target, result)
        if stop.signum is not None:  # also one that came while the result was written
            with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) takes no line
                print(
                    f"loadeval_nb: {_stopped(stop.name, args.log_dir, started)}",
                    file=sys.stderr,
                    flush=True,
                )
            return stop.exit_code
    return code


def _stopped(by: str, log_dir: Optional[str], started: float) -> str:
    """The sentence for a run a signal stopped: by what, and where the logs written so far
    are (without --log-dir they were in a temporary folder, removed with the unfinished
    pair they held)."""
    said = f"stopped ({by}); the script's processes were stopped"
    if not log_dir:
        return (
            f"{said} and no run log was kept (pass --log-dir DIR to keep the logs a stopped "
            "run has written)."
        )
    try:
        written = [
            n
            for n in os.listdir(log_dir)
            if n.startswith("loadeval-")
            and n.endswith(".json")
            and os.path.getmtime(os.path.join(log_dir, n)) >= started - 1
        ]
    except OSError:
        written = []
    if not written:
        return f"{said}; no run log had been written to {log_dir} yet."
    if len(written) == 1:
        return f"{said}; the run log written so far is in {log_dir}."
    return f"{said}; the {len(written)} run logs written so far are in {log_dir}."


def _say_result(args: argparse.Namespace, target: list[str], result: Any) -> int:
    if not result.ok:
        print(f"loadeval_nb: {result.error}", file=sys.stderr)
        return 1
    print((result.ranks if result.ranks is not None else result.diagnosis).text(CLI))
    for note in result.notes:
        print(f"loadeval_nb: note: {note}", file=sys.stderr)
    if args.log_dir:
        print(f"loadeval_nb: run logs: {', '.join(result.log_paths.values())}", file=sys.stderr)
    if args.out:
        from .viz import save_report

        title = f"loadeval_nb run {' '.join(target)}"
        if result.ranks is not None:
            print(save_report(path=args.out, title=title, ranks=result.ranks))
        else:
            print(save_report(result.real, result.ideal, args.out, title=title))
    return 0


RUN_FLAGS = {
    **DEMO_FLAGS,
    "cache_on": "--cache-on",
    "loader": "--loader",
    "timeout": "--timeout",
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    target: list[str] = []
    if argv[:1] == ["run"]:
        ours, target = split_run(argv[1:])
        argv = ["run", *ours]
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args, target)
        if args.command == "ranks":
            from .core import gather_logs

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
            from .core import diagnose

            print(diagnose(args.real, args.ideal).text(CLI))
        elif args.command == "report":
            from .viz import save_report

            print(save_report(args.real, args.ideal, args.out))
        elif args.command == "compare":
            from .core import compare_runs

            result = compare_runs(args.before, args.after, max_slowdown=args.max_slowdown)
            print(result.text(CLI))
            if result.ratio is None:  # a gate that could not compare must not pass
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
