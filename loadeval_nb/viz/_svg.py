"""A small static SVG chart of step times, for saved notebooks and rendered copies.

Bokeh cannot write SVG without a browser (its SVG export drives one through
Selenium), and a saved notebook must show the result with no kernel and no
JavaScript (nbviewer, GitHub). So the final step-time chart is also drawn here
as plain SVG: a few polylines, axes and labels.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Callable, Optional, Union

from ..core._shared import fmt_seconds
from ..core.record import Run
from ._data import startup_data, steps_data
from ._style import COLORS


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    for e in range(-6, 7):
        for m in (1, 2, 2.5, 5):
            c = m * 10**e
            if c >= v:
                return c
    return v


def steps_svg(
    runs: Sequence[tuple[str, Optional[Run]]],
    width: int = 640,
    height: int = 220,
    title: str = "Step time per step (ms)",
    max_points: int = 600,
) -> str:
    """An SVG document plotting each run's step times (ms) against step index. The steps
    set the scale; each epoch's first step (its start-up) is a triangle, at the top edge
    when it is off the scale, and its time is written under the run's name. A run of more
    than ``max_points`` steps is decimated (each bucket's minimum and maximum)."""
    left, right, top, bottom = 48, 130, 24, 30
    pw, ph = width - left - right, height - top - bottom
    series = [
        (name, run.n_steps, steps_data(run, max_points=max_points), startup_data(run, name))
        for name, run in runs
        if run is not None and run.n_steps
    ]
    n_max = max((n for _, n, _, _ in series), default=1)
    y_max = _nice_max(
        max((max(d["step_ms"], default=0.0) for _, _, d, _ in series), default=1.0) * 1.05
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="15" font-weight="bold">{html.escape(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#888"/>',
    ]
    for k in range(5):
        tick = y_max * k / 4
        ty = top + ph - ph * k / 4
        out.append(
            f'<line x1="{left}" y1="{ty:.1f}" x2="{left + pw}" y2="{ty:.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{left - 4}" y="{ty + 4:.1f}" text-anchor="end">{tick:g}</text>')
    out.append(f'<text x="{left + pw}" y="{height - 8}" text-anchor="end">step (of {n_max})</text>')

    def px(x: float) -> float:
        return left + pw * x / max(n_max - 1, 1)

    def py(v: float) -> float:
        return top + ph - ph * min(v, y_max) / y_max

    ly = top + 14
    for name, _, steady, startups in series:
        color = COLORS.get(name, "#333")
        pts = " ".join(
            f"{px(x):.1f},{py(v):.1f}" for x, v in zip(steady["step"], steady["step_ms"])
        )
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
        for x, v in zip(startups["step"], startups["step_ms"]):
            cx, cy = px(x), py(v)
            out.append(
                f'<path class="startup" d="M{cx - 4:.1f},{cy + 4:.1f} L{cx:.1f},{cy - 3:.1f} '
                f'L{cx + 4:.1f},{cy + 4:.1f} Z" fill="{color}"/>'
            )
        out.append(
            f'<line x1="{left + pw + 10}" y1="{ly - 4}" x2="{left + pw + 28}" y2="{ly - 4}" '
            f'stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + pw + 32}" y="{ly}">{html.escape(name)}</text>')
        if startups["step_ms"]:
            first = fmt_seconds(startups["step_ms"][0] / 1e3)
            ly += 14
            out.append(
                f'<text x="{left + pw + 14}" y="{ly}" fill="#555" font-size="10">'
                f"▲ first step {html.escape(first)}</text>"
            )
        ly += 18
    out.append("</svg>")
    return "".join(out)


def bars_svg(
    bars: Sequence[tuple[str, Union[float, str, None], str]],
    title: str,
    *,
    markers: Optional[Sequence[Optional[float]]] = None,
    ceiling: Optional[float] = None,
    width: int = 640,
    bar_h: int = 18,
    fmt: Union[str, Callable[[float], str]] = "{:.1f}",
) -> str:
    """Horizontal bars (label, value, colour) with optional grey markers per bar (the
    simulator's predictions) and a dashed ceiling line (the ideal rate). A value that is
    a string (``"skipped"``, ``"failed"``) is written in grey in place of its bar.
    ``fmt`` writes a bar's value: a format string or a function (``fmt_rate``).
    Labels are plain text; the left margin grows to fit the longest."""
    write = fmt.format if isinstance(fmt, str) else fmt
    # ~6.5 px per character at 11 px sans-serif, with room for the gap to the bars
    left = max(130, 12 + round(6.5 * max((len(str(b[0])) for b in bars), default=0)))
    left, right, top = min(left, width // 2), 70, 26
    height = top + len(bars) * (bar_h + 6) + 24
    pw = width - left - right
    vals = [v for _, v, _ in bars if isinstance(v, (int, float))]
    vals += [m for m in markers or [] if m is not None]
    if ceiling is not None:
        vals.append(ceiling)
    x_max = _nice_max(max(vals, default=1.0) * 1.05)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="15" font-weight="bold">{html.escape(title)}</text>',
    ]
    for i, (label, v, color) in enumerate(bars):
        y = top + i * (bar_h + 6)
        out.append(
            f'<text x="{left - 6}" y="{y + bar_h - 5}" text-anchor="end">{html.escape(label)}</text>'
        )
        if not isinstance(v, (int, float)):
            text = html.escape(v or "n/a")
            out.append(f'<text x="{left + 4}" y="{y + bar_h - 5}" fill="#999">{text}</text>')
        else:
            w = pw * min(v, x_max) / x_max
            out.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}" opacity="0.85"/>'
            )
            value = html.escape(write(v))
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 5}">{value}</text>')
        m = markers[i] if markers else None
        if m is not None:
            mx = left + pw * min(m, x_max) / x_max
            out.append(
                f'<path d="M{mx:.1f},{y - 2} l5,{bar_h / 2 + 2:.1f} l-5,{bar_h / 2 + 2:.1f} '
                f'l-5,-{bar_h / 2 + 2:.1f} z" fill="{COLORS["predicted"]}" opacity="0.7"/>'
            )
    if ceiling is not None:
        cx = left + pw * min(ceiling, x_max) / x_max
        y1 = top - 4
        y2 = top + len(bars) * (bar_h + 6)
        out.append(
            f'<line x1="{cx:.1f}" y1="{y1}" x2="{cx:.1f}" y2="{y2}" stroke="{COLORS["ideal"]}" '
            f'stroke-dasharray="5,3" stroke-width="1.5"/>'
        )
        out.append(f'<text x="{cx:.1f}" y="{y2 + 14}" text-anchor="middle">ideal</text>')
    out.append("</svg>")
    return "".join(out)
