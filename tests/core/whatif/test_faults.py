"""The simulator's bad inputs (from the bad-input catalogue)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from loadeval_nb import (
    LoadEvalError,
)
from loadeval_nb.whatif import simulate
from tests.catalogue import InputUser, check_bad_input

CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "simulate-no-workers",
        lambda u: simulate(0.01, 0.01, num_workers=-1),
        LoadEvalError,
        "num_workers must be an integer >= 0, not -1.",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)
