"""loadeval_nb.integrations: measuring the loops frameworks run (one more layer on core).

* PyTorch Lightning: :func:`fit_pair` (``trainer.fit`` as a real + ideal pair),
  :func:`fit_for_measurement` (one clean, restored ``fit``) and
  :class:`LoadEvalCallback` (one side, as a Lightning callback).

Importing this package imports no framework; each is imported when first used.
"""

from __future__ import annotations

from typing import Any

from ._lightning import (
    bound_method,
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
]

_LAZY = {"LoadEvalCallback": "._lightning_callback"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:  # imports Lightning
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
