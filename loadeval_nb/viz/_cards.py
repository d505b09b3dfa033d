"""The HTML cards: plain HTML, no scripts, so they also serve as the saved notebook's copy
and as the standalone report's verdict.

Pure functions of the results: each card renders the facts a result states once
(:meth:`~loadeval_nb.verdict.Diagnosis.facts` and its kin), the same facts its plain-text
report prints. Every piece of text is escaped exactly once, here, where it meets HTML:
callers pass plain text (``"<1%"``, a label with ``&``), never pre-escaped HTML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Optional

from ..core._shared import HistoryRow, fmt_rate, fmt_seconds, fmt_times
from ..core.explore import LadderResult, PairResult, SweepResult
from ..core.verdict import Diagnosis, Fact, Facts
from ._live import SIDES
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


_CELL = "text-align:left;vertical-align:top;line-height:1.35;"
"""Every cell says where its text goes: JupyterLab right-aligns the cells of HTML outputs
(the saved copy) and centres their tables, unless told otherwise."""


def _table(
    head: Sequence[str],
    rows: Sequence[Sequence[str]],
    css: str,
    row_css: str,
    *,
    compact: bool = False,
) -> str:
    """A table of plain-text cells (escaped here). ``compact``: cells never wrap ("97.9 ms",
    "INPUT-BOUND" stay on one line) and the table scrolls sideways in a box of its own
    when the notebook is narrower than it, instead of running past the page's edge."""
    pad = "padding:2px 6px;white-space:nowrap;" if compact else "padding:2px 8px;"
    th = "".join(f"<th style='{_CELL}{pad}'>{esc(h)}</th>" for h in head)
    body = "".join(
        f"<tr class='{esc(row_css)}'>"
        + "".join(f"<td style='{_CELL}{pad}'>{esc(c)}</td>" for c in r)
        + "</tr>"
        for r in rows
    )
    table = (
        f"<table class='{esc(css)}' style='border-collapse:collapse;font-family:sans-serif;"
        f"font-size:12px;margin:0;table-layout:auto'><thead><tr>{th}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )
    if not compact:
        return table
    return f"<div class='{esc(css)}-box' style='max-width:100%;overflow-x:auto'>{table}</div>"


def _card(inner: str, css: str) -> str:
    return (
        f"<div class='{esc(css)}' style='border:1px solid #ddd;border-radius:6px;padding:8px 12px;"
        f"margin:4px 0;font-family:sans-serif;font-size:13px;line-height:1.35'>{inner}</div>"
    )


def _sentence(label: str) -> str:
    return label[:1].upper() + label[1:]


DISTURBED_COLOR = "#b35c00"
"""A disturbed pair's colour: its badge, and the dashboard's status line."""


def _badge(word: str, color: str, css: str, title: str = "") -> str:
    tip = f" title='{esc(title)}'" if title else ""
    return (
        f"<span class='{esc(css)}'{tip} style='background:{color};color:white;padding:2px 8px;"
        f"border-radius:4px;font-weight:bold;white-space:nowrap'>{esc(word)}</span>"
    )


def report_html(
    report: Facts,
    extra: str = "",
    spelling: str = "options",
    *,
    disturbed: Sequence[str] = (),
    config: str = "",
) -> str:
    """A :class:`~loadeval_nb.verdict.Facts` as a card: headline, facts, table, ``extra`` (a
    chart: HTML or SVG, inserted as it is), notes. Everything from the report is escaped.
    Next steps are spelled as ``%%loadeval``'s options (the notebook's cards) or, for the
    standalone report a script writes, as keywords. ``disturbed`` (the runs other work
    disturbed) adds a DISTURBED badge beside the verdict's; ``config`` is a line above
    the headline saying which configuration the card holds."""
    classes = " ".join(["loadeval-headline", *_HEADLINE_CLASS.get(report.kind, ())])
    headline = f"<span class='{esc(classes)}'>{esc(report.headline)}</span>"
    if report.badge:
        head = _badge(report.badge, VERDICT_COLORS.get(report.badge, "#333"), "loadeval-badge")
        if disturbed:
            runs = " and ".join(disturbed)
            head += " " + _badge(
                "DISTURBED",
                DISTURBED_COLOR,
                "loadeval-badge loadeval-disturbed",
                f"other work ran during the {runs} run{'s' if len(disturbed) > 1 else ''}",
            )
        head += f" {headline}"
    else:
        head = f"<b>{esc(report.title)}</b>: {headline}"
    parts = []
    if config:
        parts.append(
            "<div class='loadeval-config' style='color:#555;font-size:12px;margin-bottom:4px;"
            f"text-align:left'>{esc(config)}</div>"
        )
    parts.append(f"<div style='font-size:15px;margin-bottom:4px;text-align:left'>{head}</div>")
    if report.facts:
        rows = "".join(
            f"<tr class='loadeval-{esc(f.key)}'><td style='{_CELL}padding:1px 12px 1px 0;"
            f"color:#555;white-space:nowrap'>{esc(_sentence(f.label))}</td>"
            f"<td style='{_CELL}padding:1px 0'>"
            + (f"<b>{esc(f.said(spelling))}</b>" if f.key in _EMPHASISED else esc(f.said(spelling)))
            + "</td></tr>"
            for f in report.facts
        )
        parts.append(f"<table style='margin:0;border-collapse:collapse'>{rows}</table>")
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
    parts += [f"<div style='color:#555;text-align:left'>note: {esc(n)}</div>" for n in report.notes]
    css = "loadeval-verdict" + ("" if report.kind == "verdict" else f" loadeval-{report.kind}")
    return _card("".join(parts), css)


def verdict_html(d: Diagnosis, config: str = "") -> str:
    """The verdict card (with a DISTURBED badge when other work disturbed a run; ``config``:
    a line saying which configuration was measured)."""
    return report_html(d.facts(), disturbed=d.disturbed, config=config)


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


def config_words(row: HistoryRow) -> str:
    """The configuration a history row measured, in the panel's words:
    ``num_workers=1 · pin_memory · cache 20`` (settings the loader does not have are left
    out: a loader that is not a DataLoader has a cache size only)."""
    parts = []
    if row.num_workers is not None:
        parts.append(f"num_workers={row.num_workers}")
    if row.pin_memory:
        parts.append("pin_memory")
    if row.num_workers and row.prefetch_factor not in (None, 2):  # 2: PyTorch's default
        parts.append(f"prefetch_factor={row.prefetch_factor}")
    if row.num_workers and row.persistent_workers:
        parts.append("persistent_workers")
    if row.num_cached_batches is not None:
        parts.append(f"cache {row.num_cached_batches}")
    return " · ".join(parts)


HISTORY_COLUMNS = ("run", "configuration", "real step", "ideal step", "speedup", "verdict")


def history_html(rows: list[HistoryRow]) -> str:
    """The history table: each pair's configuration → real step, ideal step, speedup.
    Compact (the loader's settings in one column, in the panel's words): no cell wraps, and
    a table wider than the notebook scrolls in its own box."""
    return _table(
        HISTORY_COLUMNS,
        [
            [
                r.label,
                config_words(r) or "–",
                fmt_seconds(r.real_step_s),
                fmt_seconds(r.ideal_step_s),
                fmt_times(r.speedup),
                r.verdict or "–",
            ]
            for r in rows
        ],
        "loadeval-history",
        "loadeval-history-row",
        compact=True,
    )


def pair_config(result: PairResult) -> str:
    """Which pair a card holds (``Configuration: num_workers=1 · pin_memory · cache 20
    (history row #2 num_workers=1 c20)``): the saved copy shows the latest pair, a rerun's
    after a rerun, and says which of the history's rows it is."""
    words = config_words(result.row()) or "as is"
    return f"Configuration: {words}" + (f" (history row {result.label})" if result.label else "")


def pair_html(result: Optional[PairResult], rows: list[HistoryRow]) -> str:
    """A pair's card for the saved copy: which configuration it holds, verdict, SVG
    step-time chart, history (no scripts)."""
    parts = []
    if result is not None and result.diagnosis is not None:
        parts.append(verdict_html(result.diagnosis, config=pair_config(result)))
    elif result is not None:
        parts.append(report_html(result.facts(), config=pair_config(result)))
    if result is not None:
        runs = result.runs()
        parts.append(steps_svg([(w, runs[w]) for w in SIDES]))
    if rows:
        parts.append(history_html(rows))
    return "".join(parts)
