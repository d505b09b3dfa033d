"""Several ranks from a notebook: ``launch_ranks(fn, nprocs=2)`` forks ``nprocs`` processes
on this machine, makes them a ``torch.distributed`` process group (gloo by default, on
127.0.0.1), runs ``fn()`` in each and hands back what rank 0's ``fn`` returned.

Fork, not spawn: a function defined in a notebook cell cannot be imported by a spawned
process. So this is for CPU ranks (a process that has initialised CUDA cannot fork);
for GPUs and for several machines, run a script under ``torchrun``, where the same
``run_pair`` + ``gather_pair`` code works unchanged. The ranks exchange data only
through ``torch.distributed``; rank 0's return value comes back to the notebook over a
pipe of the fork context.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import traceback
from typing import Any, Callable, Optional

from ..core._shared import check_workers
from ..core.errors import LoadEvalError


def _remove_error_files(procs: Any) -> None:
    """torch leaves a ``pytorch-errorfile-*.pickle`` per rank in the temporary folder."""
    for path in getattr(procs, "error_files", None) or ():
        if path:
            try:
                os.remove(path)
            except OSError:
                pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(
    rank: int, fn: Callable[[], Any], world: int, port: int, backend: str, out: Any
) -> None:
    import torch.distributed as dist

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
    )
    # a kernel's own SIGINT handler, forked with it, must not swallow the Ctrl-C that
    # stops a hung rank: it is a KeyboardInterrupt here, and the rank's finally blocks run
    signal.signal(signal.SIGINT, signal.default_int_handler)
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        value = fn()
        if rank == 0:
            out.put(("ok", rank, value, 0.0))
        else:  # what a timeout says: which ranks had finished
            out.put(("done", rank, None, 0.0))
    except BaseException:
        # every rank says when it failed (CLOCK_MONOTONIC is one clock for the whole machine):
        # the first to fail is the cause, the others usually fail in a collective after it
        out.put(("error", rank, traceback.format_exc(), time.monotonic()))
        raise
    finally:
        dist.destroy_process_group()


def _not_finished(got: list[tuple[str, int, Any, float]], nprocs: int, timeout_s: float) -> str:
    """The sentence of a timeout: the ranks whose ``fn`` had not returned, by number."""
    done = sorted({m[1] for m in got if m[0] in ("ok", "done")})
    late = [r for r in range(nprocs) if r not in done]

    def ranks(rs: list[int]) -> str:
        return f"rank{'s' if len(rs) > 1 else ''} {', '.join(map(str, rs))}"

    if done:
        kept = f"{ranks(done)} finished, and {'its' if len(done) == 1 else 'their'} logs are kept"
    else:
        kept = "they may wait on each other in a collective; what they logged is kept"
    return (
        f"{ranks(late)} did not finish in {timeout_s:g} s and {'was' if len(late) == 1 else 'were'}"
        f" stopped ({kept}); raise timeout_s, or pass None to wait as long as they take."
    )


STOP_GRACE_S = 5.0
"""How long a rank that is stopped has to finish its ``finally`` blocks (an evaluator's
``with`` writing its run log) after a Ctrl-C, before it is terminated."""


def _stop(processes: Any) -> None:
    """Stop the ranks still running: Ctrl-C first, so that a rank's own code can close its
    run logs as Stop in a notebook does; then SIGTERM, then SIGKILL for a rank that answers
    neither (one stuck inside a collective)."""
    alive = [p for p in processes if p.is_alive()]
    for p in alive:
        try:
            os.kill(p.pid, signal.SIGINT)
        except OSError:
            pass
    deadline = time.monotonic() + STOP_GRACE_S
    for p in alive:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in alive:
        if p.is_alive():
            p.terminate()
    for p in alive:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)


DEFAULT_TIMEOUT_S = 1800.0
"""How long a launch waits for its ranks before it stops them (a hung rank, a deadlock)."""


def launch_ranks(
    fn: Callable[[], Any],
    nprocs: int = 2,
    *,
    backend: str = "gloo",
    timeout_s: Optional[float] = DEFAULT_TIMEOUT_S,
) -> Any:
    """Run ``fn()`` on ``nprocs`` forked CPU ranks of a fresh process group and return rank
    0's result. A rank that raises stops them all; its traceback comes back as a
    ``RuntimeError`` naming the rank. ``nprocs`` is at most the machine's worker limit
    (4 per CPU); after ``timeout_s`` seconds (None: no limit) the ranks still running are
    stopped (a Ctrl-C first, so that their ``finally`` blocks write their run logs) and a
    ``TimeoutError`` names them. Nothing of the launch is left behind: no process, no
    error file."""
    import torch
    import torch.multiprocessing as tmp

    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise LoadEvalError(f"nprocs must be a number of processes >= 1, not {nprocs!r}.")
    check_workers(nprocs, "nprocs")  # forking without bound would swamp the machine
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0
    ):
        raise LoadEvalError(
            f"timeout_s must be a number of seconds > 0 or None, not {timeout_s!r}."
        )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise LoadEvalError(
            "This process has initialised CUDA, so it cannot fork ranks; run a script under "
            "torchrun instead (the same run_pair + gather_pair code)."
        )
    ctx = tmp.get_context("fork")
    out = ctx.SimpleQueue()
    procs = tmp.start_processes(
        _rank_main,
        args=(fn, nprocs, _free_port(), backend, out),
        nprocs=nprocs,
        join=False,
        start_method="fork",
    )
    got: list[tuple[str, int, Any, float]] = []

    def drain() -> None:
        while not out.empty():
            got.append(out.get())  # read as it comes: a large result must not fill the pipe

    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while not procs.join(timeout=0.05):
            drain()
            if deadline is not None and time.monotonic() > deadline:
                assert timeout_s is not None
                raise TimeoutError(_not_finished(got, nprocs, timeout_s))
    except tmp.ProcessRaisedException as e:
        drain()
        failed = sorted((m for m in got if m[0] == "error"), key=lambda m: m[3])
        if not failed:
            raise RuntimeError(f"a rank failed:\n{e}") from None
        _, rank, tb, _ = failed[0]
        also = sorted({m[1] for m in failed[1:]} - {rank})
        after = f" (then rank {', '.join(map(str, also))} failed too)" if also else ""
        raise RuntimeError(f"rank {rank} failed first{after}:\n{tb}") from None
    except BaseException:  # Ctrl-C, a timeout: no rank outlives the launch
        _stop(procs.processes)
        raise
    finally:
        _remove_error_files(procs)
    drain()
    ok = [m for m in got if m[0] == "ok"]
    if not ok:
        raise RuntimeError("rank 0 returned nothing (it exited before fn() finished).")
    return ok[0][2]
