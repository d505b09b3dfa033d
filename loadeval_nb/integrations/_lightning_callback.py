"""The Lightning callbacks (this module imports Lightning; the rest of the package does not)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import lightning.pytorch as pl

from ..core._shared import check_choice, check_int
from ..core.errors import LoadEvalError
from ..core.measure import LoaderEvaluator
from ._common import cpu_snapshot


class WeightsGuard(pl.Callback):
    """Snapshot the module's weights when a fit starts; put them back when it ends (also
    when it fails), so a measured fit leaves the model as it found it."""

    def __init__(self) -> None:
        self.module: Any = None
        self.state: Optional[dict[str, Any]] = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self.module = pl_module
        self.state = cpu_snapshot(pl_module)

    def restore(self) -> None:
        if self.module is not None and self.state is not None:
            self.module.load_state_dict(self.state)
            self.state = None

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.restore()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.restore()


class _WrappedSource:
    """Lightning's source of the training loader, handing out our wrapper of it."""

    def __init__(self, source: Any, wrap: Callable[[Any], Any]) -> None:
        self._source, self._wrap = source, wrap

    def dataloader(self) -> Any:
        return self._wrap(self._source.dataloader())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


class LoadEvalCallback(pl.Callback):
    """Measure one ``fit``'s training loader: the natural Lightning interface.

    ``LoadEvalCallback(mode="log", steps=200, warmup=10)`` wraps whatever loader the fit
    trains on (a DataLoader passed to ``fit``, a datamodule's or the module's
    ``train_dataloader()``) in a :class:`~loadeval_nb.LoaderEvaluator`; after the fit it
    is in ``callback.evaluator`` (``.to_run()``, ``.print_summary()``, ``.save_metrics()``).
    ``steps`` ends the epoch after that many batches, ``warmup`` leaves the first ones out
    of the statistics; other keywords go to the evaluator (``num_cached_batches``,
    ``metrics_file``, ...). One callback measures one fit;
    :func:`~loadeval_nb.integrations.fit_pair` runs both sides for you.

    Raises :class:`~loadeval_nb.LoadEvalError` (a ``ValueError``) for a bad argument, at
    once, before any fit.
    """

    def __init__(
        self,
        mode: str = "log",
        *,
        steps: Optional[int] = None,
        warmup: int = 0,
        **evaluator_kw: Any,
    ) -> None:
        check_choice("mode", mode, ("log", "replay"))
        self.mode = mode
        self.evaluator_kw = {"steps": steps, "warmup": warmup, **evaluator_kw}
        # checked now, on a stand-in loader, so a bad argument fails before the fit (the
        # cache's own arguments are checked here, the stand-in only logs)
        check_int("num_cached_batches", self.evaluator_kw.get("num_cached_batches", 20), 1)
        probe = {
            k: v
            for k, v in self.evaluator_kw.items()
            if k not in ("num_cached_batches", "cache_on", "device", "cache_budget_bytes")
        }
        LoaderEvaluator([0], mode="log", **probe).close()
        self.evaluator: Optional[LoaderEvaluator] = None
        self._source: Any = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        source = getattr(trainer.fit_loop, "_data_source", None)
        if source is None or not callable(getattr(source, "dataloader", None)):
            raise LoadEvalError(
                "This Lightning version hands out training loaders in a way loadeval_nb does "
                "not know; wrap the loader yourself: trainer.fit(model, LoaderEvaluator(loader))."
            )
        self._source = source
        trainer.fit_loop._data_source = _WrappedSource(source, self._wrap)

    def _wrap(self, loader: Any) -> LoaderEvaluator:
        if self.evaluator is None or self.evaluator.dataloader is not loader:
            self.evaluator = LoaderEvaluator(loader, mode=self.mode, **self.evaluator_kw)
        return self.evaluator

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self._source is not None:
            trainer.fit_loop._data_source = self._source
            self._source = None
        if self.evaluator is not None:
            self.evaluator.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        # Lightning skips callbacks' teardown after a failure
        self.teardown(trainer, pl_module, "fit")
