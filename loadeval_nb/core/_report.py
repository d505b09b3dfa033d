"""A result's facts, said once: :class:`Report` holds them as text, ready to render.

``Diagnosis``, ``LadderResult`` and ``SweepResult`` each build one Report; the
plain-text report (``str(result)``) is :meth:`Report.text` and the notebook's HTML
card is the widgets' rendering of the same Report, so the two never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional


class Fact(NamedTuple):
    """One labelled fact: ``key`` names it for code (CSS, tests), ``label`` for people."""

    key: str
    label: str
    text: str


@dataclass(frozen=True)
class Report:
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
