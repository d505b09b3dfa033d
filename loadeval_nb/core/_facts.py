"""A result's facts, said once: :class:`Facts` holds them as text, ready to render.

Every result (``Diagnosis``, ``PairResult``, ``LadderResult``, ``SweepResult``,
``TransformSplit``, ``RanksResult``, ``Comparison``) builds one ``Facts`` in ``facts()``;
its plain text (``str(result)``, ``result.text()``) is :meth:`Facts.text` and the
notebook's HTML card is viz's rendering of the same ``Facts``, so the two never
disagree. :class:`Reported` is that shared rendering tail, written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Union

SPELLINGS = ("keywords", "options", "cli")
"""How a next step is spelled: as a script's keyword (``steps=400``), the default; as
``%%loadeval``'s option (``--steps 400``); or as ``python -m loadeval_nb run``'s option
(``--steps 400``, and where the command has no such option, the notebook's, said so)."""


class Action(NamedTuple):
    """A next step with its parameters, in no front end's spelling: core says *what* to
    run, each front end says it in its own words (:func:`spell`)."""

    setting: str
    """``steps``, ``cache_on``, ``num_cached_batches``, ``interleave``, ``repeat``, ``only``,
    ``variants`` (``--try``: a change of the loader measured in the pass), ``ladder`` or
    ``sweep``."""
    value: Any = None


_OPTION_NAMES = {"num_cached_batches": "--cache", "variants": "--try"}
"""Settings whose option is not their name with dashes (the same in the magic and the
command)."""
CLI_OPTIONS = (
    "steps",
    "warmup",
    "num_cached_batches",
    "cache_on",
    "log_dir",
    "interleave",
    "variants",
)
"""The settings ``python -m loadeval_nb run`` has an option for; the others are the
notebook's (``%%loadeval --ladder``)."""


def _option(action: Action) -> str:
    """``action`` as ``%%loadeval``'s option."""
    name, v = action.setting, action.value
    if name == "ladder":
        return "--ladder"
    if name == "sweep":
        return f'--sweep "{v}"'
    if name == "interleave":
        return "--sequential" if v is False else "the default (interleaved)"
    return f"{option_name(name, 'options')} {v}"


def spell(action: Action, spelling: str = "keywords") -> str:
    """``action`` as a script writes it (``keywords``), as the magic does (``options``), or
    as the command line does (``cli``; a step the command cannot take is the notebook's
    option, said so)."""
    name, v = action.setting, action.value
    if spelling == "options":
        return _option(action)
    if spelling == "cli":
        if name in CLI_OPTIONS:
            return _option(action)
        return f"%%loadeval {_option(action)} in a notebook"
    if name == "ladder":
        return "run_ladder"
    if name == "sweep":
        return f'run_sweep with "{v}"'
    return f"{name}={v!r}"


def option_name(setting: str, spelling: str = "keywords") -> str:
    """A setting's name as a front end spells it: ``log_dir`` or ``--log-dir``."""
    if spelling in ("options", "cli"):
        return _OPTION_NAMES.get(setting, f"--{setting.replace('_', '-')}")
    return setting


Piece = Union[str, Action]


class Fact(NamedTuple):
    """One labelled fact: ``key`` names it for code (CSS, tests), ``label`` for people.
    A fact that names a next step keeps its ``pieces`` (text and :class:`Action`), so that
    each front end can spell the step its way; ``text`` is the script's spelling."""

    key: str
    label: str
    text: str
    pieces: tuple[Piece, ...] = ()

    @classmethod
    def of(cls, key: str, label: str, pieces: Sequence[Piece]) -> Fact:
        """A fact made of text and actions."""
        pieces = tuple(pieces)
        return cls(key, label, said(pieces), pieces)

    def said(self, spelling: str = "keywords") -> str:
        """The text, its next steps spelled for a front end (see :data:`SPELLINGS`)."""
        return said(self.pieces, spelling) if self.pieces else self.text


def said(pieces: Sequence[Piece], spelling: str = "keywords") -> str:
    return "".join(p if isinstance(p, str) else spell(p, spelling) for p in pieces)


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

    def text(self, spelling: str = "keywords") -> str:
        """The plain-text rendering (what ``print(result)`` shows); ``spelling`` says how
        next steps are written (a script's keywords, or the magic's options)."""
        head = f"{self.badge} - {self.headline}" if self.badge else self.headline
        lines = [f"{self.title}: {head}"]
        lines += [f"  {f.label}: {f.said(spelling)}" for f in self.facts]
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

    def text(self, spelling: str = "keywords") -> str:
        """The plain-text rendering of :meth:`facts` (what ``print(result)`` shows); the
        magic asks for ``spelling="options"``."""
        return self.facts().text(spelling)

    def __str__(self) -> str:
        return self.text()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # IPython takes a class's own __repr__ (a dataclass makes one) before an inherited
        # _repr_pretty_: each result class gets its own, so IPython shows the text
        super().__init_subclass__(**kwargs)
        if "_repr_pretty_" not in cls.__dict__:
            cls._repr_pretty_ = Reported._repr_pretty_  # type: ignore[method-assign]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython shows the text
        p.text(self.text())
