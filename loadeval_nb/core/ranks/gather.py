"""The ranks' pairs gathered over the user's process group (``all_gather_object``)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from typing import Any, Optional

from .._env import agree, dist_rank
from ..errors import LoadEvalError
from ..record.run import Run
from .skew import RankResult, RanksResult, _payload, ranks_result


def gather_pair(result: Any, group: Any = None, timeout_s: Optional[float] = None) -> RanksResult:
    """Every rank's pair, gathered over ``torch.distributed`` (``all_gather_object`` on
    ``group``, default the world): call it on every rank after :func:`run_pair`. Every rank
    gets the same :class:`RanksResult`; rank 0 usually prints it.

    A rank whose pair failed re-raises its error here, before any collective, so the
    process exits and torchrun stops the other ranks, instead of leaving them waiting
    (they may be blocked in the training step's all-reduce). Every rank must arrive within
    ``timeout_s`` (default 300 s) of the first: a rank that does not (its loop stuck in
    another collective, a crash) is named in a :class:`~loadeval_nb.LoadEvalError` instead
    of a job waiting for ever. Raises :class:`~loadeval_nb.LoadEvalError` when
    ``torch.distributed`` is not initialised.
    """
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "gather_pair needs torch.distributed: call dist.init_process_group() first (torchrun "
            "sets up the environment it reads)."
        )
    if result.error is not None:
        first = str(result.error).splitlines()[0] if str(result.error) else ""
        print(
            f"loadeval_nb: rank {where[0]} stops: its {result.failed} run failed "
            f"({type(result.error).__name__}: {first}); if another rank failed first, its "
            "traceback holds the cause.",
            file=sys.stderr,
        )
        raise result.error
    return gather_runs(result.runs(), group, timeout_s)


def gather_runs(
    runs: Mapping[str, Optional[Run]], group: Any = None, timeout_s: Optional[float] = None
) -> RanksResult:
    """Every rank's runs (``{"real": Run, "ideal": Run}``, and ``"contended"`` where the
    pair had the arm), gathered over ``torch.distributed`` as :func:`gather_pair` gathers
    a pair's (which calls it): every rank calls it, every rank gets the same
    :class:`RanksResult`. Raises :class:`~loadeval_nb.LoadEvalError` when
    ``torch.distributed`` is not initialised or a rank does not arrive in ``timeout_s``."""
    where = dist_rank()
    if where is None:
        raise LoadEvalError(
            "gather_runs needs torch.distributed: call dist.init_process_group() first "
            "(torchrun sets up the environment it reads)."
        )
    import torch.distributed as dist

    mine = RankResult(
        rank=where[0],
        host=socket.gethostname(),
        real=_payload(runs.get("real")),
        ideal=_payload(runs.get("ideal")),
        contended=_payload(runs.get("contended")),
        variant=_payload(runs.get("variant")),
    )
    gathered: list[Any] = (
        [None] * where[1] if group is None else [None] * dist.get_world_size(group)
    )
    # every rank arrives first through the store, with a time limit and a sentence naming
    # the ranks that did not: then the collective below cannot wait for ever
    agree("gathering of the ranks' pairs", where[0], timeout_s)
    dist.all_gather_object(gathered, mine, group=group)
    return ranks_result([g for g in gathered if g is not None])
