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
from ..._options import RUN, add_arguments, settings_from, valued
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
    add_arguments(r, RUN)  # every option from the one table (integrations/_options.py)
    return r


def run_parser(prog: str = "python -m loadeval_nb") -> argparse.ArgumentParser:
    """The ``run`` command's own options (:func:`split_run` separates them from the
    script's)."""
    p = argparse.ArgumentParser(prog=prog)
    return add_run_parser(p.add_subparsers(dest="command", required=True))


RUN_VALUED = valued(RUN)
"""The options that take a value (the next word is theirs, not the script's): the
table's, never a list kept beside the parser."""


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


def script_settings(args: argparse.Namespace) -> tuple[RunSettings, Optional[Torchrun]]:
    """``run``'s options (parsed by its parser) as the checked settings and the ranks
    (``Torchrun`` or None) to run a script with; :class:`LoadEvalError` naming the option
    for a bad one. Both front ends take their options through here."""
    if getattr(args, "interleave", False):  # 0.1.0's opt-in, long the default: a no-op
        deprecated("--interleave", "the default (interleaved blocks: leave the option out)")
    try:
        settings = settings_from(args, RUN)
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
