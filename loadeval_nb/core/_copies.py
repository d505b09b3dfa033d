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


class CopyTimer:
    """Times the host-to-``device_type`` copies made while it is installed.

    ``starts`` is the epoch's list of step-start stamps: a copy belongs to the step that
    started last. ``event`` makes a timing event (``torch.cuda.Event(enable_timing=True)``
    by default) with ``record()`` and ``elapsed_time(end)`` in milliseconds.
    """

    def __init__(
        self,
        starts: list[int],
        device_type: str = "cuda",
        event: Optional[Callable[[], Any]] = None,
    ) -> None:
        torch = sys.modules["torch"]
        self.starts = starts
        self.device_type = device_type
        self.event = event or (lambda: torch.cuda.Event(enable_timing=True))
        self.records: list[tuple[int, Any, Any]] = []
        self._saved: Optional[dict[str, Any]] = None

    def install(self) -> None:
        torch = sys.modules["torch"]
        cls = torch.Tensor
        self._saved = {name: cls.__dict__.get(name) for name in ("to", "cuda")}
        to, cuda = cls.to, cls.cuda
        starts, records, make, kind = self.starts, self.records, self.event, self.device_type

        def timed(call: Callable[..., Any], t: Any, args: Any, kwargs: Any) -> Any:
            begin = make()
            begin.record()
            out = call(t, *args, **kwargs)
            end = make()
            end.record()
            records.append((len(starts) - 1, begin, end))
            return out

        def timed_to(t: Any, *args: Any, **kwargs: Any) -> Any:
            if t.device.type == "cpu" and _targets(
                kwargs.get("device", args[0] if args else None), kind
            ):
                return timed(to, t, args, kwargs)
            return to(t, *args, **kwargs)

        def timed_cuda(t: Any, *args: Any, **kwargs: Any) -> Any:
            if t.device.type == "cpu" and kind == "cuda":
                return timed(cuda, t, args, kwargs)
            return cuda(t, *args, **kwargs)

        cls.to, cls.cuda = timed_to, timed_cuda

    def uninstall(self) -> None:
        """Put ``Tensor.to`` and ``Tensor.cuda`` back as they were (idempotent)."""
        saved, self._saved = self._saved, None
        if saved is None:
            return
        cls = sys.modules["torch"].Tensor
        for name, original in saved.items():
            if original is None:
                if name in cls.__dict__:
                    delattr(cls, name)  # the base class's method shows through again
            else:
                setattr(cls, name, original)

    def per_step(self, n_steps: int) -> list[int]:
        """Nanoseconds of copies in each of the epoch's ``n_steps`` steps (after the epoch's
        closing synchronisation: reading an event before its work ran would wait)."""
        out = [0] * n_steps
        for step, begin, end in self.records:
            if 0 <= step < n_steps:
                out[step] += max(0, int(begin.elapsed_time(end) * 1e6))
        return out
