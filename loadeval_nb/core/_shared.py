"""The private door: what the upper layers (viz, widgets, magic, integrations, the CLI
and the demo) share with core but users should not see (SPDL's ``spdl._internal``).

Nothing here is public API: names may change without notice. The seam rule
(``tests/test_layering.py``) lets the upper layers import ``loadeval_nb.core`` and this
module, never another of core's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import check_sorted
from ._face import deprecated, lazy_face

if TYPE_CHECKING:  # the names below, imported on first use (import stays cheap)
    from ._env import env_rank, interrupts_deferred, is_dataloader, torch_threads
    from ._errors import a_kind, check_choice, check_int, close_match
    from ._facts import Action, Reported, said
    from ._files import write_text_atomic
    from ._format import fmt_rate, fmt_seconds, fmt_times
    from .explore.ladder import RUNGS
    from .explore.pair import (
        PairPlan,
        epoch_pair,
        nothing_advised,
        pair_keywords,
        pass_plan,
        plan_pair,
    )
    from .explore.runner import (
        check_writable_dir,
        evaluator_for,
        log_path,
    )
    from .explore.sweep_spec import config_label
    from .measure.epochs import MIN_EPOCHS, EpochPair
    from .measure.live import LiveRun
    from .measure.loader import (
        TUNABLE,
        check_workers,
        loader_knobs,
        opened_by,
        shutdown_persistent_workers,
    )
    from .measure.readers import NVML_SAID_ENV
    from .record.follow import FolderFollower, RunFollower
    from .record.history import HistoryRow, load_history, save_history
    from .record.journal import drop_locks, sweep_locks
    from .record.lognames import ARMS
    from .record.run import SIDES
    from .verdict.diagnose import as_run

__all__ = [
    "ARMS",
    "Action",
    "EpochPair",
    "FolderFollower",
    "HistoryRow",
    "LiveRun",
    "MIN_EPOCHS",
    "NVML_SAID_ENV",
    "PairPlan",
    "RUNGS",
    "Reported",
    "RunFollower",
    "SIDES",
    "TUNABLE",
    "a_kind",
    "as_run",
    "check_choice",
    "check_int",
    "check_sorted",
    "check_workers",
    "check_writable_dir",
    "close_match",
    "config_label",
    "deprecated",
    "drop_locks",
    "env_rank",
    "epoch_pair",
    "evaluator_for",
    "fmt_rate",
    "fmt_seconds",
    "fmt_times",
    "interrupts_deferred",
    "is_dataloader",
    "lazy_face",
    "load_history",
    "loader_knobs",
    "log_path",
    "nothing_advised",
    "opened_by",
    "pair_keywords",
    "pass_plan",
    "plan_pair",
    "said",
    "save_history",
    "shutdown_persistent_workers",
    "sweep_locks",
    "torch_threads",
    "write_text_atomic",
]


__getattr__, __dir__ = lazy_face(__name__)
