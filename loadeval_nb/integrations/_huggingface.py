"""Hugging Face ``transformers.Trainer`` (and accelerate's prepared loaders).

The Trainer builds its training loader itself (``get_train_dataloader()``, a
DataLoader prepared by accelerate), so a measured ``train()`` gets our wrapper from
that method instead, for the duration of the run (:func:`wrapped_train_dataloader`).
A ``TrainerCallback`` cannot swap the loader (callbacks see it, they do not hand it
out); this is the hook that can.

:func:`train_for_measurement` makes one ``train()`` a clean measurement of ``steps``
batches and puts everything back afterwards:

* ``max_steps`` is the run's optimizer steps (``steps`` over the gradient accumulation),
  so one pass over the wrapped loader is the whole run, also on a trainer that trained
  before;
* no evaluation, checkpoint or best-model reload between steps (``eval_strategy``,
  ``save_strategy`` "no", ``load_best_model_at_end`` off);
* each run starts with the optimizer and scheduler the trainer had before (usually
  none: a fresh one is made, as in a first ``train()``) and from the same weights;
  the weights, optimizer, scheduler, state and arguments are restored afterwards.

An ``accelerator.prepare(loader)`` is a DataLoader (accelerate's ``DataLoaderShard``):
wrap it like any loader; the batches come out on the accelerator's device as before.
"""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from ..core._shared import Action, a_kind
from ..core.errors import LoadEvalError
from ..core.measure import LoaderEvaluator
from ._common import bound_method, cpu_snapshot

AUTO_REFUSED = (
    Action("steps", "auto"),
    " cannot drive a Hugging Face Trainer (it plans its epochs from max_steps before the "
    "first step); pass a number of steps.",
)
"""Why an adaptive stop cannot drive a Trainer, each front end spelling the setting its way."""


def is_hf_trainer(obj: Any) -> bool:
    """A ``transformers.Trainer`` (never imports transformers: ``transformers.Trainer`` is
    a lazy attribute that would import the whole trainer module, seconds, for any cell)."""
    mod = sys.modules.get("transformers.trainer")
    cls = getattr(mod, "Trainer", None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def _check(trainer: Any) -> None:
    if not is_hf_trainer(trainer):
        raise LoadEvalError(f"Expected a transformers.Trainer, not {a_kind(trainer)}.")


@contextmanager
def train_for_measurement(trainer: Any, steps: Optional[int]) -> Iterator[None]:
    """Within the block, ``trainer.train()`` trains ``steps`` batches from a fresh start
    with no evaluation or checkpoint between steps (see the module docstring); the
    trainer and the model's weights are restored in ``finally``. ``steps=None`` keeps
    the trainer's own length."""
    _check(trainer)
    args = trainer.args
    changes: list[tuple[str, Any]] = [
        ("eval_strategy", "no"),
        ("save_strategy", "no"),
        ("load_best_model_at_end", False),
    ]
    if steps is not None:
        changes.append(("max_steps", math.ceil(steps / max(1, args.gradient_accumulation_steps))))
    before_args = [(name, getattr(args, name)) for name, _ in changes if hasattr(args, name)]
    model = trainer.model
    weights = cpu_snapshot(model)
    kept = {
        n: getattr(trainer, n, None)
        for n in ("optimizer", "lr_scheduler", "state", "control", "model", "model_wrapped")
    }
    # an optimizer the trainer already has is stepped by each side: start both from its state
    states = {
        n: copy.deepcopy(obj.state_dict())
        for n in ("optimizer", "lr_scheduler")
        if (obj := kept[n]) is not None and hasattr(obj, "state_dict")
    }
    try:
        for name, value in changes:
            if hasattr(args, name):
                setattr(args, name, _like(getattr(args, name), value))
        for name, state in states.items():
            kept[name].load_state_dict(
                copy.deepcopy(state)
            )  # loading keeps the tensors  # each side starts from the same state
        yield
    finally:
        for name, value in before_args:
            setattr(args, name, value)
        model.load_state_dict(weights)
        for name, value in kept.items():
            setattr(trainer, name, value)
        for name, state in states.items():
            kept[name].load_state_dict(copy.deepcopy(state))  # loading keeps the tensors


def _like(current: Any, value: Any) -> Any:
    """``value`` as the type ``current`` has (the arguments hold enums after their checks)."""
    if isinstance(value, str) and type(current) is not str and current is not None:
        try:
            return type(current)(value)
        except (TypeError, ValueError):
            return value
    return value


@contextmanager
def wrapped_train_dataloader(trainer: Any, ev: LoaderEvaluator) -> Iterator[None]:
    """Within the block, ``trainer.get_train_dataloader()`` hands out ``ev``; the trainer
    is left as it was."""
    _check(trainer)
    with bound_method(trainer, "get_train_dataloader", ev):
        yield


def trainer_train_loader(trainer: Any) -> Any:
    """The loader ``trainer.train()`` would iterate (made as the Trainer makes it)."""
    _check(trainer)
    try:
        return trainer.get_train_dataloader()
    except Exception as e:
        raise LoadEvalError(
            f"trainer.get_train_dataloader() failed ({type(e).__name__}: {e}); give the "
            "Trainer a train_dataset first."
        ) from None


def report_to(trainer: Any) -> list[tuple[str, str, Optional[str]]]:
    """``trainer.args.report_to`` as ``(name, tracker, where)``, for ``log_to="trainer"``:
    ``tensorboard`` in the folder its TensorBoardCallback wrote to, ``mlflow`` and
    ``wandb`` where their callbacks log (the active run, or the same defaults); any other
    by its own name (loadeval_nb does not write it). Imports no tracker."""
    _check(trainer)
    args = trainer.args
    names = args.report_to or []
    names = [names] if isinstance(names, str) else list(names)
    out: list[tuple[str, str, Optional[str]]] = []
    for n in names:
        if n in ("none", "all"):  # the Trainer's arguments resolve both when made
            continue
        name = f"the Trainer's report_to {n}"
        if n == "tensorboard":
            out.append((name, "tensorboard", _tensorboard_dir(trainer)))
        else:
            out.append((name, n, None))
    return out


def _tensorboard_dir(trainer: Any) -> str:
    """Where the Trainer's TensorBoardCallback writes (set when it trained), else where it
    would write."""
    import os

    for cb in trainer.callback_handler.callbacks:
        if type(cb).__name__ == "TensorBoardCallback" and getattr(cb, "logging_dir", None):
            return str(cb.logging_dir)
    env = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if env:
        return os.path.expanduser(env)
    return os.path.join(trainer.args.output_dir, "runs")
