"""A result's facts, said once: :class:`Facts` holds them as text, ready to render.

Every result (``Diagnosis``, ``PairResult``, ``LadderResult``, ``SweepResult``,
``TransformSplit``, ``RanksResult``, ``Comparison``) builds one ``Facts`` in ``facts()``;
its plain text (``str(result)``, ``result.text()``) is :meth:`Facts.text` and the
notebook's HTML card is viz's rendering of the same ``Facts``, so the two never
disagree. :class:`Reported` is that shared rendering tail, written once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional


class Fact(NamedTuple):
    """One labelled fact: ``key`` names it for code (CSS, tests), ``label`` for people."""

    key: str
    label: str
    text: str


@dataclass(frozen=True)
class Facts:
    """What a result says: a headline, labelled facts, an optional table and notes."""

    kind: str
    """``verdict``, ``ladder``, ``sweep``, ``transforms``, ``ranks`` or ``compare``."""
    title: str
    headline: str
    """One sentence: the conclusion."""
    badge: Optional[str] = None
    """The verdict's word (``INPUT-BOUND``), shown as a badge; None for other kinds."""
    facts: tuple[Fact, ...] = ()
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        """The plain-text rendering (what ``print(result)`` shows)."""
        head = f"{self.badge} - {self.headline}" if self.badge else self.headline
        lines = [f"{self.title}: {head}"]
        lines += [f"  {f.label}: {f.text}" for f in self.facts]
        if self.columns:
            table = [self.columns, *self.rows]
            widths = [max(len(r[i]) for r in table) for i in range(len(self.columns) - 1)]
            for r in table:
                cells = [c.ljust(w) for c, w in zip(r, widths)] + [r[-1]]
                lines.append(("  " + "  ".join(cells)).rstrip())
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


class Reported:
    """The rendering tail every result shares: a subclass says its :class:`Facts` once
    (``facts()``); the text, ``str()`` and IPython's display follow from them."""

    def facts(self) -> Facts:
        raise NotImplementedError

    def text(self) -> str:
        """The plain-text rendering of :meth:`facts` (what ``print(result)`` shows)."""
        return self.facts().text()

    def report(self) -> str:
        """Deprecated: :meth:`text` (``report`` named five things; it names none now)."""
        warnings.warn(
            "result.text() is now result.text(); report() goes in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.text()

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the text
        p.text(self.text())
