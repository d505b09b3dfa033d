"""``--prove-straggler``: the pair, then the straggler proof, in one pass of the script's
own loop (each rank runs the script once, so the proof cannot be a run of its own).

The wrapper the child puts around the training loader serves the interleaved pair's
blocks, and once they are done (the pair's logs complete), gathers every rank's pair
over the script's own process group (the ranks' report, whose suspect is the straggler
the skew names, else the rank that waits most), agrees on rank 0's suspect and control
through the group's store, and serves the proof's blocks (``real``, ``free``,
``control``: :class:`~loadeval_nb.ranks.ProvingPass`). Both plans are made before the
pass's first step, from the pair's agreed plan and epoch, so every rank's script is
handed the same number of batches (DDP's all-reduce meets every step) and no more than
one epoch of its loader; the script is stopped after the last one as after a pair
(``Measured``), and exits as it would. Rank 0 writes the proof beside the run logs
(``...-proof.json``, before the pair's logs are sealed, so that a watcher that sees the
logs whole finds it too), where ``gather_logs`` reads it.

The proof's real blocks start the loader again: the script's loop sees the epoch's first
batches a second time (the pass still hands out no more than ``len(loader)``).
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator
from typing import Any, Optional

from ....core.errors import LoadEvalError
from ....core.explore import RunSettings
from ....core.ranks import (
    ProvingPass,
    StragglerProof,
    gather_runs,
    plan_proof_after,
    proof_path,
)

NO_GROUP = (
    "--prove-straggler needs the script's process group, and there was none when its "
    "training loop began: the script must call torch.distributed.init_process_group() "
    "before it (a DDP script does), or leave out --prove-straggler."
)
"""The sentence for a script that trains without a process group."""


def in_process_group() -> bool:
    """The script has made its process group (``init_process_group``)."""
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def proof_misfit(planned: Any, settings: RunSettings) -> Optional[str]:
    """Why the straggler proof's blocks do not fit after the pair's in the loader's epoch
    (the pass's plan ``planned``), in the words of a pass too short; None where they do."""
    try:
        plan_proof_after(planned.blocks, planned.loader_len, settings)
    except LoadEvalError:
        return (
            f"an epoch of the loader has {planned.loader_len} batches: the pair's "
            f"{planned.blocks.total_steps} steps and the straggler proof's blocks after them "
            "do not fit in it"
        )
    return None


class ProvedPair:
    """The training loader's wrapper for the pair and the proof after it (see the
    module's notes): ``len()`` is both passes' steps; :meth:`close` seals the pair's run
    logs, after the proof is written."""

    mode = "pair"

    def __init__(self, pair: Any, settings: RunSettings, real_log: str) -> None:
        """``pair``: the pair's wrapper (``LoaderEvaluator(loader, mode="pair", ...)``)."""
        self.pair = pair
        self.dataloader = pair.dataloader
        self.settings = settings
        # (the child's plan checked that the proof fits: proof_misfit)
        self.plan = plan_proof_after(pair.plan, pair.loader_len, settings)
        self.path = proof_path(real_log)
        self.proof: Optional[StragglerProof] = None
        self._proving: Optional[ProvingPass] = None
        self._judged = False
        self._open: Optional[Generator[Any, None, None]] = None

    def __len__(self) -> int:
        return len(self.pair) + self.plan.total_steps

    @property
    def block_now(self) -> Optional[tuple[str, int]]:
        """Where the pass is (for a failure's sentence): the pair's side and block, or the
        proof's block."""
        if self._proving is None:
            return self.pair.block_now
        return ("straggler proof", self._proving.blocks_done + 1)

    def __iter__(self) -> Iterator[Any]:
        gen = self._pass()
        self._open = gen
        return gen

    def _pass(self) -> Generator[Any, None, None]:
        yield from self.pair
        # every rank is here at the same step: the pair's last step is done and its loop
        # asks for the next batch
        ranks = gather_runs(self.pair.to_runs())
        proving = self._proving = ProvingPass(self.dataloader, self.plan, ranks, self.settings)
        try:
            yield from proving
        except GeneratorExit:  # stopped after its last batch (the runner's stop): judged
            if proving.complete:
                self._judge()
            raise
        self._judge()

    def _judge(self) -> None:
        """Every rank's blocks gathered and judged; rank 0 writes the proof. A proof that
        cannot be made is a line on stderr: the pair stands."""
        proving = self._proving
        if self._judged or proving is None:
            return
        self._judged = True
        import torch.distributed as dist

        try:
            self.proof = proving.judge()
        except LoadEvalError as e:
            print(f"loadeval_nb: rank {dist.get_rank()}: no straggler proof: {e}", file=sys.stderr)
            return
        if self.proof is not None and dist.get_rank() == 0:
            self.proof.save(self.path)

    def close(self) -> None:
        """End the pass (the proof judged if its blocks are whole), then seal the pair's
        logs and let go of the proof's cache."""
        try:
            if self._open is not None:
                self._open.close()
        finally:
            self._open = None
            try:
                self.pair.close()
            finally:
                if self._proving is not None:
                    self._proving.release()

    def release(self) -> None:
        self.close()
        self.pair.release()
