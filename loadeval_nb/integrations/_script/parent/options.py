"""The ``run`` command's options, for both of its front ends: ``python -m loadeval_nb run``
and ``%loadeval_run`` (IPython's ``%run`` and the ``python`` command line share theirs
the same way). Their parser and defaults (:func:`add_run_parser`), the split between
ours and the script's words (:func:`split_run`), their checks (:func:`script_settings`:
the checked :class:`~loadeval_nb.RunSettings` and the ranks) and the sentence that names
a bad one by its option (:func:`option_sentence`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

from ....core._shared import check_workers, deprecated
from ....core.errors import LoadEvalError, OptionError
from ....core.explore import RunSettings
from ...trackers import check_log_to
from ..loaders import parse_loader_from
from ..words import said_as_flag

if TYPE_CHECKING:  # imported when ranks are asked for (psutil, subprocess)
    from .launch import Torchrun

COMMAND = "python -m loadeval_nb run"
"""How the command line spells the command (``%loadeval_run`` in a notebook)."""

RUN_USAGE = f"{COMMAND} [options] SCRIPT [ARGS...]\n       {COMMAND} [options] -m MODULE [ARGS...]"

SCRIPT_TRAINER = "a script's Trainer lives in the script's own process"
"""Why a script's run cannot write to its Trainer's loggers (``--log-to trainer``)."""

RUN_HELP = (
    "measure a training script as it is: the real and the ideal run interleaved in one "
    "fresh process (--sequential: a fresh process for each)"
)


PAIR_OPTIONS: dict[str, dict[str, Any]] = {
    "--steps": {
        "default": "200",
        "help": "steps per run, warm-up included (default 200), or auto: stop each run once "
        "its median and mean step are known to ±5%% (30 to 2000 steps)",
    },
    "--warmup": {
        "type": int,
        "default": 10,
        "help": "warm-up steps per run left out of the statistics (default 10)",
    },
    "--cache": {
        "type": int,
        "default": 20,
        "help": "batches cached for the ideal run (default 20)",
    },
    "--cache-on": {
        "choices": ["host", "device"],
        "default": "host",
        "help": "keep cached batches as produced (host) or on the GPU (device: also excludes "
        "the copy)",
    },
    "--log-to": {
        "action": "append",
        "default": None,
        "metavar": "TRACKER",
        "help": "also write the verdict, the speedup, the step times and the settings to "
        "tensorboard:DIR, mlflow[:URI], wandb[:PROJECT] or, in a cell, trainer (the "
        "Trainer's own loggers); repeat it for more than one",
    },
    "--contention": {
        "action": argparse.BooleanOptionalAction,
        "default": None,
        "help": "a third arm: cached batches while the loader keeps producing, which splits "
        "the headroom into waiting for data and the CPU loading takes from the step (needs "
        "workers; default: where it adds at most a quarter to the pass; --no-contention: "
        "never)",
    },
    "--try": {
        "dest": "variants",
        "action": "append",
        "default": None,
        "metavar": "SETTINGS",
        "help": "a variant arm in the same pass: the loader rebuilt with other settings "
        "('num_workers=4, pin_memory=True'; num_workers, pin_memory, prefetch_factor, "
        "persistent_workers), its blocks interleaved with the real ones; the verdict says "
        "what it bought, with its interval. 'advice': what the advice names, measured in a "
        "second pass",
    },
}
"""The options the pair's two front ends share (``%%loadeval`` and the ``run`` command:
``python -m loadeval_nb run`` and ``%loadeval_run``), defined once: argparse's keywords
by option."""


def description(front_end: str = "") -> str:
    """The command's description; ``front_end`` adds what a front end shows beside the
    verdict (the notebook's dashboard and panel)."""
    return (
        "Run SCRIPT unmodified in a fresh process that measures its training DataLoader's "
        "real run and its ideal run (the loader's batches replayed from memory), interleaved "
        "in blocks (--sequential: a fresh process for each, the real run, then the ideal "
        f"run){front_end}. Options go before SCRIPT; everything after it is the script's. See "
        "docs/scripts.md."
    )


def add_run_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``run`` command to the subparsers ``sub``; returns its parser."""
    r: argparse.ArgumentParser = sub.add_parser(
        "run", usage=RUN_USAGE, help=RUN_HELP, description=description()
    )
    for flag in ("--steps", "--warmup", "--cache", "--cache-on"):
        r.add_argument(flag, **PAIR_OPTIONS[flag])
    r.add_argument("--log-dir", default=None, help="keep the run logs here")
    r.add_argument("--log-to", **PAIR_OPTIONS["--log-to"])
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
        "--loader-from",
        default=None,
        metavar="MODULE:NAME",
        help="measure the loader of this class (or this object), whatever iterable it is, "
        "where the script imports it from (mypkg.data:TrainStream; __main__:TrainStream for "
        "a class the script defines); see docs/scripts.md for the loaders found without it",
    )
    r.add_argument(
        "--sequential",
        action="store_true",
        help="a fresh process per side: the real run, then the ideal run (default: one "
        "process measures both, interleaved in blocks, so that a drift of the machine lands "
        "on both and the live plots move block by block)",
    )
    # deprecated (0.1.0's opt-in, long the default): still taken, warns once, goes in 0.3.0
    r.add_argument("--interleave", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--contention", **PAIR_OPTIONS["--contention"])
    r.add_argument("--try", **PAIR_OPTIONS["--try"])
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
    t.add_argument(
        "--prove-straggler",
        action="store_true",
        help="after the pair, in the same pass, put the ranks' suspect (the straggler, else "
        "the rank that waits most) to a counterfactual: its loader freed in some blocks, the "
        "runner-up's in others; the ranks' report says whether every rank's step recovers "
        "(needs ranks and the script's process group; three more arms of --steps each)",
    )
    return r


def run_parser(prog: str = "python -m loadeval_nb") -> argparse.ArgumentParser:
    """The ``run`` command's own options (:func:`split_run` separates them from the
    script's)."""
    p = argparse.ArgumentParser(prog=prog)
    return add_run_parser(p.add_subparsers(dest="command", required=True))


RUN_VALUED = {
    "--steps",
    "--warmup",
    "--cache",
    "--cache-on",
    "--log-dir",
    "--log-to",
    "-o",
    "--out",
    "--loader",
    "--loader-from",
    "--timeout",
    "--nproc-per-node",
    "--nnodes",
    "--rdzv-endpoint",
    "--rdzv-id",
    "--try",
}
"""The options that take a value (the next word is theirs, not the script's)."""


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


def option_sentence(e: LoadEvalError, command: str = COMMAND) -> str:
    """The sentence of ``e`` as ``command`` says it: a setting named by its option
    (``--cache``, not ``num_cached_batches``), the command by its own name."""
    if isinstance(e, OptionError):
        return said_as_flag(e)
    return str(e).replace(COMMAND, command)


def check_out(path: str) -> None:
    """One sentence for a report path that cannot be written, before the script runs."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise LoadEvalError(
            f"Cannot write the report to {path!r}; pass -o a file path in a folder you can "
            "write to."
        )


def steps_option(text: Any) -> Any:
    """``--steps`` as both front ends take it (``400`` or ``auto``): an int or ``"auto"``;
    one sentence for anything else."""
    if text == "auto":
        return text
    try:
        return int(text)
    except (TypeError, ValueError):
        raise LoadEvalError(f"--steps must be a number of steps or auto, not {text!r}.") from None


def _given(values: Optional[list[str]]) -> tuple[str, ...]:
    """``--try``'s values as given (an empty one included: it is one sentence, never
    silently nothing); none: ()."""
    return tuple(values) if values is not None else ()


def script_settings(args: argparse.Namespace) -> tuple[RunSettings, Optional[Torchrun]]:
    """``run``'s options (parsed by its parser) as the checked settings and the ranks
    (``Torchrun`` or None) to run a script with; :class:`LoadEvalError` naming the option
    for a bad one. Both front ends take their options through here."""
    if getattr(args, "interleave", False):  # 0.1.0's opt-in, long the default: a no-op
        deprecated("--interleave", "the default (interleaved blocks: leave the option out)")
    try:
        settings = RunSettings(
            steps=steps_option(args.steps),
            warmup=args.warmup,
            num_cached_batches=args.cache,
            cache_on=args.cache_on,
            log_dir=args.log_dir,
            interleave=not args.sequential,
            contention=getattr(args, "contention", None),
            log_to=tuple(args.log_to or ()),
            variants=_given(getattr(args, "variants", None)),
        )
    except OptionError as e:
        raise LoadEvalError(option_sentence(e)) from None
    check_log_to(settings.log_to, "--log-to", no_trainer=SCRIPT_TRAINER)
    if args.loader_from is not None:
        try:
            parse_loader_from(args.loader_from)
        except OptionError as e:
            raise LoadEvalError(option_sentence(e)) from None
    if args.out:
        check_out(args.out)
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
        from .launch import Torchrun

        ranks = Torchrun(
            nproc_per_node=args.nproc_per_node,
            nnodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint,
            rdzv_id=args.rdzv_id,
        )
    return settings, ranks
