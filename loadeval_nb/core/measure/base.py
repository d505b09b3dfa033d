"""What every evaluator shares: :class:`Evaluator`, the base of :class:`LoaderEvaluator`
(one side: ``mode="log"`` or ``"replay"``) and of the interleaved pair
(:mod:`.interleave`, ``mode="pair"``): the argument checks, the DataLoader look-alike, the
utilisation sampler (its "workers" the wrapper's own), the Ctrl-C stamp, the clock's
origin, one call to ``build_run``, and the live reading a dashboard does, for every side
the wrapper measures (``sides``, ``steps_since(side, cursor)``, ``side_at``,
``to_run(side)``, ``to_runs()``: the :class:`~.live.LiveRun` protocol). As torch's
``_BaseDataLoaderIter`` is to its one iterator class per mode.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Optional

from .._env import SigintStamp, environment, loader_settings
from .._errors import a_kind, check_choice, check_int, check_interval
from ..errors import LoadEvalError
from ..record.run import Run
from .adaptive import AutoStop
from .build_run import build_run
from .sampler import UtilSampler
from .timing import DEFAULT_CLOCK, Clock, EpochRecord, epoch_steps, step_path


class Wrapper:
    """What a loader handed to a wrapper must not be already: this package's wrapper (the
    face a user holds, :class:`~.evaluator.LoaderEvaluator`, or an engine behind it)."""


class Evaluator(Wrapper):
    """What every wrapper shares (see the module's notes). A subclass sets ``mode`` and
    ``sides``, calls :meth:`_start` in its constructor and :meth:`_begin_pass` when a pass
    begins, and answers ``to_run(side)``, ``worker_pids()`` and ``_side_epochs(side)``."""

    face = "LoaderEvaluator"
    """How a sentence names the wrapper: the class a user holds, in every mode."""

    mode: str
    sides: tuple[str, ...]
    """The runs this wrapper measures: ``("real",)``, ``("ideal",)``, ``("real", "ideal")``."""
    warmup: int
    auto_stop: Optional[AutoStop]

    def _check(
        self,
        dataloader: Any,
        *,
        cache_on: str,
        num_cached_batches: int,
        warmup: int,
        cache_budget_bytes: Optional[int],
        sample_interval_s: Optional[float],
        label: Optional[str],
    ) -> None:
        """The checks of the settings every wrapper takes: one sentence each."""
        check_choice("cache_on", cache_on, ("host", "device"))  # an OptionError is a ValueError
        check_int("num_cached_batches", num_cached_batches, 1)
        check_int("warmup", warmup, 0)
        check_int("cache_budget_bytes", cache_budget_bytes, 0, allow_none=True)
        check_interval("sample_interval_s", sample_interval_s)
        if label is not None and not isinstance(label, str):
            raise LoadEvalError(f"label must be a string such as 'real', not {a_kind(label)}.")
        if not hasattr(dataloader, "__iter__"):
            raise LoadEvalError(
                f"{self.face} needs an iterable of batches such as a DataLoader, "
                f"not {a_kind(dataloader)}."
            )
        if isinstance(dataloader, Wrapper):
            raise LoadEvalError(
                f"dataloader is already {a_kind(dataloader)}; wrap the original loader instead."
            )

    def _start(
        self,
        dataloader: Any,
        clock: Optional[Clock],
        sample_interval_s: Optional[float],
        label: Optional[str],
    ) -> None:
        self.dataloader = dataloader
        self.label = label
        self.clock: Clock = clock or DEFAULT_CLOCK
        self._t0: Optional[int] = None
        self._sampler: Optional[UtilSampler] = (
            UtilSampler(sample_interval_s, clock=self.clock) if sample_interval_s else None
        )
        if self._sampler is not None:  # "workers" CPU: this loader's workers only
            me = weakref.ref(self)
            self._sampler.worker_pids = lambda: _worker_pids(me)
        self._loader_info = loader_settings(dataloader)
        self.log_settings: dict[str, Any] = {}
        """What a design over this wrapper adds to its run log's ``settings`` (the pair on
        the loop's epochs: ``epoch_pair``), read back by the verdict."""
        self._closed = False
        self._sigint = SigintStamp(self.clock)

    def _begin_pass(self) -> None:
        """A pass (an epoch, or an interleaved pass) begins: the samplers run, a Ctrl-C in
        ``next()`` is a stop (not a broken loader), the clock's origin is set once."""
        if self._sampler is not None:
            self._sampler.start()
        self._sigint.install()
        if self._t0 is None:
            self._t0 = self.clock()

    def _build(
        self,
        epochs: Sequence[EpochRecord],
        first_epoch: int,
        *,
        mode: str,
        measure_wait: bool,
        label: str,
        settings: dict[str, Any],
        samples_per_batch: Optional[int],
        short_last_batch: bool,
        util: Optional[dict[str, Any]],
        worker_load_ns: Optional[list[int]],
        loader: Optional[dict[str, Any]] = None,
    ) -> Run:
        """The one call to ``build_run``: what differs between modes and sides is passed
        (``loader``: the settings of another loader than the wrapped one, a variant's)."""
        return build_run(
            epochs[first_epoch:],
            first_epoch=first_epoch,
            mode=mode,
            measure_wait=measure_wait,
            t0_ns=self._t0 or 0,
            now_ns=self.clock(),
            warmup=self.warmup,
            label=label,
            loader=self._loader_info if loader is None else loader,
            settings={**settings, **self.log_settings},
            environment=environment(step_path()),
            samples_per_batch=samples_per_batch,
            short_last_batch=short_last_batch,
            auto_stop=self.auto_stop is not None,
            util=util,
            worker_load_ns=worker_load_ns,
        )

    # -- DataLoader look-alike -------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Only called for attributes the wrapper lacks: batch_size, dataset, sampler, set_epoch, ...
        if name.startswith("__") or "dataloader" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["dataloader"], name)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    def worker_pids(self) -> set[int]:
        """The pids of the DataLoader worker processes of the pass running now."""
        raise NotImplementedError

    # -- live reading (for dashboards; never stops or changes anything) ------------
    def to_run(self, side: Optional[str] = None) -> Run:
        raise NotImplementedError

    def to_runs(self) -> dict[str, Run]:
        """Each side's run: ``{"real": Run}``, ``{"ideal": Run}`` or both."""
        return {s: self.to_run(s) for s in self.sides}

    def _side_epochs(self, side: str) -> tuple[list[EpochRecord], bool]:
        """``side``'s epochs (blocks) and whether its steps record their wait."""
        raise NotImplementedError

    def steps_since(
        self, side: Any = None, cursor: Optional[tuple[int, int]] = None
    ) -> tuple[list[int], tuple[int, int]]:
        """``side``'s step times (ns) completed since ``cursor`` (epoch or block, step), and
        the new cursor; ``steps_since(cursor)``: the first side's. Safe to call from another
        thread while the loop runs."""
        if not isinstance(side, str):
            side, cursor = self.sides[0], side if side is not None else cursor
        e, i = cursor or (0, 0)
        out: list[int] = []
        epochs, measure_wait = self._side_epochs(side)
        while e < len(epochs):
            rec = epochs[e]
            if rec.open:
                starts = rec.starts
                n = len(starts) - 1  # a step's end is the next step's start
                out.extend(starts[k + 1] - starts[k] for k in range(i, n))
                return out, (e, max(i, n))
            out.extend(epoch_steps(rec, measure_wait=measure_wait).step_ns[i:])
            e, i = e + 1, 0
        return out, (e, i)

    def side_at(self, t_ns: int) -> Optional[str]:
        """Which side ran at clock time ``t_ns`` (None: before the first pass)."""
        t0 = self._t0
        return self.sides[0] if t0 is not None and t_ns >= t0 else None

    @property
    def util_sampler(self) -> Optional[UtilSampler]:
        """The utilisation sampler (None when sampling is off). (``ev.sampler`` is the
        wrapped DataLoader's sampler, passed through.)"""
        return self._sampler

    @property
    def started_ns(self) -> Optional[int]:
        """Clock value when the first pass began (None before)."""
        return self._t0


def _worker_pids(ref: weakref.ref[Evaluator]) -> Optional[set[int]]:
    ev = ref()
    return ev.worker_pids() if ev is not None else None
