"""loadeval_nb.integrations: measuring the loops frameworks run (one more layer on core).

* PyTorch Lightning: :func:`fit_pair` (``trainer.fit`` as a real + ideal pair),
  :func:`fit_for_measurement` (one clean, restored ``fit``) and
  :class:`LoadEvalCallback` (one side, as a Lightning callback).
* Hugging Face ``transformers.Trainer``: :func:`train_pair`, :func:`train_for_measurement`
  and :func:`wrapped_train_dataloader` (the hook that hands the Trainer our wrapper).
  accelerate's prepared loaders are DataLoaders: wrap them like any other.
* Many ranks from a notebook: :func:`launch_ranks` (forked CPU ranks of a gloo process
  group; under torchrun, call ``run_pair`` and ``gather_pair`` directly).

Importing this package imports no framework; each is imported when first used.
"""

from __future__ import annotations

from typing import Any

from ._common import bound_method
from ._huggingface import (
    AUTO_REFUSED as HF_NO_AUTO,
)
from ._huggingface import (
    is_hf_trainer,
    train_for_measurement,
    train_pair,
    trainer_train_loader,
    wrapped_train_dataloader,
)
from ._launch import launch_ranks
from ._lightning import (
    datamodule_train_loader,
    fit_for_measurement,
    fit_pair,
    is_lightning_datamodule,
    is_lightning_trainer,
)

__all__ = [
    "fit_pair",
    "fit_for_measurement",
    "LoadEvalCallback",
    "is_lightning_trainer",
    "is_lightning_datamodule",
    "datamodule_train_loader",
    "bound_method",
    "train_pair",
    "train_for_measurement",
    "wrapped_train_dataloader",
    "trainer_train_loader",
    "is_hf_trainer",
    "launch_ranks",
    "HF_NO_AUTO",
]

_LAZY = {"LoadEvalCallback": "._lightning_callback"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:  # imports Lightning
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
