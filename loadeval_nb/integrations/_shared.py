"""The integrations' private door: what the magic needs to find a framework's loop in a
cell, and what the script runner's two front ends (``python -m loadeval_nb run`` and
``%loadeval_run``) share: its options, their sentences, the sides' words; which users do
not (see :mod:`loadeval_nb.core._shared` for the same idea in core)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._shared import lazy_face
from ._common import bound_method
from ._huggingface import AUTO_REFUSED as HF_NO_AUTO
from ._huggingface import is_hf_trainer, trainer_train_loader
from ._lightning import datamodule_train_loader, is_lightning_datamodule, is_lightning_trainer
from ._script.loaders import KNOWN as KNOWN_LOADERS
from ._script.parent.command import CLI, run_command, save_script_report
from ._script.parent.launch import (
    CHILD_MODULE,
    Ended,
    RankExits,
    Signalled,
    StopRequest,
    command,
    job_id,
    launcher_rank,
    run_side,
    stop_on_signals,
)
from ._script.parent.options import (
    PAIR_OPTIONS,
    RUN_USAGE,
    RUN_VALUED,
    add_run_parser,
    description,
    option_sentence,
    run_parser,
    script_settings,
    split_run,
)
from ._script.parent.run import (
    TUNABLE,
    check_target,
    label_of,
    rank_exit_code,
    side_sentence,
)
from ._script.spec import ENV, MEASURES, ChildSpec, ChildStatus, settings_to_dict
from ._script.words import describe_target
from ._target import Target, target_for
from .trackers import check_log_to, log_result

if TYPE_CHECKING:  # the script child's side (it imports torch's loader): on first use
    from ._script.child.pick import Measured, Picker, Refused, Side, patched_dataloader
    from ._script.child.sides import side_for

__all__ = [
    "CHILD_MODULE",
    "CLI",
    "ChildSpec",
    "ChildStatus",
    "ENV",
    "Ended",
    "HF_NO_AUTO",
    "KNOWN_LOADERS",
    "MEASURES",
    "Measured",
    "PAIR_OPTIONS",
    "Picker",
    "RUN_USAGE",
    "RUN_VALUED",
    "RankExits",
    "Refused",
    "Side",
    "Signalled",
    "StopRequest",
    "TUNABLE",
    "Target",
    "add_run_parser",
    "bound_method",
    "check_log_to",
    "check_target",
    "command",
    "datamodule_train_loader",
    "describe_target",
    "description",
    "is_hf_trainer",
    "is_lightning_datamodule",
    "is_lightning_trainer",
    "job_id",
    "label_of",
    "launcher_rank",
    "log_result",
    "option_sentence",
    "patched_dataloader",
    "rank_exit_code",
    "run_command",
    "run_parser",
    "run_side",
    "save_script_report",
    "script_settings",
    "settings_to_dict",
    "side_for",
    "side_sentence",
    "split_run",
    "stop_on_signals",
    "target_for",
    "trainer_train_loader",
]
__getattr__, __dir__ = lazy_face(__name__)
