"""What two runs say: the verdict as a record with its facts and advice
(``diagnosis``), computing it from a real and an ideal run (``diagnose``), and the CI
comparison of two runs, ladders or transform splits and where they changed (``compare``,
``changes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .._facts import Fact, Facts
    from .changes import Change
    from .compare import Comparison, compare_runs
    from .diagnose import diagnose
    from .diagnosis import (
        INPUT_BOUND,
        NOT_ENOUGH_DATA,
        NOT_INPUT_BOUND,
        PARTLY_INPUT_BOUND,
        Diagnosis,
        Note,
    )

__all__ = [
    "Change",
    "Comparison",
    "Diagnosis",
    "Fact",
    "Facts",
    "INPUT_BOUND",
    "NOT_ENOUGH_DATA",
    "NOT_INPUT_BOUND",
    "Note",
    "PARTLY_INPUT_BOUND",
    "compare_runs",
    "diagnose",
]
__getattr__, __dir__ = lazy_face(__name__)
