"""The child process of ``python -m loadeval_nb run``: runs the user's script, unmodified,
with its training loader measured, and reports to the parent.

    LOADEVAL_NB_CHILD='{...}' python -m loadeval_nb.integrations._script.child SCRIPT [ARGS]
    LOADEVAL_NB_CHILD='{...}' python -m loadeval_nb.integrations._script.child -m MODULE [ARGS]

(under ``torch.distributed.run``, the same module on every rank). The script runs as
``python SCRIPT ARGS`` would run it (``runpy``: ``__name__ == "__main__"``, ``sys.argv``
and ``sys.path[0]`` as Python sets them), and its exceptions and exit codes are its own:
a traceback the script raises is printed as Python prints it, without our frames.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from typing import Any, Optional

from ..loaders import LoaderFromError, loader_from_unfound
from ..spec import ChildSpec, ChildStatus
from ..spec import rank_key as _rank
from .guard import guard, park_if_ending
from .pick import Measured, Picker, Refused, patched_dataloader
from .sides import side_for


def run_target(target: list[str]) -> dict[str, Any]:
    """Run ``[SCRIPT, ARGS...]`` or ``["-m", MODULE, ARGS...]`` as ``python`` would; the
    names it defined (where it ran to its end)."""
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        sys.path[0] = os.getcwd()  # python -m puts the working folder first
        return runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        path = target[0]
        sys.argv = list(target)
        # python SCRIPT puts its folder first; python FOLDER (with a __main__.py) the folder
        here = os.path.abspath(path)
        sys.path[0] = here if os.path.isdir(here) else os.path.dirname(here)
        return runpy.run_path(path, run_name="__main__")


def _print_script_traceback(e: BaseException) -> None:
    """The script's traceback as ``python SCRIPT`` prints it: our frames and runpy's left out."""
    ours = os.path.abspath(__file__)
    tb = e.__traceback__
    while tb is not None and (
        os.path.abspath(tb.tb_frame.f_code.co_filename) == ours
        or tb.tb_frame.f_globals.get("__name__") == "runpy"
    ):
        tb = tb.tb_next
    if tb is None:  # runpy's own error (no such module): its message alone
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return
    traceback.print_exception(type(e), e, tb)


def _failed(picker: Picker, outcome: str, rank: str, **kw: Any) -> ChildStatus:
    """The status of a script that failed or exited on its own: where in the measured pass
    it was (if it was in one), and the partial logs kept."""
    status = ChildStatus(outcome, rank=rank, **kw)
    if picker.left_at is not None:
        status.failed_step, status.failed_block = picker.left_at
        status.failed_block = picker.blame(status.failed_block, status.error)
    if picker.status is not None:  # its pass was measured (partly): those logs are kept
        status.log_paths = dict(picker.status.log_paths)
        status.steps = picker.status.steps
    return status


def _a_failure(e: BaseException) -> bool:
    """Whether the script ended by failing: an exception, or an exit with a non-zero
    code; not our stop (:class:`Measured`) nor its own clean exit."""
    if isinstance(e, Measured):
        return False
    if isinstance(e, SystemExit):
        return e.code not in (None, 0)
    return not isinstance(e, (Refused, LoaderFromError))


def main(target: list[str]) -> int:
    guard(target)  # ends the child with its processes if the parent goes, or at --timeout
    spec = ChildSpec.from_env()
    if spec is None or not target:
        print(
            "loadeval_nb: this module is the child of python -m loadeval_nb run; run that.",
            file=sys.stderr,
        )
        return 2
    rank = _rank()
    settings = spec.settings
    pick = spec.picks.get(rank)
    want: Optional[tuple[int, Optional[int]]] = None
    if pick is not None:
        want = (pick[0], pick[1])
    elif spec.loader_index is not None:
        want = (spec.loader_index, spec.pass_index)
    picker = Picker(
        side_for(spec.side, settings, spec.stamp, spec.label, spec.prove_straggler, spec.one_pass),
        settings.warmup,
        want=want,
        expect=spec.expect.get(rank),
        changes=spec.loader_changes,
        on_measured=lambda status: _report(status, spec),  # the parent's grace starts
        on_progress=lambda status: _report(status, spec),  # a DataLoader was iterated
    )
    status: ChildStatus
    code = 0
    names: dict[str, Any] = {}
    try:
        with patched_dataloader(picker, spec.loader_from):  # put back before what follows
            try:
                names = run_target(target)
            except BaseException as e:  # (a partial pass of a failure is kept for it)
                picker.close(failed=_a_failure(e))
                raise
            else:
                picker.close()
    except (Refused, LoaderFromError) as e:  # a setting that does not fit, a pass too
        # short for blocks, or --loader-from naming nothing to measure
        status = ChildStatus(e.outcome, rank=rank, message=e.message)
        code = 3
    except SystemExit as e:  # our stop (Measured), or the script's own sys.exit
        c = e.code
        exit_code = c if isinstance(c, int) else (0 if c is None else 1)
        if picker.status is not None and (isinstance(e, Measured) or exit_code == 0):
            status = picker.status
        elif exit_code == 0 and picker.not_interleaved is not None:
            status = picker.real_kept or ChildStatus(
                "not-interleavable", rank=rank, message=picker.not_interleaved
            )
            code = 3
        else:
            if c is not None and not isinstance(c, int):
                print(c, file=sys.stderr)  # sys.exit("message") prints it, as Python does
            status = _failed(picker, "script-exited", rank, exit_code=exit_code)
            code = exit_code or 1
    except BaseException as e:  # the script's error (KeyboardInterrupt included): a
        # failure, wherever it raised, even after its measured pass
        failed_at = time.monotonic()
        _print_script_traceback(e)
        status = _failed(
            picker,
            "script-failed",
            rank,
            error=f"{type(e).__name__}: {e}".strip(),
            failed_at=failed_at,
        )
        code = 1
        del e
    else:
        status = picker.status or ChildStatus("script-exited", rank=rank, exit_code=0)
        code = 0 if picker.status is not None else 1
        if picker.status is None and picker.not_interleaved is not None:
            # too few of the loop's epochs to pair: the parent measures the sides in turn
            status = picker.real_kept or ChildStatus(
                "not-interleavable", rank=rank, message=picker.not_interleaved
            )
            code = 3
        unfound = None
        if picker.status is None and spec.loader_from and picker.named_found is False:
            unfound = loader_from_unfound(spec.loader_from, names)
        if unfound is not None:  # --loader-from named nothing the script iterated: why
            status = ChildStatus("refused", rank=rank, message=unfound)
    if status.outcome != "measured":
        status.passes = picker.all_passes()
    _report(status, spec)
    return code


def _report(status: ChildStatus, spec: ChildSpec) -> None:
    """Tell the parent, through the status folder; once the parent is gone, nothing: the
    main thread waits for its guard to end the child (which removed that folder)."""
    park_if_ending()
    status.save(spec.status_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
