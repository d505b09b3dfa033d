"""``python -m loadeval_nb run``: the command line's front end over :func:`run_script`
(``%loadeval_run`` is the notebook's): a line on stderr as each side starts, the verdict
on stdout, the exit status, and the sentence for a run a signal stopped."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from typing import Any, Optional

from ....core.errors import LoadEvalError, OptionError
from ..spec import MEASURES
from .launch import Signalled, launcher_rank, stop_on_signals
from .options import option_sentence, script_settings
from .run import ScriptHooks, ScriptResult, run_script

CLI = "cli"
"""How the command spells a next step: as its own options (``--steps 400``), not as a
script's keywords (``steps=400``)."""


def run_command(args: argparse.Namespace, target: list[str]) -> int:
    """Run ``target`` with the options ``args`` (parsed by the ``run`` command's parser);
    the exit status: 0 with a verdict, 1 when the script failed, ``128 + n`` when signal
    ``n`` stopped it. :class:`LoadEvalError` for a bad option (the caller's exit 2)."""
    settings, ranks = script_settings(args)
    launcher = launcher_rank()  # one rank of a job the user's own launcher started

    class Say(ScriptHooks):
        def side_started(self, which: str, log_dir: str, stamp: str) -> None:
            if launcher is None or launcher.rank == 0:  # one line a job, not one a rank
                print(f"loadeval_nb: {MEASURES[which]} ...", file=sys.stderr, flush=True)

    with stop_on_signals() as stop:
        started = time.time()
        try:
            result = run_script(
                target,
                settings,
                ranks=ranks,
                loader_index=args.loader,
                loader_from=args.loader_from,
                timeout_s=args.timeout,
                hooks=Say(),
                launcher=launcher,
                prove_straggler=args.prove_straggler,
            )
        except OptionError as e:
            raise LoadEvalError(option_sentence(e)) from None
        except Signalled:
            result = None  # every process of the script was stopped; ``stop`` says by what
        except KeyboardInterrupt:  # where no handler could be installed
            result, stop.signum = None, signal.SIGINT
        code = 0
        known = result is not None and not result.ok  # its own failure, known before a stop
        if result is not None and (stop.signum is None or known):
            code = _say_result(args, target, result)
        if stop.signum is not None and not known:  # also one that came while the result was
            # written; a failure already said is the answer (under a launcher, the stop is
            # the launcher's, after another rank ended)
            log_dir = args.log_dir or (launcher.default_log_dir() if launcher else None)
            with contextlib.suppress(OSError):  # a closed terminal (SIGHUP) takes no line
                print(
                    f"loadeval_nb: {_stopped(stop.name, log_dir, started)}",
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
    if log_dir and not os.path.isdir(log_dir):
        return f"{said}; no run log had been written yet."
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


def _say_result(args: argparse.Namespace, target: list[str], result: ScriptResult) -> int:
    if not result.ok:
        print(f"loadeval_nb: {result.error}", file=sys.stderr)
        return (result.exit_code or 1) if result.rank is not None else 1
    if result.rank:  # another rank than rank 0 of the user's launcher: where its logs are
        if args.log_dir:
            said = f"its run logs are in {result.log_dir}, and rank 0 prints the ranks' report."
        else:  # rank 0 removes the job's temporary folder once it has read it
            said = "rank 0 prints the ranks' report (--log-dir keeps the run logs)."
        print(f"loadeval_nb: rank {result.rank} measured its pair; {said}", file=sys.stderr)
        return 0
    print(result.text(CLI))
    for note in result.notes:
        print(f"loadeval_nb: note: {note}", file=sys.stderr)
    if args.log_dir:
        print(f"loadeval_nb: run logs: {', '.join(result.log_paths.values())}", file=sys.stderr)
    if args.out:
        print(save_script_report(result, args.out, f"loadeval_nb run {' '.join(target)}"))
    return 0


def save_script_report(result: ScriptResult, path: str, title: str) -> Any:
    """Write ``result``'s standalone HTML report (the pair's, or the ranks') to ``path``;
    what ``save_report`` returns (the path). Both front ends save through here."""
    from ....viz import save_report

    if result.ranks is not None:
        return save_report(path=path, title=title, ranks=result.ranks)
    return save_report(result.real, result.ideal, path, title=title)
