"""The integrations' private door: what the magic needs to find a framework's loop in a
cell, which users do not (see :mod:`loadeval_nb.core._shared` for the same idea in core)."""

from __future__ import annotations

from ._common import bound_method
from ._huggingface import AUTO_REFUSED as HF_NO_AUTO
from ._huggingface import is_hf_trainer, trainer_train_loader
from ._lightning import datamodule_train_loader, is_lightning_datamodule, is_lightning_trainer
from ._script.launch import Signalled, StopRequest, stop_on_signals
from ._script.run import check_target, describe_target, label_of
from ._target import Target, target_for

__all__ = [
    "HF_NO_AUTO",
    "Signalled",
    "StopRequest",
    "Target",
    "bound_method",
    "check_target",
    "datamodule_train_loader",
    "describe_target",
    "is_hf_trainer",
    "is_lightning_datamodule",
    "is_lightning_trainer",
    "label_of",
    "stop_on_signals",
    "target_for",
    "trainer_train_loader",
]
