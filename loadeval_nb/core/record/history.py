"""The rerun panel's history: the configurations tried and what each measured, saved and
read as versioned JSON (``kind`` ``loadeval_nb.history``)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from .._files import expand_path, write_text_atomic
from ..errors import RunLogError
from .run import PathLike

HISTORY_KIND = "loadeval_nb.history"
HISTORY_SCHEMA = 1


@dataclass(frozen=True)
class HistoryRow:
    """One configuration tried and what it measured: a row of the rerun panel's history
    table, of its chart and of its file. Times in seconds."""

    label: str
    num_workers: Optional[int] = None
    pin_memory: Optional[bool] = None
    prefetch_factor: Optional[int] = None
    persistent_workers: Optional[bool] = None
    num_cached_batches: Optional[int] = None
    real_step_s: Optional[float] = None
    ideal_step_s: Optional[float] = None
    speedup: Optional[float] = None
    verdict: Optional[str] = None
    """The verdict's word, or ``failed``."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, doc: Any, where: str = "the history") -> HistoryRow:
        """A row read back, each value checked like a run log's (:class:`RunLogError`, one
        sentence, for a row of the wrong kinds; unknown keys are ignored)."""
        if not isinstance(doc, dict):
            raise RunLogError(f"{where} holds a row that is not an object; export it again.")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v = doc.get(f.name, doc.get("cache") if f.name == "num_cached_batches" else None)
            kinds = _KINDS[f.name]
            ok = v is None or (
                isinstance(v, kinds) and not (bool not in kinds and isinstance(v, bool))
            )
            if isinstance(v, float) and not math.isfinite(v):
                ok = False
            if not ok or (f.name == "label" and v is None):
                raise RunLogError(
                    f"{where} has a row whose {f.name} is {v!r}, not {_SAID[f.name]}; "
                    "export it again."
                )
            values[f.name] = v
        return cls(**values)


_KINDS: dict[str, tuple[type, ...]] = {
    "label": (str,),
    "num_workers": (int,),
    "pin_memory": (bool,),
    "prefetch_factor": (int,),
    "persistent_workers": (bool,),
    "num_cached_batches": (int,),
    "real_step_s": (int, float),
    "ideal_step_s": (int, float),
    "speedup": (int, float),
    "verdict": (str,),
}
_SAID = {
    "label": "a text",
    "pin_memory": "true or false",
    "persistent_workers": "true or false",
    "verdict": "a text",
    **{k: "a whole number" for k in ("num_workers", "prefetch_factor", "num_cached_batches")},
    **{k: "a finite number" for k in ("real_step_s", "ideal_step_s", "speedup")},
}


def save_history(rows: Sequence[HistoryRow], path: PathLike) -> str:
    """Write the rerun panel's history rows (settings and results) as versioned JSON."""
    doc = {
        "kind": HISTORY_KIND,
        "schema_version": HISTORY_SCHEMA,
        "rows": [r.to_dict() for r in rows],
    }
    return write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=False))


def load_history(path: PathLike) -> list[HistoryRow]:
    """The rows :func:`save_history` wrote; :class:`RunLogError` (one sentence) for a file
    that is missing, damaged, foreign or newer, or a row of the wrong kinds."""
    p = expand_path(path)
    try:
        with open(p, encoding="utf-8-sig") as f:  # a byte-order mark is JSON text too
            doc = json.load(f)
    except FileNotFoundError:
        raise RunLogError(f"No history at {p!r}; check the path.") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise RunLogError(f"{p!r} is not a JSON history; export it again.") from None
    except OSError as e:
        raise RunLogError(f"Cannot read {p!r} ({e.strerror}); check the path.") from None
    if not isinstance(doc, dict) or doc.get("kind") != HISTORY_KIND:
        raise RunLogError(f"{p!r} is not a loadeval_nb history; pass a file export_history wrote.")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version > HISTORY_SCHEMA:
        raise RunLogError(
            f"{p!r} uses history schema {version!r}, newer than this loadeval_nb reads; "
            "upgrade with `pip install -U loadeval-nb`."
        )
    rows = doc.get("rows")
    if not isinstance(rows, list):
        raise RunLogError(f"{p!r} is a damaged history (its rows are not a list of objects).")
    return [HistoryRow.from_dict(r, repr(p)) for r in rows]
