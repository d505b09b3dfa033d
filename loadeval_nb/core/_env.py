"""What a run log records about the machine and the loader."""

from __future__ import annotations

import _signal
import os
import platform
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from .._version import __version__


def dist_rank() -> Optional[tuple[int, int]]:
    """``(rank, world_size)`` when ``torch.distributed`` is initialised, else None (never
    imports torch)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:
        pass
    return None


def env_rank() -> Optional[int]:
    """This process's rank as a launcher sets it: ``RANK`` where ``WORLD_SIZE`` is set too
    and the rank is below it; None otherwise (``RANK`` alone is exported by some schedulers
    and containers with no job around it: a single process)."""
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit() and int(rank) < int(world):
        return int(rank)
    return None


AGREE_TIMEOUT_S = 300.0
"""How long a rank waits for the others to reach a point every rank must reach together
(the plan of a pass, the gathering of the ranks' pairs) before it stops with a sentence
naming the ranks that did not arrive."""

_agreements: dict[str, int] = {}


def agree(topic: str, mine: Any, timeout_s: Optional[float] = None) -> Optional[list[Any]]:
    """Every rank's ``mine`` (JSON), in rank order, once every rank of the job has given
    its own; None when ``torch.distributed`` is not initialised (one process).

    It goes through the process group's key-value store, never through a collective of
    the group: a rank that never arrives (another loader, another code path, a crash)
    ends the wait after ``timeout_s`` (:data:`AGREE_TIMEOUT_S`) with a
    :class:`~loadeval_nb.LoadEvalError` naming it, instead of a job stuck in a collective
    for the rest of its allocation. Each rank must call it for the same ``topic`` the
    same number of times (the n-th call of one rank meets the n-th of the others)."""
    import json
    import time
    from datetime import timedelta

    from .errors import LoadEvalError

    where = dist_rank()
    if where is None:
        return None
    rank, world = where
    n = _agreements[topic] = _agreements.get(topic, 0) + 1
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    key = f"loadeval_nb/{restart}/{topic}/{n}/"
    dist = sys.modules["torch.distributed"]
    store = dist.distributed_c10d._get_default_store()
    store.set(f"{key}{rank}", json.dumps(mine))
    limit = AGREE_TIMEOUT_S if timeout_s is None else timeout_s
    keys = [f"{key}{r}" for r in range(world)]
    deadline = time.monotonic() + limit
    while True:
        try:
            store.wait(keys, timedelta(seconds=min(1.0, max(0.01, deadline - time.monotonic()))))
            break
        except Exception:  # the store's time-out (a DistStoreError): who is missing?
            if time.monotonic() >= deadline:
                missing = [r for r, k in enumerate(keys) if not store.check([k])]
                if not missing:
                    break
                names = ", ".join(map(str, missing))
                raise LoadEvalError(
                    f"Rank{'s' if len(missing) > 1 else ''} {names} did not reach the "
                    f"{topic} within {limit:g} s (rank {rank} waited): their loop or loader "
                    "differs from this rank's, or they failed; their output says which."
                ) from None
    return [json.loads(store.get(k)) for k in keys]


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity; all of the machine's where that
    cannot be read): the one core count behind worker limits, the simulator and sweeps."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _torch() -> Any:
    return sys.modules.get("torch")


def is_dataloader(x: Any) -> bool:
    """A ``torch.utils.data.DataLoader`` (never imports torch: without it, nothing is one)."""
    data = sys.modules.get("torch.utils.data")
    return data is not None and isinstance(x, data.DataLoader)


def cuda_in_use() -> bool:
    """True if this process has initialised CUDA (cheap; never initialises it)."""
    torch = _torch()
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:
        return False


def cuda_synchronize() -> None:
    """Wait for queued GPU work, if this process uses CUDA."""
    if cuda_in_use():
        _torch().cuda.synchronize()


def environment(step_path: str) -> dict[str, Any]:
    """Versions and devices: enough to tell two runs' machines apart (``step_path``: which
    per-step path timed the run)."""
    env: dict[str, Any] = {
        "loadeval_nb_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),  # per-rank logs gathered from files name their host
        "torch_version": None,
        "cuda_available": False,
        "cuda_version": None,
        "devices": [],
        "step_path": step_path,
        "pid": os.getpid(),  # two runs in two processes: what changed between them is wider
    }
    torch = _torch()
    if torch is not None:
        env["torch_version"] = str(torch.__version__)
        try:
            env["cuda_version"] = torch.version.cuda
            if torch.cuda.is_available():
                env["cuda_available"] = True
                env["devices"] = [
                    torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
                ]
        except Exception:
            pass
    return env


def _attr(obj: Any, name: str) -> Any:
    v = getattr(obj, name, None)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


def safe_len(obj: Any) -> Optional[int]:
    """``len(obj)``, or None for an object without one (or whose ``__len__`` raises)."""
    try:
        return len(obj)
    except Exception:
        return None


def epoch_bound(obj: Any) -> Optional[int]:
    """``len(obj)`` where it is known to bound an epoch, else None: a list or a tuple, or a
    DataLoader over a map-style dataset whose class keeps DataLoader's own ``__len__`` (its
    sampler's length). An IterableDataset's ``__len__`` is the user's word (it may over- or
    understate the stream), as is any other iterable's, and a DataLoader subclass may
    count otherwise: a pass that must not hand a loop more batches than its loader would
    draws them to know (never imports torch)."""
    if isinstance(obj, (list, tuple)):
        return len(obj)
    data = sys.modules.get("torch.utils.data")
    if data is None or not isinstance(obj, data.DataLoader):
        return None
    if type(obj).__len__ is not data.DataLoader.__len__:
        return None
    if isinstance(getattr(obj, "dataset", None), data.IterableDataset):
        return None
    return safe_len(obj)


def loader_settings(loader: Any) -> dict[str, Any]:
    """The DataLoader settings that decide loading speed (None where the loader has none)."""
    dataset = getattr(loader, "dataset", None)
    return {
        "type": f"{type(loader).__module__}.{type(loader).__qualname__}",
        "batch_size": _attr(loader, "batch_size"),
        "num_workers": _attr(loader, "num_workers"),
        "pin_memory": _attr(loader, "pin_memory"),
        "prefetch_factor": _attr(loader, "prefetch_factor"),
        "persistent_workers": _attr(loader, "persistent_workers"),
        "drop_last": _attr(loader, "drop_last"),
        "len": safe_len(loader),
        "dataset_type": type(dataset).__qualname__ if dataset is not None else None,
        "dataset_len": safe_len(dataset) if dataset is not None else None,
    }


class interrupts_deferred:
    """Finish the block even if Ctrl-C (SIGINT) arrives, however many times, then raise one
    ``KeyboardInterrupt``: a run's finishing path (partial log written, workers stopped)
    must complete once started. Only in the main thread (where SIGINT is delivered);
    elsewhere the block runs as is.

    A class rather than a ``@contextmanager`` generator: it runs at the end of every epoch,
    inside the loop's time, and this way costs a third as much."""

    __slots__ = ("_previous", "_caught")

    def __init__(self) -> None:
        self._previous: Any = None
        self._caught: list[int] = []

    def __enter__(self) -> None:
        if threading.get_ident() != _MAIN_IDENT:
            return
        try:
            # _signal.signal: signal.signal's enum conversions cost ~15 us an epoch
            self._previous = _signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main interpreter
            self._previous = None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self._caught.append(signum)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        previous, self._previous = self._previous, None
        if previous is None:
            return
        stamp = getattr(previous, "__self__", None)
        if isinstance(stamp, SigintStamp) and not stamp._installed:
            # the epoch's stamp was taken down while this block held SIGINT: Python's own
            # handler is what was there before it
            previous = signal.default_int_handler
        _signal.signal(signal.SIGINT, previous)
        if self._caught and exc_type is None:
            raise KeyboardInterrupt


_MAIN_IDENT = threading.main_thread().ident


class SigintStamp:
    """When SIGINT (Ctrl-C, the notebook's Stop) last arrived while an epoch ran, on the
    epoch's clock: a ``next()`` that raised after it was interrupted, not broken.

    Installed for an epoch only where Python's own handler is in place (in the main
    thread); it stamps, then raises ``KeyboardInterrupt`` as that handler does. A handler
    of the user's is left alone (nothing is stamped then)."""

    __slots__ = ("clock", "at", "_installed")

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.at: Optional[int] = None
        self._installed = False

    def install(self) -> None:
        self.at = None
        if threading.get_ident() != _MAIN_IDENT:
            return
        try:
            if _signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                _signal.signal(signal.SIGINT, self._on_sigint)
                self._installed = True
        except ValueError:  # not the main interpreter
            pass

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.at = self.clock()
        raise KeyboardInterrupt

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        try:
            if _signal.getsignal(signal.SIGINT) == self._on_sigint:
                _signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:  # pragma: no cover
            pass


@contextmanager
def torch_threads(n: Optional[int]) -> Iterator[None]:
    """``torch.set_num_threads(n)`` for the block, the previous count put back after it."""
    torch = sys.modules.get("torch")
    if n is None or torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
