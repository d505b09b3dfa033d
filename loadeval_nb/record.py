"""loadeval_nb.record: A measured run as a record, and its versioned JSON file.

The same module as :mod:`loadeval_nb.core.record` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.record as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.record import *  # noqa: F403

sys.modules[__name__] = _home
