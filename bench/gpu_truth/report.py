"""Records (one figure against its truth), their lines, the closing line and the JSON file.

Pure Python: no torch, no GPU, so the self-tests check it anywhere.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

SCHEMA_VERSION = 1  # of the JSON file --json writes


@dataclass
class Record:
    """One figure against its truth. ``ok`` is None where the figure cannot exist here (a dry
    run on CPU has no NVML and no CUDA events): shown as SKIP and not counted."""

    check: str
    what: str
    measured: Any  # a number in ``unit``, or a text (a verdict, a name)
    truth: Any
    ok: Optional[bool]
    rule: str
    unit: str = ""
    note: str = ""

    def ratio(self) -> Optional[float]:
        m, t = self.measured, self.truth
        if is_number(m) and is_number(t) and t != 0:
            return m / t
        return None

    @property
    def status(self) -> str:
        return "SKIP" if self.ok is None else "PASS" if self.ok else "FAIL"


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fmt_value(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if is_number(v):
        if unit == "ms":  # four significant figures: 0.1 % of a 5 ms step must show
            return f"{v:.4g} ms"
        if unit == "%":
            return f"{v:.1f} %"
        if unit == "x":
            return f"{v:.3f}x"
        return f"{v:g} {unit}".rstrip()
    return str(v)


def format_record(r: Record) -> str:
    ratio = r.ratio()
    shown = f"(ratio {ratio:.4f})" if ratio is not None else "(ratio -)"
    line = (
        f"  {r.status}  {r.check}: {r.what}: {fmt_value(r.measured, r.unit)} vs "
        f"{fmt_value(r.truth, r.unit)} {shown}  [{r.rule}]"
    )
    return line + (f"\n          {r.note}" if r.note else "")


def markdown_table(records: Sequence[Record]) -> str:
    """The records as docs/gpu.md's results table: check, figure, measured, truth, ratio,
    result (its rule, and the note where there is one)."""
    lines = [
        "| check | figure | measured | truth | ratio | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        ratio = r.ratio()
        result = f"{r.status} ({r.rule})" + (f"; {r.note}" if r.note else "")
        cells = (
            f"`{r.check}`",
            r.what,
            fmt_value(r.measured, r.unit),
            fmt_value(r.truth, r.unit),
            f"{ratio:.3f}" if ratio is not None else "—",
            result,
        )
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def summary_line(records: Sequence[Record], dry: bool) -> str:
    counted = [r for r in records if r.ok is not None]
    held = sum(1 for r in counted if r.ok)
    if not dry:
        return f"gpu_truth: {held} of {len(counted)} checks hold"
    skipped = len(records) - len(counted)
    return (
        f"gpu_truth (dry run on CPU: code paths only, the figures mean nothing): {held} of "
        f"{len(counted)} checks hold; {skipped} need CUDA"
    )


# ---- the rules a figure is held to -----------------------------------------------------------


def rel(check: str, what: str, m: Any, t: Any, tol: float, unit: str = "", note: str = ""):
    """The measured figure within +-tol (a fraction) of the truth."""
    ok = is_number(m) and is_number(t) and t != 0 and abs(m / t - 1) <= tol
    return Record(check, what, m, t, ok, f"within {tol:.0%}", unit, note)


def near(check: str, what: str, m: Any, t: Any, points: float, note: str = "") -> Record:
    """Two percentages within +-points of each other."""
    ok = is_number(m) and is_number(t) and abs(m - t) <= points
    return Record(check, what, m, t, ok, f"within {points:g} points", "%", note)


def at_least(check: str, what: str, m: Any, floor: float, unit: str = "", note: str = ""):
    ok = is_number(m) and m >= floor
    return Record(check, what, m, floor, ok, f">= {fmt_value(floor, unit)}", unit, note)


def at_most(check: str, what: str, m: Any, ceiling: float, unit: str = "", note: str = ""):
    ok = is_number(m) and m <= ceiling
    return Record(check, what, m, ceiling, ok, f"<= {fmt_value(ceiling, unit)}", unit, note)


def same(check: str, what: str, m: Any, t: Any, ok: bool, rule: str, note: str = "") -> Record:
    return Record(check, what, m, t, bool(ok), rule, "", note)


# ---- the JSON file ---------------------------------------------------------------------------


def _plain(v: Any) -> Any:
    """A JSON value: numbers stay numbers (NaN and infinities become None), tuples lists,
    anything else its text."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, float)):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def record_dict(r: Record) -> dict[str, Any]:
    return {**_plain(asdict(r)), "status": r.status, "ratio": _plain(r.ratio())}


def write_json(path: Path, header: dict[str, Any], records: Sequence[Record], **more: Any) -> None:
    """The figures so far, written whole after every check (a run cut off by a timeout
    leaves the checks it finished): to a temporary name, then renamed over ``path``."""
    counted = [r for r in records if r.ok is not None]
    doc = {
        "schema_version": SCHEMA_VERSION,
        **_plain(header),
        **_plain(more),
        "held": sum(1 for r in counted if r.ok),
        "counted": len(counted),
        "records": [record_dict(r) for r in records],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any]:
    """A file :func:`write_json` wrote; refuses a newer schema with one sentence."""
    doc = json.loads(Path(path).read_text())
    version = doc.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(
            f"{path} has schema_version {version!r}; this gpu_truth reads up to "
            f"{SCHEMA_VERSION}: update the checkout that reads it."
        )
    return doc
