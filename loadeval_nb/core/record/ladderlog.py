"""Ladder and split logs: a caching ladder (its rungs, each with its run log, and its
per-transform split) or a per-transform split alone, as versioned JSON, never pickled,
so that two of them can be compared later (``python -m loadeval_nb compare``).

Ladder layout (``schema_version`` 1)::

    {
      "kind": "loadeval_nb.ladder", "schema_version": 1,
      "label": str, "created_unix": float,
      "loader_settings": {...},
      "rungs": [                          # in ladder order: device, host, samples, real
        {"name": str, "title": str, "adds": str | null,   # the stage over the rung above
         "skipped": str | null, "error": str | null,      # why it did not run, or failed
         "run": {a run log, see runlog} | null}, ...],
      "transforms": {a split, as below, without kind and schema_version} | null,
      "notes": [str, ...],
      "error": str | null                 # what stopped the ladder
    }

Split layout (``schema_version`` 1)::

    {
      "kind": "loadeval_nb.transform_split", "schema_version": 1,
      "samples": int, "batches": int, "num_workers": int, "processes": int,
      "collate_s": float | null,          # collate_fn's mean time a batch
      "per_sample_s": float | null,       # derived: the parts added up, a sample
      "parts": [{"name": str, "calls": int, "seconds": float, "rest": bool,
                 "sum_sq_s2": float | null,       # each sample's time squared, summed
                 "per_sample_s": float | null, "share": float | null}, ...],  # derived
      "notes": [str, ...]
    }

``seconds`` is a step's own time summed over every sample and process; ``sum_sq_s2``
is the spread an interval on a step's time needs (null in a split that did not keep
it: then two splits are compared without intervals). Derived values are recomputed on
load, never trusted from disk. Like run logs, a reader refuses a newer schema with a
message saying to upgrade, and any JSON that is not one of these.
"""

from __future__ import annotations

import json
import math
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .._files import expand_path, write_text_atomic
from ..errors import RunLogError
from .run import RUN_KIND, PathLike, Run, run_from_dict, run_to_dict
from .runlog import load_run

__all__ = [
    "LADDER_KIND",
    "LADDER_SCHEMA",
    "SPLIT_KIND",
    "SPLIT_SCHEMA",
    "LadderLog",
    "PartLog",
    "RungLog",
    "SplitLog",
    "ladder_from_dict",
    "load_log",
    "split_from_dict",
]

LADDER_KIND = "loadeval_nb.ladder"
LADDER_SCHEMA = 1
SPLIT_KIND = "loadeval_nb.transform_split"
SPLIT_SCHEMA = 1


@dataclass(frozen=True)
class PartLog:
    """One step of a split as saved: its own time summed over every sample and process
    (seconds), the sum of each sample's squared time (seconds², None: not kept)."""

    name: str
    calls: int
    seconds: float
    sum_sq_s2: Optional[float] = None
    rest: bool = False
    """True for the part of the per-sample call outside every timed step."""


@dataclass
class SplitLog:
    """A per-transform split as saved (see the module's layout)."""

    parts: list[PartLog]
    samples: int
    batches: int = 0
    num_workers: int = 0
    processes: int = 0
    collate_s: Optional[float] = None
    notes: list[str] = field(default_factory=list)

    @property
    def per_sample_s(self) -> Optional[float]:
        """The whole per-sample call's mean time (the parts added up)."""
        return sum(p.seconds for p in self.parts) / self.samples if self.samples else None

    def to_dict(self) -> dict[str, Any]:
        """The split's document (JSON-ready), without its kind."""
        whole = sum(p.seconds for p in self.parts)
        return {
            "samples": self.samples,
            "batches": self.batches,
            "num_workers": self.num_workers,
            "processes": self.processes,
            "collate_s": self.collate_s,
            "per_sample_s": self.per_sample_s,
            "parts": [
                {
                    "name": p.name,
                    "calls": p.calls,
                    "seconds": p.seconds,
                    "rest": p.rest,
                    "sum_sq_s2": p.sum_sq_s2,
                    "per_sample_s": p.seconds / self.samples if self.samples else None,
                    "share": p.seconds / whole if whole else None,
                }
                for p in self.parts
            ],
            "notes": list(self.notes),
        }

    def save(self, path: PathLike) -> str:
        """Write the split as versioned JSON (atomically). Returns the path."""
        doc = {"kind": SPLIT_KIND, "schema_version": SPLIT_SCHEMA, **self.to_dict()}
        return write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=False))


@dataclass
class RungLog:
    """One rung of a ladder as saved: its run, or why it did not run."""

    name: str
    title: str = ""
    adds: Optional[str] = None
    """What the rung adds over the rung above it (``host-to-device copy``)."""
    run: Optional[Run] = None
    skipped: Optional[str] = None
    error: Optional[str] = None
    """The exception that stopped the rung, as text (its partial run is kept)."""


@dataclass
class LadderLog:
    """A caching ladder as saved (see the module's layout)."""

    rungs: list[RungLog]
    label: str = ""
    loader_settings: dict[str, Any] = field(default_factory=dict)
    transforms: Optional[SplitLog] = None
    notes: list[str] = field(default_factory=list)
    error: Optional[str] = None
    created_unix: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The ladder's document (JSON-ready)."""
        return {
            "kind": LADDER_KIND,
            "schema_version": LADDER_SCHEMA,
            "label": self.label,
            "created_unix": self.created_unix,
            "loader_settings": self.loader_settings,
            "rungs": [
                {
                    "name": r.name,
                    "title": r.title,
                    "adds": r.adds,
                    "skipped": r.skipped,
                    "error": r.error,
                    "run": run_to_dict(r.run) if r.run is not None else None,
                }
                for r in self.rungs
            ],
            "transforms": self.transforms.to_dict() if self.transforms is not None else None,
            "notes": list(self.notes),
            "error": self.error,
        }

    def save(self, path: PathLike) -> str:
        """Write the ladder as versioned JSON (atomically). Returns the path."""
        text = json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)
        return write_text_atomic(path, text)


def _version(doc: dict[str, Any], newest: int, what: str, source: str) -> None:
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunLogError(f"{source} has no integer schema_version; save the {what} again.")
    if version > newest:
        raise RunLogError(
            f"{source} uses {what} schema {version}, newer than the {newest} this "
            "loadeval_nb reads; upgrade with `pip install -U loadeval-nb`."
        )


def _count(doc: dict[str, Any], key: str) -> int:
    v = doc.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"its {key} is {v!r}, not a whole number")
    return v


def _seconds(v: Any, key: str) -> Optional[float]:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"its {key} is {v!r}, not a time in seconds")
    return float(v)


def _texts(v: Any, key: str) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"its {key} are not a list of texts")
    return list(v)


def _split(doc: Any) -> SplitLog:
    if not isinstance(doc, dict):
        raise ValueError("its split is not an object")
    raw = doc.get("parts")
    if not isinstance(raw, list):
        raise ValueError("its parts are not a list")
    parts = []
    for p in raw:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise ValueError("a part has no name")
        parts.append(
            PartLog(
                p["name"],
                _count(p, "calls"),
                _seconds(p.get("seconds", 0.0), "seconds") or 0.0,
                _seconds(p.get("sum_sq_s2"), "sum_sq_s2"),
                bool(p.get("rest", False)),
            )
        )
    return SplitLog(
        parts,
        _count(doc, "samples"),
        _count(doc, "batches"),
        _count(doc, "num_workers"),
        _count(doc, "processes"),
        _seconds(doc.get("collate_s"), "collate_s"),
        _texts(doc.get("notes"), "notes"),
    )


def split_from_dict(doc: Any, source: str = "the split") -> SplitLog:
    """A split read back from its document; :class:`RunLogError` (one sentence) for a
    foreign, newer or damaged one."""
    if not isinstance(doc, dict) or doc.get("kind") != SPLIT_KIND:
        raise RunLogError(
            f"{source} is not a loadeval_nb transform split; pass a file written by "
            "TransformSplit.save()."
        )
    _version(doc, SPLIT_SCHEMA, "split", source)
    try:
        return _split(doc)
    except (TypeError, ValueError) as e:
        raise RunLogError(f"{source} is a damaged split ({e}); measure it again.") from None


def ladder_from_dict(doc: Any, source: str = "the ladder") -> LadderLog:
    """A ladder read back from its document (each rung's run log read as a run log);
    :class:`RunLogError` (one sentence) for a foreign, newer or damaged one."""
    if not isinstance(doc, dict) or doc.get("kind") != LADDER_KIND:
        raise RunLogError(
            f"{source} is not a loadeval_nb ladder; pass a file written by LadderResult.save()."
        )
    _version(doc, LADDER_SCHEMA, "ladder", source)
    try:
        raw = doc.get("rungs")
        if not isinstance(raw, list):
            raise ValueError("its rungs are not a list")
        rungs = []
        for r in raw:
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                raise ValueError("a rung has no name")
            opt = {k: r.get(k) for k in ("adds", "skipped", "error")}
            if any(v is not None and not isinstance(v, str) for v in opt.values()):
                raise ValueError(f"the {r['name']} rung's texts are not texts")
            run = r.get("run")
            rungs.append(
                RungLog(
                    r["name"],
                    str(r.get("title") or ""),
                    run=None if run is None else run_from_dict(run, f"{source}'s {r['name']} rung"),
                    **opt,
                )
            )
        split = doc.get("transforms")
        return LadderLog(
            rungs,
            str(doc.get("label") or ""),
            dict(doc.get("loader_settings") or {}),
            None if split is None else _split(split),
            _texts(doc.get("notes"), "notes"),
            doc.get("error") if isinstance(doc.get("error"), str) else None,
            float(doc.get("created_unix") or 0.0),
        )
    except (TypeError, ValueError) as e:
        if isinstance(e, RunLogError):  # a rung's run log says what is wrong with it
            raise
        raise RunLogError(f"{source} is a damaged ladder ({e}); measure it again.") from None


def load_log(path: PathLike) -> Union[Run, LadderLog, SplitLog]:
    """Read a run log, a ladder or a transform split, whichever the file holds.

    Raises :class:`RunLogError` (one sentence) for a missing, unreadable, foreign,
    damaged or too-new file (a file that is not JSON gets a run log's sentences)."""
    p = expand_path(path)
    try:
        regular = stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        regular = False
    doc: Any = None
    if regular:  # never open a pipe or a device: it could block
        try:
            with open(p, encoding="utf-8-sig") as f:  # a byte-order mark is JSON text too
                doc = json.load(f)
        except (OSError, ValueError, RecursionError):
            doc = None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind == LADDER_KIND:
        return ladder_from_dict(doc, repr(p))
    if kind == SPLIT_KIND:
        return split_from_dict(doc, repr(p))
    if doc is None or kind == RUN_KIND:
        # a run log, or a file that could not be read: load_run says what is wrong with it
        return load_run(p)
    raise RunLogError(
        f"{p!r} is not a loadeval_nb run log, ladder or transform split; pass a file "
        "written by save_metrics(), LadderResult.save() or TransformSplit.save()."
    )
