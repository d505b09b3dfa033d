"""The integrations' private door: what the magic needs to find a framework's loop in a
cell, and what the script runner's two front ends (``python -m loadeval_nb run`` and
``%loadeval_run``) share: its options, their sentences, the sides' words; which users do
not (see :mod:`loadeval_nb.core._shared` for the same idea in core)."""

from __future__ import annotations

from ._huggingface import is_hf_trainer
from ._lightning import is_lightning_datamodule, is_lightning_trainer
from ._options import CELL, arguments, flags, settings_from
from ._script.loaders import KNOWN as KNOWN_LOADERS
from ._script.parent.command import CLI, run_command, save_script_report
from ._script.parent.options import (
    RUN_USAGE,
    RUN_VALUED,
    add_run_parser,
    description,
    option_sentence,
    run_parser,
    script_settings,
    split_run,
)
from ._script.parent.run import TUNABLE, check_target, label_of
from ._script.spec import MEASURES
from ._script.words import describe_target
from ._target import Target, target_for
from .trackers import check_log_to, log_result

__all__ = [
    "CELL",
    "CLI",
    "KNOWN_LOADERS",
    "MEASURES",
    "RUN_USAGE",
    "RUN_VALUED",
    "TUNABLE",
    "Target",
    "add_run_parser",
    "arguments",
    "check_log_to",
    "check_target",
    "describe_target",
    "description",
    "flags",
    "is_hf_trainer",
    "is_lightning_datamodule",
    "is_lightning_trainer",
    "label_of",
    "log_result",
    "option_sentence",
    "run_command",
    "run_parser",
    "save_script_report",
    "script_settings",
    "settings_from",
    "split_run",
    "target_for",
]
