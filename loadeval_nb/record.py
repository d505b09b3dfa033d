"""loadeval_nb.record: A measured run as a record, and its versioned JSON file."""

from __future__ import annotations

from .core import (
    SCHEMA_VERSION,
    Run,
    load_run,
)

__all__ = [
    "Run",
    "SCHEMA_VERSION",
    "load_run",
]
