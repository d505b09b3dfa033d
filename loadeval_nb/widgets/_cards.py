"""The saved notebook's copy of a result. The cards themselves are rendered by
:mod:`loadeval_nb.viz` (pure HTML, shared with the standalone report), so the notebook
and the report show one card from one source; they are re-exported here for the
widgets layer's users."""

from __future__ import annotations

from ..viz import (
    history_html,
    ladder_html,
    pair_html,
    report_html,
    sweep_html,
    verdict_html,
)

__all__ = [
    "history_html",
    "ladder_html",
    "pair_html",
    "report_html",
    "static_bundle",
    "sweep_html",
    "verdict_html",
]


def static_bundle(css_class: str, cards: list[tuple[str, str]]) -> dict[str, str]:
    """The output kept in the saved notebook: each (html, plain text) card in turn, under one
    heading, in a ``css_class`` div the live page hides (it shows the widgets instead)."""
    return {
        "text/html": f"<div class='{css_class}'><div style='font-family:sans-serif;font-size:12px;"
        "color:#777'>loadeval_nb result (static copy)</div>"
        + "".join(h for h, _ in cards)
        + "</div>",
        "text/plain": "\n\n".join(t for _, t in cards if t),
    }
