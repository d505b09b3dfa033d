"""loadeval_nb.whatif: What other loader settings would buy: the worker/queue simulator and its predictions.

The same module as :mod:`loadeval_nb.core.whatif` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.whatif as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.whatif import *  # noqa: F403

sys.modules[__name__] = _home
