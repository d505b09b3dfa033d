"""The saved notebook's copy of a result (the cards themselves are :mod:`loadeval_nb.viz`'s:
one card from one source for the notebook and the report)."""

from __future__ import annotations


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
