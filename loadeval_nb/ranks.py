"""loadeval_nb.ranks: Many processes under torchrun: each rank's pair gathered (over the process group, or from the logs the ranks wrote), the slowest rank and the straggler.

The same module as :mod:`loadeval_nb.core.ranks` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.ranks as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.ranks import *  # noqa: F403

sys.modules[__name__] = _home
