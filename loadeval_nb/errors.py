"""loadeval_nb.errors: The exceptions and warnings loadeval_nb raises; each says in one sentence what to do.

The same module as :mod:`loadeval_nb.core.errors` (its one home), under a shorter name.
"""

import sys
from typing import TYPE_CHECKING

import loadeval_nb.core.errors as _home

if TYPE_CHECKING:  # what type checkers and editors read
    from .core.errors import *  # noqa: F403

sys.modules[__name__] = _home
