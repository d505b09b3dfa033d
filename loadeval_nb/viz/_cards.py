"""The HTML cards: plain HTML, no scripts, so they also serve as the saved notebook's copy
and as the standalone report's verdict.

Pure functions of the results: each card renders the facts a result states once
(:meth:`~loadeval_nb.Diagnosis.facts` and its kin), the same facts its plain-text
report prints. Every piece of text is escaped exactly once, here, where it meets HTML:
callers pass plain text (``"<1%"``, a label with ``&``), never pre-escaped HTML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Optional

from ..core import Diagnosis, Fact, Facts, LadderResult, PairResult, SweepResult
from ..core._shared import HistoryRow, fmt_rate, fmt_seconds, fmt_times
from ._live import RUNS
from ._style import COLORS
from ._svg import bars_svg, steps_svg

VERDICT_COLORS = {
    "INPUT-BOUND": "#c62828",
    "PARTLY INPUT-BOUND": "#ef6c00",
    "NOT INPUT-BOUND": "#2e7d32",
    "NOT ENOUGH DATA": "#616161",
}
_HEADLINE_CLASS = {"sweep": ("loadeval-recommendation",)}
_EMPHASISED = {"speedup"}


def esc(text: Any) -> str:
    """Plain text as HTML (``<``, ``>``, ``&`` and both quotes escaped): safe in element
    content and in quoted attributes alike."""
    return html.escape(str(text), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], css: str, row_css: str) -> str:
    """A table of plain-text cells (escaped here)."""
    th = "".join(f"<th style='text-align:left;padding:2px 8px'>{esc(h)}</th>" for h in head)
    body = "".join(
        f"<tr class='{esc(row_css)}'>"
        + "".join(f"<td style='padding:2px 8px'>{esc(c)}</td>" for c in r)
        + "</tr>"
        for r in rows
    )
    return (
        f"<table class='{esc(css)}' style='border-collapse:collapse;font-family:sans-serif;"
        f"font-size:12px'><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    )


def _card(inner: str, css: str) -> str:
    return (
        f"<div class='{esc(css)}' style='border:1px solid #ddd;border-radius:6px;padding:8px 12px;"
        f"margin:4px 0;font-family:sans-serif;font-size:13px;line-height:1.35'>{inner}</div>"
    )


def _sentence(label: str) -> str:
    return label[:1].upper() + label[1:]


def report_html(report: Facts, extra: str = "", spelling: str = "options") -> str:
    """A :class:`~loadeval_nb.verdict.Facts` as a card: headline, facts, table, ``extra`` (a
    chart: HTML or SVG, inserted as it is), notes. Everything from the report is escaped.
    Next steps are spelled as ``%%loadeval``'s options (the notebook's cards) or, for the
    standalone report a script writes, as keywords."""
    classes = " ".join(["loadeval-headline", *_HEADLINE_CLASS.get(report.kind, ())])
    headline = f"<span class='{esc(classes)}'>{esc(report.headline)}</span>"
    if report.badge:
        color = VERDICT_COLORS.get(report.badge, "#333")
        head = (
            f"<span style='background:{color};color:white;padding:2px 8px;border-radius:4px;"
            f"font-weight:bold'>{esc(report.badge)}</span> {headline}"
        )
    else:
        head = f"<b>{esc(report.title)}</b>: {headline}"
    parts = [f"<div style='font-size:15px;margin-bottom:4px'>{head}</div>"]
    if report.facts:
        rows = "".join(
            f"<tr class='loadeval-{esc(f.key)}'><td style='padding:1px 12px 1px 0;color:#555;"
            f"vertical-align:top;white-space:nowrap'>{esc(_sentence(f.label))}</td><td>"
            + (f"<b>{esc(f.said(spelling))}</b>" if f.key in _EMPHASISED else esc(f.said(spelling)))
            + "</td></tr>"
            for f in report.facts
        )
        parts.append(f"<table>{rows}</table>")
    if report.columns:
        parts.append(
            _table(
                report.columns,
                report.rows,
                f"loadeval-{report.kind}-table",
                f"loadeval-{report.kind}-row",
            )
        )
    parts.append(extra)
    parts += [f"<div style='color:#555'>note: {esc(n)}</div>" for n in report.notes]
    css = "loadeval-verdict" + ("" if report.kind == "verdict" else f" loadeval-{report.kind}")
    return _card("".join(parts), css)


def verdict_html(d: Diagnosis) -> str:
    """The verdict card."""
    return report_html(d.facts())


def advice_html(fact: Fact, spelling: str = "keywords") -> str:
    """One fact on its own, as a card with its label for a heading: the standalone
    report ends with the verdict's advice ("what to do") this way."""
    return _card(
        f"<div style='font-size:15px;font-weight:bold;margin-bottom:4px'>"
        f"{esc(_sentence(fact.label))}</div><div>{esc(fact.said(spelling))}</div>",
        f"loadeval-{fact.key}",
    )


def _ms_or(seconds: Optional[float], text: str) -> Any:
    return text if seconds is None else seconds * 1e3


def ladder_html(result: LadderResult) -> str:
    """The ladder's card: its report and a bar chart of the mean step per rung."""
    bars = [
        (
            r["rung"],
            "skipped" if r["skipped"] else _ms_or(r["mean_step_s"], "no steps"),
            COLORS.get(r["rung"], "#333"),
        )
        for r in result.table()
    ]
    return report_html(result.facts(), bars_svg(bars, "Mean step per rung (ms)", width=560))


def sweep_html(result: SweepResult) -> str:
    """The sweep's card: its report and measured vs predicted rates under the ideal ceiling."""
    tab = result.table()
    bars = [(r["label"], "failed" if r["error"] else r["steps_per_s"], COLORS["real"]) for r in tab]
    svg = bars_svg(
        bars,
        "Steps/s per configuration (◆ simulator, dashed: ideal loader)",
        markers=[r["predicted_steps_per_s"] for r in tab],
        ceiling=result.ideal_steps_per_s,
        width=640,
        fmt=fmt_rate,
    )
    return report_html(result.facts(), svg)


HISTORY_COLUMNS = (
    ("label", "run"),
    ("num_workers", "num_workers"),
    ("pin_memory", "pin_memory"),
    ("prefetch_factor", "prefetch_factor"),
    ("persistent_workers", "persistent_workers"),
    ("num_cached_batches", "cache"),
    ("real_step_s", "real step"),
    ("ideal_step_s", "ideal step"),
    ("speedup", "speedup"),
    ("verdict", "verdict"),
)


def history_html(rows: list[HistoryRow]) -> str:
    """The history table: settings → real step, ideal step, speedup."""

    def cell(k: str, v: Any) -> str:
        if k.endswith("_step_s"):
            return fmt_seconds(v)
        if k == "speedup":
            return fmt_times(v)
        return "–" if v is None else str(v)

    return _table(
        [h for _, h in HISTORY_COLUMNS],
        [[cell(k, getattr(r, k)) for k, _ in HISTORY_COLUMNS] for r in rows],
        "loadeval-history",
        "loadeval-history-row",
    )


def pair_html(result: Optional[PairResult], rows: list[HistoryRow]) -> str:
    """A pair's card for the saved copy: verdict, SVG step-time chart, history (no scripts)."""
    parts = []
    if result is not None and result.diagnosis is not None:
        parts.append(verdict_html(result.diagnosis))
    if result is not None:
        runs = result.runs()
        parts.append(steps_svg([(w, runs[w]) for w in RUNS]))
    if rows:
        parts.append(history_html(rows))
    return "".join(parts)
