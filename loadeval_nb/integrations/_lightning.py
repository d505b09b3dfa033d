"""PyTorch Lightning: measure ``Trainer.fit`` as a real + ideal pair, or one side with a callback.

A second ``fit`` on a trainer that already finished returns at once (its progress
says ``max_epochs`` was reached), trains for as long as the user configured, and runs
validation and checkpoints between steps. :func:`fit_for_measurement` makes one
``fit`` a clean measurement instead, and puts everything back afterwards:

* the fit loop's progress counters start from zero and one epoch of the wrapped
  loader (``steps`` batches) is the whole run (``max_epochs=1``, no ``max_steps``,
  ``min_*`` limits or ``limit_train_batches`` in the way);
* no validation (``limit_val_batches=0``, no sanity check) and no checkpoint or
  early-stopping callback, so neither lands between two timed steps;
* the model's weights are restored when the fit ends (also on an exception), and
  the trainer's optimizers, learning-rate schedulers, callbacks, limits and
  progress are restored when the block ends.

Lightning fetches one batch ahead of the step it trains, so a run's first timed
step also holds Lightning's own start-up (hooks, first epoch) and the last batch
is trained after the loader is exhausted: both runs of a pair are measured alike,
and the warm-up steps leave the start-up out of the statistics.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..core._shared import a_kind
from ..core.errors import LoadEvalError


def _lightning(kind: str) -> Any:
    """``lightning.pytorch.<kind>`` if Lightning is imported (never imports it)."""
    mod = sys.modules.get("lightning.pytorch")
    return getattr(mod, kind, None) if mod is not None else None


def is_lightning_trainer(obj: Any) -> bool:
    """A ``lightning.pytorch.Trainer`` (never imports Lightning)."""
    cls = _lightning("Trainer")
    return cls is not None and isinstance(obj, cls)


def is_lightning_datamodule(obj: Any) -> bool:
    """A ``lightning.pytorch.LightningDataModule`` (never imports Lightning)."""
    cls = _lightning("LightningDataModule")
    return cls is not None and isinstance(obj, cls)


def datamodule_train_loader(dm: Any) -> Any:
    """The datamodule's training loader, made as Lightning makes it (``prepare_data``,
    ``setup("fit")``, ``train_dataloader()``); Lightning runs ``setup("fit")`` again
    inside each ``fit``."""
    dm.prepare_data()
    dm.setup("fit")
    return dm.train_dataloader()


def _progress(loop: Any, seen: Optional[set[int]] = None) -> Iterator[tuple[Any, str, Any]]:
    """(owner, attribute, progress) for every progress counter of ``loop`` and its sub-loops."""
    from lightning.pytorch.loops.loop import _Loop
    from lightning.pytorch.loops.progress import _BaseProgress

    seen = set() if seen is None else seen
    seen.add(id(loop))
    for name, value in list(vars(loop).items()):
        if isinstance(value, _BaseProgress):
            yield loop, name, value
        elif isinstance(value, _Loop) and id(value) not in seen:
            yield from _progress(value, seen)


@contextmanager
def fit_for_measurement(trainer: Any) -> Iterator[None]:
    """Within the block, ``trainer.fit(...)`` runs one epoch of its training loader from
    a fresh start, with no validation, checkpoints or early stopping, and leaves the
    model's weights as they were (see the module docstring); everything is restored in
    ``finally``."""
    if not is_lightning_trainer(trainer):
        raise LoadEvalError(
            f"Expected a lightning.pytorch.Trainer, not {a_kind(trainer)}; "
            "loadeval_nb supports the lightning package (pip install lightning)."
        )
    import lightning.pytorch as pl

    from ._lightning_callback import WeightsGuard

    fit_loop = trainer.fit_loop
    epoch_loop = fit_loop.epoch_loop
    saved_progress = [(owner, name, copy.deepcopy(p)) for owner, name, p in _progress(fit_loop)]
    guard = WeightsGuard()
    quiet = (pl.callbacks.Checkpoint, pl.callbacks.EarlyStopping)
    changes: list[tuple[Any, str, Any]] = [
        (fit_loop, "max_epochs", 1),
        (fit_loop, "min_epochs", None),
        (epoch_loop, "max_steps", -1),
        (epoch_loop, "min_steps", None),
        (trainer, "limit_train_batches", 1.0),
        (trainer, "limit_val_batches", 0),
        (trainer, "num_sanity_val_steps", 0),
        (
            trainer,
            "callbacks",
            [c for c in trainer.callbacks if not isinstance(c, quiet)] + [guard],
        ),
    ]
    before = [(obj, name, getattr(obj, name)) for obj, name, _ in changes]
    # what a fit leaves behind: the loader it trained on (our wrapper, with its cache) and
    # the logger's step counter
    loops = [fit_loop, epoch_loop.val_loop]
    loops += [getattr(trainer, n) for n in ("validate_loop", "test_loop", "predict_loop")]
    kept = [
        (obj, name, getattr(obj, name))
        for obj, name in [
            *((loop._data_source, "instance") for loop in loops),
            *((loop, "_combined_loader") for loop in loops),
            (epoch_loop, "_batches_that_stepped"),
            (trainer, "datamodule"),
            (trainer._data_connector, "_datahook_selector"),
        ]
        if hasattr(obj, name)
    ]
    optimizers = (list(trainer.strategy.optimizers), list(trainer.strategy.lr_scheduler_configs))
    try:
        for _, _, p in _progress(fit_loop):
            p.reset()
        for obj, name, value in changes:
            setattr(obj, name, value)
        try:
            yield
        except SystemExit:
            # Lightning turns Ctrl-C into sys.exit(1): say what happened
            if str(getattr(trainer.state, "status", "")).lower().endswith("interrupted"):
                raise KeyboardInterrupt from None
            raise
    finally:
        for obj, name, value in kept:
            setattr(obj, name, value)
        guard.restore()  # if the fit never reached its teardown
        for obj, name, value in before:
            setattr(obj, name, value)
        for owner, name, p in saved_progress:
            setattr(owner, name, p)
        trainer.strategy.optimizers, trainer.strategy.lr_scheduler_configs = optimizers


def lightning_loggers(trainer: Any) -> list[tuple[str, str, Any]]:
    """``trainer``'s loggers as ``(name, kind, handle)``, for ``log_to="trainer"``:
    ``summary_writer`` (a TensorBoardLogger's SummaryWriter), ``mlflow`` (an MLFlowLogger's
    client and run id), ``wandb`` (a WandbLogger's run), or ``logger`` (any other logger,
    written through ``log_metrics`` / ``log_hyperparams``). Imports no tracker."""
    out: list[tuple[str, str, Any]] = []
    for logger in trainer.loggers:
        kind = type(logger).__name__
        name = f"the Trainer's {kind}"
        if kind == "TensorBoardLogger":
            out.append((name, "summary_writer", logger.experiment))
        elif kind == "MLFlowLogger":
            out.append((name, "mlflow", (logger.experiment, logger.run_id)))
        elif kind == "WandbLogger":
            out.append((name, "wandb", logger.experiment))
        else:
            out.append((name, "logger", logger))
    return out
