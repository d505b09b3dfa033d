"""The checks, one module each, in the order a run takes them. Each module's ``check(ctx)``
returns its records; what it measures and against which truth is its docstring."""

from __future__ import annotations

from typing import Callable

from ..harness import Ctx
from ..report import Record
from . import ideal, jpeg, observer, seed, split, suite, util

CHECKS: dict[str, Callable[[Ctx], list[Record]]] = {
    "util": util.check,
    "ideal": ideal.check,
    "split": split.check,
    "observer": observer.check,
    "seed": seed.check,
    "jpeg": jpeg.check,
    "suite": suite.check,
}
