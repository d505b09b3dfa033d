"""The private door: what the upper layers (viz, widgets, magic, integrations, the CLI
and the demo) share with core but users should not see (SPDL's ``spdl._internal``).

Nothing here is public API: names may change without notice. The seam rule
(``tests/test_layering.py``) lets the upper layers import ``loadeval_nb.core`` and this
module, never another of core's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._errors import check_sorted

if TYPE_CHECKING:  # the names below, imported on first use (import stays cheap)
    from ._env import interrupts_deferred, is_dataloader, torch_threads
    from ._errors import a_kind, check_choice, check_int, close_match
    from ._facts import Action, Reported, option_name, said
    from ._files import write_text_atomic
    from ._format import fmt_rate, fmt_seconds, fmt_times
    from .explore.ladder import RUNGS
    from .explore.runner import (
        PAIR_NEEDS_TWO_PASSES,
        check_writable_dir,
        evaluator_for,
        log_path,
        refuse_one_shot,
    )
    from .explore.sweep_spec import config_label
    from .measure.interleave import NotInterleavable, plan_blocks
    from .measure.loader import check_workers, loader_knobs, shutdown_persistent_workers
    from .ranks import ranks_result
    from .record.follow import FolderFollower, RunFollower, looks_final, parse_log_name
    from .record.history import HistoryRow, load_history, save_history
    from .verdict.diagnose import as_run

_LAZY_NAMES = {
    "Action": ("._facts", "Action"),
    "FolderFollower": (".record.follow", "FolderFollower"),
    "HistoryRow": (".record.history", "HistoryRow"),
    "NotInterleavable": (".measure.interleave", "NotInterleavable"),
    "PAIR_NEEDS_TWO_PASSES": (".explore.runner", "PAIR_NEEDS_TWO_PASSES"),
    "RUNGS": (".explore.ladder", "RUNGS"),
    "Reported": ("._facts", "Reported"),
    "RunFollower": (".record.follow", "RunFollower"),
    "a_kind": ("._errors", "a_kind"),
    "as_run": (".verdict.diagnose", "as_run"),
    "check_choice": ("._errors", "check_choice"),
    "check_int": ("._errors", "check_int"),
    "check_workers": (".measure.loader", "check_workers"),
    "check_writable_dir": (".explore.runner", "check_writable_dir"),
    "close_match": ("._errors", "close_match"),
    "config_label": (".explore.sweep_spec", "config_label"),
    "evaluator_for": (".explore.runner", "evaluator_for"),
    "fmt_rate": ("._format", "fmt_rate"),
    "fmt_seconds": ("._format", "fmt_seconds"),
    "fmt_times": ("._format", "fmt_times"),
    "interrupts_deferred": ("._env", "interrupts_deferred"),
    "is_dataloader": ("._env", "is_dataloader"),
    "load_history": (".record.history", "load_history"),
    "loader_knobs": (".measure.loader", "loader_knobs"),
    "log_path": (".explore.runner", "log_path"),
    "looks_final": (".record.follow", "looks_final"),
    "option_name": ("._facts", "option_name"),
    "parse_log_name": (".record.follow", "parse_log_name"),
    "plan_blocks": (".measure.interleave", "plan_blocks"),
    "ranks_result": (".ranks", "ranks_result"),
    "refuse_one_shot": (".explore.runner", "refuse_one_shot"),
    "said": ("._facts", "said"),
    "save_history": (".record.history", "save_history"),
    "shutdown_persistent_workers": (".measure.loader", "shutdown_persistent_workers"),
    "torch_threads": ("._env", "torch_threads"),
    "write_text_atomic": ("._files", "write_text_atomic"),
}

__all__ = [
    "Action",
    "FolderFollower",
    "HistoryRow",
    "NotInterleavable",
    "PAIR_NEEDS_TWO_PASSES",
    "RUNGS",
    "Reported",
    "RunFollower",
    "a_kind",
    "as_run",
    "check_choice",
    "check_int",
    "check_sorted",
    "check_workers",
    "check_writable_dir",
    "close_match",
    "config_label",
    "evaluator_for",
    "fmt_rate",
    "fmt_seconds",
    "fmt_times",
    "interrupts_deferred",
    "is_dataloader",
    "load_history",
    "loader_knobs",
    "log_path",
    "looks_final",
    "option_name",
    "parse_log_name",
    "plan_blocks",
    "ranks_result",
    "refuse_one_shot",
    "said",
    "save_history",
    "shutdown_persistent_workers",
    "torch_threads",
    "write_text_atomic",
]


def __getattr__(name: str) -> Any:
    where = _LAZY_NAMES.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0], __package__), where[1])
    globals()[name] = value  # imported on first use, then kept here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
