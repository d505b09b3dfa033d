"""Run logs: one JSON document per run, versioned, never pickled.

Layout (``schema_version`` 3)::

    {
      "kind": "loadeval_nb.run", "schema_version": 4,
      "mode": "log" | "replay", "label": str | null, "status": str, "created_unix": float,
      "total_batches": int, "total_time": float,        # DALI's metric keys (seconds),
      "avg_batch_time": float | null, "min_batch_time": float | null,
      "max_batch_time": float | null, "batch_times": [...],   # derived, as get_metrics()
      "environment": {...},             # versions, devices (see _env.environment)
      "loader_settings": {...},         # batch_size, num_workers, pin_memory, ...
      "settings": {...},                # warmup, steps, cache_on, cache_bytes, ...
      "steps": {                        # one entry per step, all the run's blocks in order
        "start_ns": [...],              # since the run began (same clock as "util")
        "wait_ns": [...] | null,        # time inside next() (null: replay, not measured)
        "step_ns": [...],               # next() to next(): the whole step
        "samples": [...],               # samples in the batch (null entries if unknown)
        "block": [...], "complete": [...],  # the block each step is in (schema 3: epoch)
        "h2d_ns": [...] | null          # host-to-device copy time per step (CUDA events;
      },                                # null: not measured, e.g. on CPU)
      "blocks": [{"status", "steps", "setup_ns", "sync_ns"}, ...],  # schema 3: epochs
      "util": {"interval_s", "t_ns", "gpu": {...}, "cpu": {...}} | null,
      "worker_load_ns": [...] | null,   # per-batch time inside worker processes (optional)
      "summary": {...}                  # derived; recomputed on load, kept for readers
    }

Schema 2 added DALI's metric keys at the top level, so a file written by
``save_metrics`` reads like one written by DALI's ``LoaderEvaluator``
(``json.load(f)["total_batches"]``); schema 1 files (without them) are read too.
Everything derived is recomputed from ``steps`` on load, never trusted from disk.

The schema version is separate from the package version: it changes only when
the layout does. A reader refuses a newer version with a message saying to
upgrade, and refuses any JSON that is not a loadeval_nb run log.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from .._errors import a_kind
from .._files import cannot_write_in, expand_path
from ..errors import LoadEvalError, RunLogError
from .journal import check_free, read_journal
from .run import RUN_KIND, PathLike, Run, run_from_dict

MAX_NAME_BYTES = 255 - len(".journal")
"""The longest run-log file name: a file name has at most 255 bytes on the file systems
this runs on, and the journal beside it adds ``.journal``."""


def check_metrics_file(path: Any) -> None:
    """One :class:`LoadEvalError` now for a run-log path that could not be written later:
    not a path, a directory, in a folder that cannot be made or written to, or a path
    another live evaluator (here or in another process) is writing."""
    try:
        p = expand_path(path)
    except TypeError:
        raise LoadEvalError(
            f"metrics_file must be a path such as 'run.json', not {a_kind(path)}."
        ) from None
    name = os.path.basename(p)
    if len(os.fsencode(name)) > MAX_NAME_BYTES:
        raise LoadEvalError(
            f"metrics_file's name is {len(os.fsencode(name))} bytes long, over the "
            f"{MAX_NAME_BYTES} a file name may have here (with its journal's '.journal'); "
            "pass a shorter name."
        )
    if os.path.isdir(p):
        raise LoadEvalError(
            f"metrics_file {p!r} is a directory; pass a file path such as 'run.json'."
        )
    reason = cannot_write_in(os.path.dirname(os.path.abspath(p)))
    if reason is not None:
        raise LoadEvalError(
            f"Cannot write metrics_file {p!r} ({reason}); pass a path in a folder you can write to."
        )
    check_free(p)  # another evaluator writing there would mix its runs into this one's


def load_run(path: PathLike) -> Run:
    """Read a run log written by :meth:`Run.save` / ``LoaderEvaluator.save_metrics``.

    Raises :class:`RunLogError` (a ``ValueError``) with one sentence for a missing,
    corrupt, foreign or too-new file.
    """
    p = expand_path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise RunLogError(f"No run log at {p!r}; check the path or record the run first.") from None
    except OSError as e:
        raise RunLogError(f"Cannot read {p!r} ({e.strerror}); check the path.") from None
    if stat.S_ISDIR(mode):
        raise RunLogError(f"{p!r} is a directory; pass the path of a .json run log.")
    if not stat.S_ISREG(mode):  # a pipe or a device would block or never end
        raise RunLogError(f"{p!r} is not a regular file; pass the path of a .json run log.")
    try:
        with open(p, encoding="utf-8-sig") as f:  # a byte-order mark is valid JSON text too
            doc = json.load(f)
    except UnicodeDecodeError:
        raise RunLogError(
            f"{p!r} is not a text file; pass a .json run log written by loadeval_nb."
        ) from None
    except json.JSONDecodeError as e:
        raise RunLogError(
            f"{p!r} is not valid JSON ({e.msg}: line {e.lineno}, column {e.colno}); "
            "it may be truncated: record the run again."
        ) from None
    except RecursionError:
        raise RunLogError(
            f"{p!r} is nested too deeply to be a run log; record the run again."
        ) from None
    except OSError as e:
        raise RunLogError(f"Cannot read {p!r} ({e.strerror}); check the path.") from None
    if isinstance(doc, dict) and doc.get("kind") == RUN_KIND:
        doc, _ = read_journal(doc, p)  # epochs appended while the run went on
    return run_from_dict(doc, source=repr(p))
