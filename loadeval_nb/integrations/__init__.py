"""loadeval_nb.integrations: measuring the loops frameworks run (one more layer on core).

* PyTorch Lightning: :func:`fit_pair` (``trainer.fit`` as a real + ideal pair),
  :func:`fit_for_measurement` (one clean, restored ``fit``) and
  :class:`LoadEvalCallback` (one side, as a Lightning callback).
* Hugging Face ``transformers.Trainer``: :func:`train_pair`, :func:`train_for_measurement`
  and :func:`wrapped_train_dataloader` (the hook that hands the Trainer our wrapper).
  accelerate's prepared loaders are DataLoaders: wrap them like any other.
* Many ranks from a notebook: :func:`launch_ranks` (forked CPU ranks of a gloo process
  group; under torchrun, call ``run_pair`` and ``gather_pair`` directly).
* Scripts with no code change: :func:`run_script` (``python -m loadeval_nb run``): the
  script, unmodified, in a fresh child process per side, its training loader measured;
  on torchrun's ranks with :class:`Torchrun`. It returns a :class:`ScriptResult`.

Importing this package imports no framework; each is imported when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..core._shared import check_sorted

if TYPE_CHECKING:  # imported on first use (a script's child needs none of them)
    from ._huggingface import train_for_measurement, wrapped_train_dataloader
    from ._launch import launch_ranks
    from ._lightning import fit_for_measurement
    from ._script.parent.launch import Torchrun
    from ._script.parent.run import ScriptHooks, ScriptResult, run_script
    from ._target import fit_pair, train_pair

__all__ = [
    "LoadEvalCallback",
    "ScriptHooks",
    "ScriptResult",
    "Torchrun",
    "fit_for_measurement",
    "fit_pair",
    "launch_ranks",
    "run_script",
    "train_for_measurement",
    "train_pair",
    "wrapped_train_dataloader",
]
check_sorted(__name__, __all__)

_LAZY = {
    "LoadEvalCallback": "._lightning_callback",  # imports Lightning
    "train_for_measurement": "._huggingface",
    "wrapped_train_dataloader": "._huggingface",
    "launch_ranks": "._launch",
    "fit_for_measurement": "._lightning",
    "Torchrun": "._script.parent.launch",
    "ScriptHooks": "._script.parent.run",
    "ScriptResult": "._script.parent.run",
    "run_script": "._script.parent.run",
    "fit_pair": "._target",
    "train_pair": "._target",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # kept: the next use is a plain lookup
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
