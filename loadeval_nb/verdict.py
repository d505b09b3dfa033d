"""loadeval_nb.verdict: What two runs say: the diagnosis of a real and an ideal run, and the CI comparison of two runs.

The same module as :mod:`loadeval_nb.core.verdict` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.verdict as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.verdict import *  # noqa: F403

sys.modules[__name__] = _home
