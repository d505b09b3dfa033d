"""Human-readable numbers for reports (durations, bytes, percentages)."""

from __future__ import annotations

import math
from typing import Optional


def fmt_seconds(s: Optional[float]) -> str:
    """Format a duration given in seconds: ``"20.3 ms"``, ``"4.1 s"``, ``"n/a"``; a duration
    too short to show is ``"<1 ns"``, never ``"0 ns"`` (only zero is ``"0 ns"``)."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "n/a"
    a = abs(s)
    if 0 < a < 0.5e-9:
        return "<1 ns" if s > 0 else "-<1 ns"
    if a >= 3600:
        return f"{s / 3600:.1f} h"
    if a >= 120:
        return f"{s / 60:.1f} min"
    if a >= 1:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    if a >= 1e-6:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e9:.0f} ns"


def fmt_bytes(n: Optional[float]) -> str:
    """Format a byte count with binary units: ``"1.5 GiB"``."""
    if n is None:
        return "n/a"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} TiB"  # pragma: no cover


def fmt_rate(x: Optional[float]) -> str:
    """A rate with three significant figures: ``"17.3"``, ``"0.482"``, ``"1.00"``, and whole
    numbers from 100 (``"1,234"``)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) >= 99.95:  # what rounds to three digits or more before the point
        return f"{x:,.0f}"
    return f"{x:#.3g}" if x else "0"  # "#": trailing zeros are figures too ("1.00")


def fmt_times(x: Optional[float], digits: int = 2) -> str:
    """Format a ratio: ``"1.42×"``; ``None`` gives ``"n/a"``."""
    return "n/a" if x is None else f"{x:.{digits}f}×"


def fmt_pct(x: Optional[float], digits: int = 0) -> str:
    """Format a fraction (0.25) as a percentage (``"25%"``); ``None`` gives ``"n/a"``."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    text = f"{x * 100:.{digits}f}"
    if x > 0 and float(text) == 0:  # a small share is not zero
        return f"<{10**-digits:g}%"
    return f"{text}%"
