"""loadeval_nb.measure: Measuring one run: the DataLoader wrapper and what it reads while the loop runs.

The same module as :mod:`loadeval_nb.core.measure` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.measure as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.measure import *  # noqa: F403

sys.modules[__name__] = _home
