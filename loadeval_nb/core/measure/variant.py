"""The variant arm: the training loader rebuilt with other settings, served in the same
pass as the real one, so that what the advice says a change buys is measured, not
predicted.

A :class:`Variant` is the settings changed (``num_workers``, ``pin_memory``,
``prefetch_factor``, ``persistent_workers``: what :func:`~.loader.rebuild_loader` may
change), written as a user writes them (``"num_workers=4, pin_memory=True"``). The
interleaved pass serves its blocks between the real ones (R I V V I R: a drift of the
machine lands on every arm), each of its batches taking a real batch's place in the
loop's epoch; the rebuilt loader's workers are stopped after the pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import OptionError
from ..record.run import VARIANT as VARIANT
from .loader import TUNABLE, check_workers, loader_knobs, rebuild_loader

ADVICE = "advice"
"""``--try advice``: the variant is what the first pass's advice names (the simulator's
``num_workers``), measured in a second pass."""

_BOOLS = {"true": True, "false": False}


@dataclass(frozen=True)
class Variant:
    """The loader's settings a variant arm changes: ``changes`` as ``(name, value)`` pairs
    in the order given. ``Variant.of("num_workers=4, pin_memory=True")``,
    ``Variant.of({"num_workers": 4})``."""

    changes: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, spec: Any) -> Variant:
        """A variant from a string (``"num_workers=4, pin_memory=True"``), a mapping or a
        :class:`Variant`; one sentence (an :class:`OptionError` for ``variants``) for
        anything else."""
        if isinstance(spec, Variant):
            return spec
        if isinstance(spec, str):
            pairs = [_parse_pair(p) for p in spec.split(",") if p.strip()]
        elif isinstance(spec, dict):
            pairs = list(spec.items())
        else:
            raise OptionError(
                "variants",
                f" takes settings to try, such as 'num_workers=4, pin_memory=True' or "
                f"{{'num_workers': 4}}, not {spec!r}.",
            )
        if not pairs:
            raise OptionError(
                "variants", " names no setting to try; write one, such as 'num_workers=4'."
            )
        seen: set[str] = set()
        for name, value in pairs:
            if name not in TUNABLE:
                raise OptionError(
                    "variants",
                    f": {name!r} cannot be tried; a variant changes {', '.join(TUNABLE)}.",
                )
            if name in seen:
                raise OptionError("variants", f" sets {name} twice; give it once.")
            seen.add(name)
            _check_value(name, value)
        return cls(tuple(pairs))

    @property
    def settings(self) -> dict[str, Any]:
        """The changes as keyword arguments of :func:`~.loader.rebuild_loader`."""
        return dict(self.changes)

    @property
    def words(self) -> str:
        """``num_workers=4, pin_memory=True``: as a user writes it."""
        return ", ".join(f"{k}={v!r}" for k, v in self.changes)

    def __str__(self) -> str:
        return self.words

    def rebuild(self, loader: Any) -> Any:
        """``loader`` rebuilt with these settings (:func:`~.loader.rebuild_loader`); one
        sentence (an :class:`OptionError` for ``variants``), before a pass is spent on
        it, where the rebuilt loader's settings are the loader's own: the variant could
        not differ (``persistent_workers=True`` without workers, ``num_workers=2`` on a
        loader that has 2)."""
        rebuilt = rebuild_loader(loader, **self.settings)
        if loader_knobs(rebuilt) == loader_knobs(loader):
            have = ", ".join(f"{k}={v!r}" for k, v in loader_knobs(loader).items() if v is not None)
            raise OptionError(
                "variants",
                f": {self.words} changes nothing on this loader ({have}), so it cannot "
                "measure a difference; try a setting the loader does not have"
                + (" (persistent_workers needs num_workers=1 or more)."
                   if "persistent_workers" in self.settings and not rebuilt.num_workers
                   else "."),
            )  # fmt: skip
        return rebuilt


def _parse_pair(text: str) -> tuple[str, Any]:
    name, eq, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not eq or not name or not value:
        raise OptionError(
            "variants",
            f": {text.strip()!r} is not a setting; write NAME=VALUE, such as num_workers=4.",
        )
    if value.lower() in _BOOLS:
        return name, _BOOLS[value.lower()]
    try:
        return name, int(value)
    except ValueError:
        raise OptionError(
            "variants",
            f": {name}={value} is neither a whole number nor True/False; write, for "
            f"example, {name}=4 or {name}=True.",
        ) from None


def _check_value(name: str, value: Any) -> None:
    flag = name in ("pin_memory", "persistent_workers")
    if flag and not isinstance(value, bool):
        raise OptionError("variants", f": {name} is True or False, not {value!r}.")
    if not flag and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise OptionError("variants", f": {name} is a whole number of 0 or more, not {value!r}.")
    if name == "prefetch_factor" and value < 1:
        raise OptionError("variants", ": prefetch_factor is 1 or more.")
    if name == "num_workers":
        try:
            check_workers(value)
        except OptionError as e:  # (named for the variants, as every sentence here is)
            raise OptionError("variants", f": num_workers{e.rest}") from None
