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
from typing import Optional

from .guard import guard
from .pick import Picker, Refused, patched_dataloader
from .sides import side_for
from .spec import ChildSpec, ChildStatus


def run_target(target: list[str]) -> None:
    """Run ``[SCRIPT, ARGS...]`` or ``["-m", MODULE, ARGS...]`` as ``python`` would."""
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        sys.path[0] = os.getcwd()  # python -m puts the working folder first
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    else:
        path = target[0]
        sys.argv = list(target)
        sys.path[0] = os.path.dirname(os.path.abspath(path))  # python SCRIPT puts its folder
        runpy.run_path(path, run_name="__main__")


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


def main(target: list[str]) -> int:
    guard(target)  # ends the child with its processes if the parent goes, or at --timeout
    spec = ChildSpec.from_env()
    if spec is None or not target:
        print(
            "loadeval_nb: this module is the child of python -m loadeval_nb run; run that.",
            file=sys.stderr,
        )
        return 2
    rank = os.environ.get("RANK", "")
    settings = spec.settings()
    pick = spec.picks.get(rank)
    want: Optional[tuple[int, Optional[int]]] = None
    if pick is not None:
        want = (pick[0], pick[1])
    elif spec.loader is not None:
        want = (spec.loader, spec.pass_index)
    picker = Picker(
        side_for(spec.side, settings, spec.stamp, spec.label),
        spec.warmup,
        want=want,
        expect=spec.expect.get(rank),
        changes=spec.loader_changes,
        on_measured=lambda status: status.save(spec.status_dir),  # the parent's grace starts
    )
    status: ChildStatus
    code = 0
    with patched_dataloader(picker):
        try:
            try:
                run_target(target)
            finally:
                picker.close()
        except Refused as e:
            status = ChildStatus("refused", rank=rank, message=e.message)
            code = 3
        except SystemExit as e:  # Measured, or the script's own sys.exit
            if picker.status is not None:
                status = picker.status
            else:
                c = e.code
                exit_code = c if isinstance(c, int) else (0 if c is None else 1)
                if c is not None and not isinstance(c, int):
                    print(c, file=sys.stderr)  # sys.exit("message") prints it, as Python does
                status = ChildStatus("script-exited", rank=rank, exit_code=exit_code)
                code = exit_code or 1
        except BaseException as e:  # the script's error (KeyboardInterrupt included)
            if picker.status is not None:  # after its steps: not ours to report
                status = picker.status
            else:
                failed_at = time.monotonic()
                _print_script_traceback(e)
                status = ChildStatus(
                    "script-failed",
                    rank=rank,
                    error=f"{type(e).__name__}: {e}".strip(),
                    failed_at=failed_at,
                )
                code = 1
            del e
        else:
            status = picker.status or ChildStatus("script-exited", rank=rank, exit_code=0)
            code = 0 if picker.status is not None else 1
    if status.outcome != "measured":
        status.passes = picker.passes
    status.save(spec.status_dir)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
