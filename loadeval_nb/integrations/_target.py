"""What a measurement runs over, however the loop is written: the one way to target a
framework's loop, used by the magic and by :func:`fit_pair` / :func:`train_pair` alike."""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..core._shared import a_kind, said
from ..core.errors import LoadEvalError
from ..core.explore import PairResult, RunHooks, RunSettings, run_pair
from ..core.measure import LoaderEvaluator
from ._common import bound_method
from ._huggingface import (
    AUTO_REFUSED,
    is_hf_trainer,
    train_for_measurement,
    trainer_train_loader,
    wrapped_train_dataloader,
)
from ._lightning import (
    datamodule_train_loader,
    fit_for_measurement,
    is_lightning_datamodule,
    is_lightning_trainer,
)
from .trackers import check_log_to, log_result

Context = Callable[[Any], AbstractContextManager[Any]]


@dataclass(frozen=True)
class Target:
    """What a pair measures: ``loader`` (named ``name`` in messages), ``bind(ev)`` (a
    context in which the loop finds the wrapper ``ev`` where it looks for its loader) and
    ``around(ev)`` (a context each run needs: a framework's clean, restored run)."""

    name: str
    loader: Any
    bind: Context
    around: Context
    no_auto: Optional[tuple[Any, ...]] = None
    """Why ``steps='auto'`` cannot drive this loop, in pieces each front end spells its
    way (``said(no_auto, spelling)``); None: it can."""
    rebuildable: bool = True
    """Whether reruns and sweeps may rebuild the loader with other settings (an
    accelerate-prepared loader may not: a plain rebuild would lose what it added)."""
    fixed_note: str = (
        "This loader cannot be rebuilt with other settings: only the cache size can change."
    )
    """What the rerun panel says when it cannot rebuild the loader."""
    trainer: Any = None
    """The Lightning or Hugging Face Trainer whose loop runs (``log_to="trainer"`` writes to
    its loggers); None: no trainer."""

    def run_once(self, body: Callable[[LoaderEvaluator], Any]) -> Callable[[LoaderEvaluator], None]:
        """The ``run_once`` of :func:`run_pair`: ``body(ev)`` with the wrapper in place."""

        def run(ev: LoaderEvaluator) -> None:
            with self.around(ev), self.bind(ev):
                body(ev)

        return run


def _nothing(ev: Any) -> AbstractContextManager[Any]:
    return nullcontext()


def target_for(obj: Any, name: str, *, fit: Any = None, bind: Optional[Context] = None) -> Target:
    """The target for ``obj``: a Hugging Face Trainer (its training loader, handed out by
    the Trainer), a LightningDataModule (its ``train_dataloader()``), or a loader itself
    (``bind`` says how the loop finds the wrapper). ``fit`` is the Lightning Trainer whose
    ``fit`` runs the loop, restored after each run."""
    if is_hf_trainer(obj):
        return Target(
            name,
            trainer_train_loader(obj),
            lambda ev: wrapped_train_dataloader(obj, ev),
            # an interleaved pair is one train() of both sides' steps: its len()
            lambda ev: train_for_measurement(obj, len(ev) if ev.mode == "pair" else ev.steps),
            no_auto=AUTO_REFUSED,
            rebuildable=False,
            fixed_note=(
                "The Trainer prepares its own DataLoader (accelerate), and a rebuild would undo "
                "that: only the cache size can change here; set dataloader_num_workers and "
                "dataloader_pin_memory in its TrainingArguments to try others."
            ),
            trainer=obj,
        )
    around: Context = (lambda ev: fit_for_measurement(fit)) if fit is not None else _nothing
    if is_lightning_datamodule(obj):
        return Target(
            name,
            datamodule_train_loader(obj),
            lambda ev: bound_method(obj, "train_dataloader", ev),
            around,
            trainer=fit,
        )
    return Target(name, obj, bind or _nothing, around, trainer=fit)


def fit_pair(
    trainer: Any,
    model: Any,
    train_dataloaders: Any = None,
    *,
    datamodule: Any = None,
    settings: Optional[RunSettings] = None,
    hooks: Optional[RunHooks] = None,
    label: str = "",
) -> PairResult:
    """``trainer.fit(model, ...)`` measured as a real + ideal pair of ``settings.steps``
    steps each (:func:`loadeval_nb.run_pair` on Lightning's loop): the same trainer, with
    its progress, limits, callbacks, optimizers and the model's weights restored after
    each side (see :func:`fit_for_measurement`). Pass the training loader or a
    datamodule, as to ``fit``."""
    if not is_lightning_trainer(trainer):
        raise LoadEvalError(
            f"Expected a lightning.pytorch.Trainer, not {a_kind(trainer)}; loadeval_nb supports "
            "the lightning package (pip install lightning)."
        )
    if (train_dataloaders is None) == (datamodule is None):
        raise LoadEvalError("Pass the training loader or a datamodule to fit_pair, as to fit.")
    if datamodule is not None:
        target = target_for(datamodule, "the datamodule", fit=trainer)
        body = lambda ev: trainer.fit(model, datamodule=datamodule)  # noqa: E731
    else:
        target = target_for(train_dataloaders, "the loader", fit=trainer)
        body = lambda ev: trainer.fit(model, train_dataloaders=ev)  # noqa: E731
    check_log_to(settings.log_to if settings else None, trainer=trainer)
    result = run_pair(
        target.loader, target.run_once(body), settings, hooks=hooks, label=label,
        loader_name=target.name,
    )  # fmt: skip
    _warn(log_result(result, trainer=trainer))
    return result


def train_pair(
    trainer: Any,
    *,
    settings: Optional[RunSettings] = None,
    hooks: Optional[RunHooks] = None,
    label: str = "",
    **train_kw: Any,
) -> PairResult:
    """``trainer.train(**train_kw)`` measured as a real + ideal pair of ``settings.steps``
    batches each (:func:`loadeval_nb.run_pair` on the Trainer's loop); the trainer and the
    model are restored after each side (see :func:`train_for_measurement`)."""
    if not is_hf_trainer(trainer):
        raise LoadEvalError(f"Expected a transformers.Trainer, not {a_kind(trainer)}.")
    target = target_for(trainer, "the loader")
    if settings is not None and settings.auto and target.no_auto:
        raise LoadEvalError(said(target.no_auto))
    body = lambda ev: trainer.train(**train_kw)  # noqa: E731
    check_log_to(settings.log_to if settings else None, trainer=trainer)
    result = run_pair(
        target.loader, target.run_once(body), settings, hooks=hooks, label=label,
        loader_name=target.name,
    )  # fmt: skip
    _warn(log_result(result, trainer=trainer))
    return result


def _warn(failed: list[str]) -> None:
    """A tracker that failed, said as a warning: the measured pair stands."""
    for sentence in failed:
        warnings.warn(sentence, stacklevel=3)
