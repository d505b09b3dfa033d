"""Many ranks (torchrun, DDP): every rank measures its own pair; the ranks' results meet
through the user's process group (``torch.distributed.all_gather_object``), never a
transport of ours, and nothing here assumes the ranks share a host.

In data-parallel training every step ends at the gradient all-reduce, so every rank's
step lasts as long as the slowest rank's: a rank whose loader is slow holds the others
waiting inside their step, not in ``next()``. A straggler therefore shows as one rank
waiting for data much longer than the others, while step times match.

The test: take the rank that waits most and the runner-up (the rank that waits most
of the rest), pair their steps by index (DDP keeps the ranks in step), and take the
block-bootstrap interval of the mean per-step difference. The top rank is a straggler
when that interval lies above zero and the difference is at least 5 % of its mean step.
Comparing with the runner-up, not with the others pooled, is what keeps equal ranks
from producing a "straggler" just because one of them had to come out on top: the
more ranks, the larger the top one's lead over the pooled mean by chance alone.

Wait skew alone does not tell a slow loader from a late phase: under DDP, with workers,
the rank whose batch happens to arrive later waits in ``next()`` while the other waits
in the all-reduce, and that phase can hold for a whole run. So where both ranks' workers
were timed, the top rank is named only when its loader also delivers batches more slowly
(its median batch time inside the workers over its worker count) than the runner-up's,
by at least the same 5 %.

Skew is still only a sign. :func:`prove_straggler` puts the suspect (rank 0's straggler,
else the rank that waits most) to a counterfactual: one more pass of the loop, on every
rank the same plan of blocks, in which the suspect alone serves its cached batches in
some blocks (its loader taken out of the job), the runner-up alone in others (the
control), while every other rank keeps its real loader. If the whole job's step falls
with the suspect's loader free, and further than with the runner-up's (block-paired
t-intervals above zero, each gain at least 5 % of the step), the suspect is proven the
straggler and the gain is what freeing its loader buys every rank; if not, it is not
one, whatever the skew says.

By job: :mod:`.skew` (the wait-skew test and the ranks' result), :mod:`.gather` (over the
process group), :mod:`.logs` (from the run logs the ranks wrote), :mod:`.proof` (the
straggler proof as a record, and its test) and :mod:`.prove` (running it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .gather import gather_pair, gather_runs
    from .logs import gather_logs
    from .proof import StragglerProof, load_proof, proof_path
    from .prove import ProvingPass, plan_proof_after, prove_straggler
    from .skew import RankResult, RanksResult

__all__ = [
    "ProvingPass",
    "RankResult",
    "RanksResult",
    "StragglerProof",
    "gather_logs",
    "gather_pair",
    "gather_runs",
    "load_proof",
    "plan_proof_after",
    "proof_path",
    "prove_straggler",
]
__getattr__, __dir__ = lazy_face(__name__)
