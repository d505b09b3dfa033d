"""Host-to-device copies timed per step, for the split of a real step into input wait,
copy and compute.

While a log-mode epoch of a CUDA process runs, ``Tensor.to`` and ``Tensor.cuda`` are
wrapped (and put back when the epoch ends, whatever happens): a copy from the host to
the GPU records a CUDA event on the current stream before and after it. Nothing waits
for the GPU on the loop's path: the events are read once the epoch's closing
``torch.cuda.synchronize()`` has run, and each copy's GPU time is added to the step it
was made in. Any other call goes straight through (one attribute test).

The device type and the event class are parameters, so the plumbing is tested on a
CPU-only machine with ``meta`` tensors and events on a fake clock.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Optional


def _targets(device: Any, device_type: str) -> bool:
    if device is None or isinstance(device, bool):
        return False
    if isinstance(device, int):
        return device_type == "cuda"  # .to(0): a CUDA ordinal
    if isinstance(device, str):
        return device.split(":", 1)[0] == device_type
    kind = getattr(device, "type", None)  # torch.device
    if isinstance(kind, str):
        return kind == device_type
    dev = getattr(device, "device", None)  # .to(other_tensor)
    return getattr(dev, "type", None) == device_type


_active: list[CopyTimer] = []
"""The timers of the epochs running now (overlapping loops each have one)."""
_original: dict[str, Any] = {}
"""``Tensor.to`` / ``Tensor.cuda`` as found when the first timer was installed."""


def _install_wrappers() -> None:
    torch = sys.modules["torch"]
    cls = torch.Tensor
    _original.update({name: cls.__dict__.get(name) for name in ("to", "cuda")})
    to, cuda = cls.to, cls.cuda

    def timed(call: Callable[..., Any], t: Any, args: Any, kwargs: Any, kind: str) -> Any:
        me = threading.get_ident()
        timers = [x for x in _active if x.device_type == kind and x.thread == me]
        if not timers:  # another thread's copy (a prefetcher): not this loop's step
            return call(t, *args, **kwargs)
        begin = [x.event() for x in timers]
        for e in begin:
            e.record()
        out = call(t, *args, **kwargs)
        for x, b in zip(timers, begin):
            end = x.event()
            end.record()
            x.records.append((len(x.starts) - 1, b, end))
        return out

    def timed_to(t: Any, *args: Any, **kwargs: Any) -> Any:
        if t.device.type == "cpu":
            target = kwargs.get("device", args[0] if args else None)
            for kind in {x.device_type for x in _active}:
                if _targets(target, kind):
                    return timed(to, t, args, kwargs, kind)
        return to(t, *args, **kwargs)

    def timed_cuda(t: Any, *args: Any, **kwargs: Any) -> Any:
        if t.device.type == "cpu":
            return timed(cuda, t, args, kwargs, "cuda")
        return cuda(t, *args, **kwargs)

    cls.to, cls.cuda = timed_to, timed_cuda


def _remove_wrappers() -> None:
    cls = sys.modules["torch"].Tensor
    for name, original in _original.items():
        if original is None:
            if name in cls.__dict__:
                delattr(cls, name)  # the base class's method shows through again
        else:
            setattr(cls, name, original)
    _original.clear()


COPIES_ON: tuple[str, Any] = ("cuda", None)
"""The device whose host-to-device copies are timed, and the event class (None: CUDA's
timing events); copies are timed where this process uses CUDA. Tests set ("meta", an
event class on a fake clock), as they inject a clock."""


def copies_on() -> tuple[str, Any]:
    """:data:`COPIES_ON`, read when an epoch opens."""
    return COPIES_ON


class CopyTimer:
    """Times the host-to-``device_type`` copies made, on the thread that installs it,
    while it is installed.

    ``starts`` is the epoch's list of step-start stamps: a copy belongs to the step that
    started last. ``event`` makes a timing event (``torch.cuda.Event(enable_timing=True)``
    by default) with ``record()``, ``query()`` and ``elapsed_time(end)`` in milliseconds.
    Overlapping epochs share one pair of wrappers, put back when the last one ends.
    """

    def __init__(
        self,
        starts: Any,
        device_type: str = "cuda",
        event: Optional[Callable[[], Any]] = None,
    ) -> None:
        torch = sys.modules["torch"]
        self.starts = starts
        self.device_type = device_type
        self.event = event or (lambda: torch.cuda.Event(enable_timing=True))
        self.records: list[tuple[int, Any, Any]] = []
        self.thread = threading.get_ident()

    def install(self) -> None:
        if not _active:
            _install_wrappers()
        if self not in _active:
            _active.append(self)

    def uninstall(self) -> None:
        """Stop timing; the last timer out puts ``Tensor.to`` / ``.cuda`` back (idempotent)."""
        if self in _active:
            _active.remove(self)
            if not _active:
                _remove_wrappers()

    def per_step(self, n_steps: int) -> list[int]:
        """Nanoseconds of copies in each of the epoch's ``n_steps`` steps, read after the
        epoch's closing synchronisation. A copy whose events have not completed (made on
        another device's stream) is left out rather than waited for; never raises."""
        out = [0] * n_steps
        for step, begin, end in self.records:
            if not 0 <= step < n_steps:
                continue
            try:
                if hasattr(end, "query") and not end.query():
                    continue
                out[step] += max(0, int(begin.elapsed_time(end) * 1e6))
            except Exception:  # an event the driver cannot time: leave it out
                continue
        return out
