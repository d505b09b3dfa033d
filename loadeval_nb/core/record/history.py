"""The rerun panel's history: the configurations tried and what each measured, saved and
read as versioned JSON (``kind`` ``loadeval_nb.history``)."""

from __future__ import annotations

import json
import os
from typing import Any

from .._errors import RunLogError
from .._files import write_text_atomic
from .run import PathLike

HISTORY_KIND = "loadeval_nb.history"
HISTORY_SCHEMA = 1


def save_history(rows: list[dict[str, Any]], path: PathLike) -> str:
    """Write the rerun panel's history rows (settings and results) as versioned JSON."""
    doc = {"kind": HISTORY_KIND, "schema_version": HISTORY_SCHEMA, "rows": rows}
    return write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=False))


def load_history(path: PathLike) -> list[dict[str, Any]]:
    """The rows :func:`save_history` wrote; :class:`RunLogError` (one sentence) for a file
    that is missing, damaged, foreign or newer."""
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise RunLogError(f"No history at {p!r}; check the path.") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RunLogError(f"{p!r} is not a JSON history; export it again.") from None
    if not isinstance(doc, dict) or doc.get("kind") != HISTORY_KIND:
        raise RunLogError(f"{p!r} is not a loadeval_nb history; pass a file export_history wrote.")
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > HISTORY_SCHEMA:
        raise RunLogError(
            f"{p!r} uses history schema {version!r}, newer than this loadeval_nb reads; "
            "upgrade with `pip install -U loadeval-nb`."
        )
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise RunLogError(f"{p!r} is a damaged history (its rows are not a list of objects).")
    return rows
