"""loadeval_nb.explore: Running the user's loop to find what to change: the pair, the caching ladder, the settings sweep, the per-transform split.

The same module as :mod:`loadeval_nb.core.explore` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.explore as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.explore import *  # noqa: F403

sys.modules[__name__] = _home
