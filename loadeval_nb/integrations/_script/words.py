"""What the runner's parent and its child both say, in one place: how a script is named,
how a side is named, and the sentence for a side stopped at its ``--timeout`` (which the
child's guard says where the parent cannot). Neither half imports the other: the child
reads only the spec (:mod:`.spec`) and these words."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Optional

from .._options import RUN, flags

RUN_FLAGS = flags(RUN)
"""Each setting a sentence may name (an :class:`OptionError`'s ``option``), as the
command's option (the one table's)."""


def said_as_flag(e: Exception) -> str:
    """The sentence of ``e`` with a setting named by the command's option (``--try``, not
    ``variants``): how either half reports a setting it refuses."""
    from ...core.errors import OptionError

    if isinstance(e, OptionError):
        return e.renamed(RUN_FLAGS.get(e.option, e.option))
    return str(e)


def describe_target(target: Sequence[str]) -> str:
    """``train.py`` or ``-m pkg.train``: how sentences name the script."""
    return f"-m {target[1]}" if target[0] == "-m" else os.path.basename(target[0])


def side_words(which: str) -> str:
    """``the real run``, ``the ideal run``, or ``the interleaved runs`` (the pair)."""
    return "the interleaved runs" if which == "pair" else f"the {which} run"


def timed_out_sentence(name: str, side: str, iterated: bool, timeout_s: Optional[float]) -> str:
    """The sentence for a side stopped at its time limit: ``iterated`` says whether the
    script had iterated a DataLoader by then."""
    limit = f"{timeout_s:g} s" if timeout_s is not None else "its time limit"
    if not iterated:
        return (
            f"{name} did not iterate a DataLoader within {limit} and was stopped: "
            "loadeval_nb measures the torch DataLoader a script trains on; if it takes "
            "longer to reach its training loop, pass --timeout with more seconds."
        )
    return (
        f"{name} did not get through the steps of {side} within {limit} and was "
        "stopped; pass --timeout with more seconds if it needs longer."
    )
