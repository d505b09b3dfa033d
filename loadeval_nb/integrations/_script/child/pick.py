"""Which of a script's DataLoaders is the training loader, and measuring one pass of it.

The loaders' ``__iter__`` is patched for the child's life (:func:`patched_dataloader`;
which classes: :mod:`..loaders` — ``DataLoader``, its subclasses with an ``__iter__`` of
their own such as torchdata's ``StatefulDataLoader``, ``torchdata.nodes.Loader``,
webdataset's ``WebLoader``, the class ``--loader-from`` names): every pass of every
loader the script starts (a plain loop's ``for batch in loader``, Lightning's fit loop,
a Hugging Face Trainer's, the DataLoader inside an accelerate-prepared
``DataLoaderShard``) comes through :meth:`Picker.start_pass`, which returns the loader's
own iterator, or the measuring wrapper's. A loader started inside another loader's pass
(the DataLoader a ``WebLoader`` iterates) is part of that pass, not one of the script's.

The rule (the docs say it in words, ``docs/scripts.md``): loaders are numbered in the
order their first pass starts; the training loader's measured pass is the first pass

* started with gradients on (``torch.is_grad_enabled()``: a validation pass under
  ``torch.no_grad()`` or ``inference_mode``, Lightning's sanity check included, is never
  measured), and
* that draws more than ``warmup`` batches (a loader iterated for a batch to look at it,
  or a short sanity check, is not the training loader).

A pass cannot be known to be long before it has drawn its batches, so every eligible
pass is measured from its first batch and let go (its log removed) if it ends within
the warm-up. ``--loader K`` measures the K-th loader instead (its first pass past the
warm-up, gradients on or off), and the ideal run measures exactly the pass the real
run measured (loader and pass number).

Once the measured pass has its steps, :class:`Measured` (a ``SystemExit``) is raised
from the loader's ``next()``: the script unwinds as from ``sys.exit(0)``, its
``finally`` blocks and atexit handlers run, and nothing after that step does.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional

from ....core._shared import (
    MIN_EPOCHS,
    opened_by,
    shutdown_persistent_workers,
)
from ....core.errors import LoadEvalError
from ....core.measure import rebuild_loader
from ..loaders import patched_loaders
from ..spec import ChildStatus
from ..spec import rank_key as _rank
from ..words import said_as_flag


class Measured(SystemExit):
    """Raised into the script once its steps are measured: it unwinds as from
    ``sys.exit(0)`` (``finally`` blocks run; Lightning and the Hugging Face Trainer let a
    ``SystemExit`` through after their own clean-up)."""

    def __init__(self) -> None:
        super().__init__(0)


class Refused(SystemExit):
    """Raised into the script when a setting does not fit its loader (the cache would
    not fit): the script stops, the sentence is reported."""

    outcome = "refused"

    def __init__(self, message: str) -> None:
        super().__init__(3)
        self.message = message


class NotInterleaved(Refused):
    """Raised into the script once its training pass proves too short for interleaved
    blocks: the parent measures the sides one after the other instead (``message``: why)."""

    outcome = "not-interleavable"


def describe(loader: Any) -> dict[str, Any]:
    """What tells one of a script's loaders from another, from one run to the next."""
    dataset = getattr(loader, "dataset", None)
    try:
        n: Optional[int] = len(loader)
    except Exception:
        n = None
    batch = getattr(loader, "batch_size", None)
    return {
        "type": type(loader).__name__,
        "batch_size": batch if isinstance(batch, int) else None,
        "len": n,
        "dataset_type": type(dataset).__name__ if dataset is not None else None,
    }


def in_words(k: int, info: dict[str, Any]) -> str:
    """``DataLoader #2 (batch_size 8, 50 batches, TensorDataset)``."""
    parts = []
    if info.get("batch_size") is not None:
        parts.append(f"batch_size {info['batch_size']}")
    if info.get("len") is not None:
        parts.append(f"{info['len']} batches")
    if info.get("dataset_type"):
        parts.append(info["dataset_type"])
    return f"{info.get('type') or 'DataLoader'} #{k}" + (f" ({', '.join(parts)})" if parts else "")


def grad_enabled() -> bool:
    import torch

    return bool(torch.is_grad_enabled())


class Side:
    """What a child measures and how: ``make(loader, claim)`` builds the wrapper over the
    training loader, claiming its runs' log paths by name (``claim(names)``: ``{name:
    path}``; a pair names the arms its plan serves); ``make_epochs(loader, claim)`` the
    pair's over the loop's epochs, for an epoch too short for blocks. ``path(name)`` names
    one run's log (a new name: a log never replaces another)."""

    def __init__(
        self,
        make: Callable[..., Any],
        path: Callable[[str], str],
        make_epochs: Optional[
            Callable[[Any, Callable[[tuple[str, ...]], dict[str, str]]], Any]
        ] = None,
        make_real: Optional[
            Callable[[Any, Callable[[tuple[str, ...]], dict[str, str]]], Any]
        ] = None,
        plan: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self.make = make
        self.make_epochs = make_epochs
        self.make_real = make_real
        self.plan = plan
        """For a pair: the core's plan for the loader found (its method: blocks, the
        loop's epochs or the sides in turn), made once before anything starts; ``make``
        is given the pass's plan."""
        """For a pair: the real side's wrapper alone, where neither blocks nor the loop's
        epochs can hold the pair (None: not a pair)."""
        """For a pair: the wrapper that measures it on the loop's own epochs, where one
        epoch is too short for blocks (None: not a pair, or no such wrapper)."""
        self._path = path
        self._claimed: dict[str, str] = {}

    def claim(self, names: tuple[str, ...]) -> dict[str, str]:
        """The log paths of the runs ``names``, each claimed once (a pass let go of gives
        its names to the next)."""
        for name in names:
            if name not in self._claimed:
                self._claimed[name] = self._path(name)
        return {name: self._claimed[name] for name in names}

    def paths(self) -> dict[str, str]:
        """Every log path claimed so far, by run."""
        return dict(self._claimed)


class Picker:
    """Finds the training loader's pass among the script's DataLoader passes and
    measures it (see the module's notes). ``want``: ``(loader, pass)`` to measure
    (``pass`` None: that loader's first pass past the warm-up); None: the rule."""

    def __init__(
        self,
        side: Side,
        warmup: int,
        want: Optional[tuple[int, Optional[int]]] = None,
        expect: Optional[dict[str, Any]] = None,
        on_measured: Callable[[ChildStatus], None] = lambda status: None,
        changes: Optional[dict[str, Any]] = None,
        on_progress: Callable[[ChildStatus], None] = lambda status: None,
    ) -> None:
        self.side = side
        self.warmup = warmup
        self.want = want
        self.expect = expect
        self.changes = dict(changes or {})
        """Settings changed on the measured loader (a copy is measured: ``rebuild_loader``)."""
        self._rebuilt: dict[int, Any] = {}  # id(loader) -> the copy measured in its place
        self.on_measured = on_measured
        self.status: Optional[ChildStatus] = None
        """Set once the steps are measured (``outcome="measured"``)."""
        self.passes: list[str] = []
        """The passes not measured, in words (for the sentence when none is)."""
        self._loaders: list[Any] = []  # weak references, in the order first iterated
        self._pass_count: dict[int, int] = {}
        self._inside: set[int] = set()  # loaders the tool iterates now (their own iter()
        # goes to the patched class's original __iter__)
        self._active: Optional[Any] = None  # the wrapper of the pass being measured
        self._active_loader: Any = None
        self._active_pass: Callable[[], Any] = lambda: None  # a weak reference to its pass
        self._last_handed = False  # the measured pass has handed out its last batch
        self._stop_hook: Any = None  # torch's optimizer-step hook that stops the script then
        self._ours = False  # the pass is being closed by our stop, not by the script
        self._failing = False  # close() of a script that failed: its partial logs kept
        self._parked: Optional[tuple[int, int, dict[str, Any], int]] = None
        """A pair over the loop's epochs that the script left past the warm-up, too short
        to pair: its logs wait for close() (kept for a failure, else removed)."""
        self.left_at: Optional[tuple[int, str]] = None
        """(step, where) when the measured pass ended by the script leaving it or raising
        inside it: the step it had reached (from 1) and, in words, its side and block."""
        self.on_progress = on_progress
        self._first_seen = True
        self._skipped: dict[int, dict[str, Any]] = {}  # loaders passed over for ``want``
        self._epochs: Optional[Any] = None  # the pair measured on the loop's epochs
        self._epochs_of: Optional[tuple[Any, int, int]] = None  # (its loader's weakref,
        # number, first pass)
        self._epochs_why = ""  # why one epoch holds no blocks (the plan's words)
        self._after_epochs: Optional[tuple[Any, int, int]] = None
        """(the training loader's weakref, its number, the epochs measured) once the pair
        over its epochs is over: its next pass stops the script; other loaders' run."""
        self._measuring: Any = None  # the last pass's wrapper (its arms' worker pids)
        self._alone_why: Optional[str] = None
        """Why the pass being measured is the real side alone (:meth:`_alone`)."""
        self.real_kept: Optional[ChildStatus] = None
        """A pair over the loop's epochs that the script ended after too few of them: the
        status that carries its real epochs' log (the parent measures the ideal side
        alone, in a second run of the script)."""
        self.not_interleaved: Optional[str] = None
        """Why the pair could not be measured in this process (a pass too short for blocks
        and too few epochs of it to pair): the parent measures the sides in turn."""
        self.only: Optional[Callable[[Any], bool]] = None
        self.named_found: Optional[bool] = None
        """Whether the loader ``--loader-from`` names was found (None: none named)."""
        """With ``--loader-from``: what tells the named loader (the only one measured)."""

    def all_passes(self) -> list[str]:
        """The passes not measured, in words: those the rule let go of, and the loaders
        passed over because another was asked for, with their passes counted."""
        out = _grouped(self.passes)
        for k, info in self._skipped.items():
            n = self._pass_count.get(k, 0)
            out.append(f"{in_words(k, info)} {n} time{'s' if n != 1 else ''}")
        return out

    @property
    def done(self) -> bool:
        return self.status is not None

    def _number(self, loader: Any) -> int:
        for i, ref in enumerate(self._loaders):
            if ref() is loader:
                return i + 1
        self._loaders.append(weakref.ref(loader))
        return len(self._loaders)

    def start_pass(self, loader: Any, original: Callable[[Any], Iterator[Any]]) -> Iterator[Any]:
        """``iter(loader)``, as the patched ``DataLoader.__iter__`` answers it."""
        if id(loader) in self._inside:  # our wrapper starting the loader it measures
            return original(loader)
        if _within_a_pass():  # a loader's own loader (WebLoader's DataLoader): its pass's
            return original(loader)
        if self._after_epochs is not None:  # the pair over the loop's epochs is over
            if self._after_epochs[0]() is loader:  # the training loader's next epoch
                n = self._pass_count.get(self._after_epochs[1], 0) + 1
                self.stop_now(
                    f"at the start of the training loader's pass {n}, after the "
                    f"{self._after_epochs[2]} epochs measured (each ran to its end): that "
                    "epoch and what follows it did not run"
                )
            return self._serve(loader, original)  # (a validation loader's pass runs)
        if self.done or self._last_handed:  # past its measured pass: stop the script here
            self.stop_now(
                "at the start of its next DataLoader pass, after the measured pass: that "
                "pass and what follows it did not run"
            )
        k = self._number(loader)
        p = self._pass_count[k] = self._pass_count.get(k, 0) + 1
        if self._active is not None and self._active_pass() is None:
            # a pass asked for and dropped before its first batch (its generator never ran)
            if self._active is self._epochs:  # an epoch of the pair's: none was served
                self._leave(self._active_loader)
                self._active = self._active_loader = None
            else:
                self._let_go(self._active, self._active_loader)
        if self._epochs is not None and self._active is None and self._epochs_of is not None:
            if self._epochs_of[0]() is loader:  # the loop's next epoch: the pair's next block
                return self._epoch_pass(loader, k, describe(loader), original)
            return self._serve(loader, original)  # another loader between its epochs
        if self._active is not None:  # one pass is measured at a time
            return self._serve(loader, original)
        if self._first_seen:
            self._first_seen = False
            self.on_progress(
                ChildStatus(
                    "running",
                    rank=_rank(),
                    passes=[f"{in_words(k, describe(loader))}, pass {p} started"],
                )
            )
        if self.only is not None and not self.only(loader):  # not the loader --loader-from names
            if k not in self._skipped:
                self._skipped[k] = describe(loader)
            return self._serve(loader, original)
        if self.want is not None:
            wk, wp = self.want
            if k != wk or (wp is not None and p != wp):
                if k not in self._skipped:
                    self._skipped[k] = describe(loader)
                return self._serve(loader, original)
            chosen = wp is not None  # the exact pass the real run measured
        elif not grad_enabled():
            self.passes.append(f"{in_words(k, describe(loader))}, pass {p} under no_grad")
            return self._serve(loader, original)
        else:
            chosen = False
        return self._measure(loader, k, p, chosen, original)

    def _serve(self, loader: Any, original: Callable[[Any], Iterator[Any]]) -> Iterator[Any]:
        """A pass not measured: a DataLoader's own iterator, as the script would have it; a
        pass of another loader served through a generator of ours, so that a loader it
        starts inside (a WebLoader's DataLoader) is known as part of it."""
        it = original(loader)
        if _is_dataloader(loader):
            return it
        return self._served(it)

    def _served(self, it: Iterator[Any]) -> Iterator[Any]:
        yield from it

    def _enter(self, loader: Any, original: Callable[[Any], Iterator[Any]]) -> None:
        """The tool iterates ``loader`` from now on: its passes start at ``original`` (the
        patched class's own ``__iter__``), past a subclass's ``__iter__`` that wraps it, so
        that the script's wrapper runs once per batch, around the batches the tool hands."""
        self._inside.add(id(loader))
        opened_by(loader, original)

    def _leave(self, loader: Any) -> None:
        self._inside.discard(id(loader))
        opened_by(loader, None)

    @contextmanager
    def _within(self, loader: Any, original: Callable[[Any], Iterator[Any]]) -> Iterator[None]:
        self._enter(loader, original)
        try:
            yield
        finally:
            self._leave(loader)

    def _measure(
        self,
        loader: Any,
        k: int,
        p: int,
        chosen: bool,
        original: Callable[[Any], Iterator[Any]],
    ) -> Iterator[Any]:
        info = describe(loader)
        if self.expect is not None:
            self._check_same(k, info)
        self._enter(loader, original)  # for the whole pass: the wrapper iterates the loader
        try:
            measured = loader
            if self.changes:  # the panel's settings: a copy of the loader is measured
                measured = self._rebuilt[id(loader)] = rebuild_loader(loader, **self.changes)
                self._inside.add(id(measured))
            self._drop_parked()  # (its logs' paths are this pass's)
            # a pair's method is the core's plan for this loader, made once, before anything
            # starts (blocks; the loop's epochs; or the sides in turn, each with its why)
            plan = self.side.plan(measured) if self.side.plan is not None else None
            if plan is not None and plan.method != "blocks":
                # a glance at a short loader is not the training pass: this pass goes on
                # unmeasured, and only if it proves to be the training pass does it decide
                self._release(loader)
                epochs = self._epoch_pair(loader, plan, original)
                if epochs is not None:
                    self._epochs, self._epochs_of = epochs, (weakref.ref(loader), k, p)
                    self._epochs_why = plan.why
                    return self._epoch_pass(loader, k, info, original)
                return self._alone(loader, original, k, p, chosen, plan.why or "", info)
            if plan is not None:
                wrapper = self.side.make(measured, self.side.claim, plan.planned)
            else:
                wrapper = self.side.make(measured, self.side.claim)
            it = iter(wrapper)
        except LoadEvalError as e:
            self._release(loader)
            raise Refused(said_as_flag(e)) from None
        except BaseException:
            self._release(loader)
            raise
        return self._begin(wrapper, it, loader, k, p, chosen, info)

    def _begin(
        self,
        wrapper: Any,
        it: Iterator[Any],
        loader: Any,
        k: int,
        p: int,
        chosen: bool,
        info: dict[str, Any],
    ) -> Iterator[Any]:
        """The measured pass of ``wrapper`` (its iterator ``it``) handed to the script: the
        pass in progress until it ends."""
        gen = self._pass(wrapper, it, loader, k, p, chosen, info)
        self._measuring = wrapper
        self._active, self._active_loader = wrapper, loader
        self._active_pass = weakref.ref(gen)
        return gen

    def _epoch_pair(
        self, loader: Any, plan: Any, original: Callable[[Any], Iterator[Any]]
    ) -> Optional[Any]:
        """The pair over the loop's epochs, where the core's plan says so (a loader with a
        length that leaves steady steps after the warm-up, one process) and this child
        measures a pair on its own loader, unchanged by the panel; None otherwise (the
        sides in turn)."""
        if plan.method != "epochs" or self.side.make_epochs is None or self.changes or _rank():
            return None
        try:
            self._drop_parked()
            with self._within(loader, original):  # the replay fills its cache from it now
                return self.side.make_epochs(loader, self.side.claim)
        except LoadEvalError:
            return None

    def _epoch_pass(
        self,
        loader: Any,
        k: int,
        info: dict[str, Any],
        original: Callable[[Any], Iterator[Any]],
    ) -> Iterator[Any]:
        """One epoch of the pair measured on the loop's epochs: its side's wrapper serves
        the whole epoch; after the schedule's last one the script stops, as after a
        measured pass."""
        pair = self._epochs
        assert pair is not None
        self._enter(loader, original)
        gen = self._epoch_gen(pair, loader, k, info)
        self._active, self._active_loader = pair, loader
        self._active_pass = weakref.ref(gen)
        return gen

    def _epoch_gen(self, pair: Any, loader: Any, k: int, info: dict[str, Any]) -> Iterator[Any]:
        n = 0
        last = pair.started + 1 >= pair.epochs
        try:
            it = iter(pair)
            for batch in it:  # (the last epoch runs to its end: no stop at its last step)
                n += 1
                yield batch
        except GeneratorExit:  # our stop, or the script left the epoch
            if not self._ours:
                self.left_at = (n, _where(pair))
            if self._ours or n <= self.warmup:  # a glance, or our stop: the pair ends
                self._end_epochs(loader, k, info, by_script=not self._ours, failed=self._failing)
            elif last:  # the script's own epoch (shorter than the loader's): the last one
                self._end_epochs(loader, k, info, by_script=False, failed=self._failing)
                if self.status is not None:
                    self._after_epochs = (weakref.ref(loader), k, pair.epochs)
            # (else the script left the epoch past the warm-up, its own shorter epoch: the
            # pair goes on at the loop's next one)
            raise
        except BaseException:  # the loader raised: what was measured is kept
            self.left_at = (n + 1, _where(pair))
            self._end_epochs(loader, k, info, by_script=True, failed=True)
            raise
        finally:
            self._active = self._active_loader = None
            self._leave(loader)
        if last:  # the epoch's end (a checkpoint, validation) runs as the script has it;
            # the training loader's next pass stops the script
            self._end_epochs(loader, k, info, by_script=False)
            if self.status is not None:
                self._after_epochs = (weakref.ref(loader), k, pair.epochs)

    def _end_epochs(
        self,
        loader: Any,
        k: int,
        info: dict[str, Any],
        by_script: bool,
        failed: bool = False,
        ending: bool = False,
    ) -> None:
        """The pair over the loop's epochs is over: its logs are written; measured where
        it paired enough epochs, else the sides are measured in turn (``not_interleaved``);
        a first epoch left before it ended (a glance at the loader) is no pass of it. Where
        the script (or its loader) ``failed`` past the warm-up, the partial logs are kept,
        as a measured pass's are, for the failure to name. A script ``ending`` well after
        a whole real epoch (too few epochs to pair) keeps that epoch as the real run
        (:attr:`real_kept`): only the ideal side is measured again, by a second run."""
        pair, self._epochs = self._epochs, None
        first = self._epochs_of[2] if self._epochs_of is not None else 1
        if pair is None or self.status is not None:
            return
        keep_real = ending and not failed and not pair.enough and pair.completed["real"] > 0
        if keep_real:
            pair.real_alone()
        try:
            pair.close()
        finally:
            self._leave(loader)
        if not pair.enough:
            past_warmup = pair.started > 1 or pair.handed > self.warmup
            if failed and past_warmup:
                self._measured(k, first, info, pair.handed, True)
                return
            if pair.started > 1 or pair.completed["real"]:
                self.not_interleaved = (
                    f"{self._epochs_why}, and the script ended after {pair.started} of its "
                    f"epoch{'s' if pair.started != 1 else ''}, too few to pair as blocks "
                    f"(it takes {MIN_EPOCHS} at least)"
                )
            else:
                n = pair.handed
                self.passes.append(
                    f"{in_words(k, info)}, pass {first} was left after {n} "
                    f"batch{'es' if n != 1 else ''}"
                )
            self._epochs_of = None
            if keep_real and self.not_interleaved is not None:
                self._keep_real(k, first, info, pair.handed)
            elif by_script and past_warmup:
                # the script left the pair: it ended, or it is failing (an exception
                # unwinding the loop closes the epoch first); close() tells which
                self._parked = (k, first, info, pair.handed)
            else:
                self._remove_logs()
            return
        self._measured(k, first, info, pair.handed, by_script and not pair.last)

    def _keep_real(self, k: int, first: int, info: dict[str, Any], handed: int) -> None:
        """Keep the real side's log of a pair too short to pair (the others removed)."""
        paths = self.side.paths()
        real = paths.get("real")
        for name, path in paths.items():
            if name != "real":
                for f in (path, f"{path}.journal"):
                    with contextlib.suppress(OSError):
                        os.remove(f)
        if real is not None and os.path.isfile(real):
            self.real_kept = ChildStatus(
                "not-interleavable",
                rank=_rank(),
                message=self.not_interleaved or "",
                log_paths={"real": real},
                loader_index=k,
                pass_index=first,
                loader_settings=info,
                steps=handed,
            )

    def blame(self, where: str, error: str) -> str:
        """``where`` the script failed, told by the arm whose worker ended: a DataLoader
        error that names a worker's pid (``DataLoader worker (pid 123) is killed by
        signal``) of the variant's loader is the variant's, whatever block was running
        (torch raises it in the main thread when the worker ends)."""
        workers = getattr(self._measuring, "workers", None) or {}
        pids = {int(p) for m in re.finditer(r"pid(?:\(s\))? ([\d, ]+)", error)
                for p in re.findall(r"\d+", m.group(1))}  # fmt: skip
        for arm, arm_pids in workers.items():
            dead = sorted(pids & arm_pids)
            if dead and arm != "real":
                return f"the {arm}'s loader: its worker (pid {dead[0]}) ended, in {where}"
        return where

    def _check_same(self, k: int, info: dict[str, Any]) -> None:
        want = self.expect or {}
        keys = [key for key in ("batch_size", "len", "dataset_type") if want.get(key) is not None]
        differ = [key for key in keys if info.get(key) != want.get(key)]
        if differ:
            raise Refused(
                f"The ideal run's DataLoader #{k} is not the one the real run measured "
                f"({', '.join(f'{key} {info.get(key)} vs {want.get(key)}' for key in differ)}): "
                "the script makes its loaders in another order from one run to the next; pick "
                "the training loader with --loader K."
            )

    def _pass(
        self,
        wrapper: Any,
        it: Iterator[Any],
        loader: Any,
        k: int,
        p: int,
        chosen: bool,
        info: dict[str, Any],
    ) -> Iterator[Any]:
        n = 0
        try:
            last = len(wrapper)
        except Exception:  # an endless pass: only the script or our steps end it
            last = -1
        try:
            for batch in it:
                n += 1
                if n > self.warmup:
                    chosen = True
                if n == last and chosen:  # the pass's last step: stop once it is done
                    self._arm_stop()
                yield batch
        except GeneratorExit:  # our stop, or the script let go of the pass (break, its own
            # max_steps, an exception of its own in the step: the child tells which)
            if not self._ours:
                self.left_at = (n, _where(wrapper))
            self._end(wrapper, loader, k, p, n, chosen, info, by_script=not self._ours)
            raise
        except BaseException:  # the loader raised: the partial logs are kept when measured
            self.left_at = (n + 1, _where(wrapper))
            if chosen:
                self._end(wrapper, loader, k, p, n, chosen, info, by_script=True)
            else:
                self._let_go(wrapper, loader)
            raise
        self._end(wrapper, loader, k, p, n, chosen, info, by_script=False)
        if chosen:
            self.stop_now(
                "at its next batch request after the measured pass's last batch: the rest of "
                "that epoch, its end (a checkpoint, validation) and later epochs did not run"
            )

    def _alone(
        self,
        loader: Any,
        original: Callable[[Any], Iterator[Any]],
        k: int,
        p: int,
        chosen: bool,
        why: str,
        info: dict[str, Any],
    ) -> Iterator[Any]:
        """A pass too short for blocks (and no pair on the loop's epochs): measured as the
        real side alone, so that the script's run is not spent — if it proves to be the
        training pass, its real steps are the real run (the status says the pair was not
        interleavable, with that log) and one more run of the script measures the ideal
        side; a glance is let go of, as any pass."""
        make_real = self.side.make_real
        if make_real is None or self.changes:
            return self._unmeasured(loader, original, k, p, chosen, why)
        self._enter(loader, original)
        try:
            wrapper = make_real(loader, self.side.claim)
            it = iter(wrapper)
        except LoadEvalError as e:
            self._release(loader)
            raise Refused(said_as_flag(e)) from None
        except BaseException:
            self._release(loader)
            raise
        self._alone_why = why
        return self._begin(wrapper, it, loader, k, p, chosen, info)

    def _unmeasured(
        self,
        loader: Any,
        original: Callable[[Any], Iterator[Any]],
        k: int,
        p: int,
        chosen: bool,
        why: str,
    ) -> Iterator[Any]:
        """A pass too short to interleave, served as it is: if it proves to be the training
        pass (past the warm-up), the script stops and the sides are measured in turn."""
        n = 0
        for batch in original(loader):
            n += 1
            if n > self.warmup or chosen:
                raise NotInterleaved(why)
            yield batch
        self.passes.append(f"{in_words(k, describe(loader))}, pass {p} ended after {n} batches")

    def _arm_stop(self) -> None:
        """The measured pass has handed out its last batch: the script stops as soon as the
        step that uses it is done — at its optimizer's step (torch's global hook), at its
        next ``next()`` on the pass, or at its next DataLoader pass, whichever comes
        first. A framework that stops asking at ``len()`` (Lightning) goes no further:
        no validation, no next epoch."""
        self._last_handed = True
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook
        except ImportError:  # an old torch: the next next() or pass stops it
            return

        def after_step(*_: Any) -> None:
            self.stop_now(
                "at the optimizer step that used the measured pass's last batch: the rest of "
                "that epoch, its end (a checkpoint, validation) and later epochs did not run"
            )

        self._stop_hook = register_optimizer_step_post_hook(after_step)

    def stop_now(self, where: str = "") -> None:
        """End the measured pass (its logs written) and stop the script: :class:`Measured`.
        ``where``: in words, where the script is stopped (the status keeps it)."""
        hook, self._stop_hook = self._stop_hook, None
        if hook is not None:
            hook.remove()
        gen = self._active_pass()
        if gen is not None and self.status is None:
            self._ours = True
            try:
                gen.close()
            finally:
                self._ours = False
        if self.status is not None and where and not self.status.stopped_at:
            self.status.stopped_at = where
        raise Measured()

    def _end(
        self,
        wrapper: Any,
        loader: Any,
        k: int,
        p: int,
        n: int,
        chosen: bool,
        info: dict[str, Any],
        by_script: bool,
    ) -> None:
        if not chosen:
            self._alone_why = None
            how = "ended" if not by_script else "was left"
            batches = f"{n} batch{'es' if n != 1 else ''}"
            self.passes.append(f"{in_words(k, info)}, pass {p} {how} after {batches}")
            self._let_go(wrapper, loader)
            return
        try:
            wrapper.close()
        finally:
            self._release(loader)
            self._active = self._active_loader = None
        self._measured(k, p, info, n, by_script)

    def _measured(
        self, k: int, p: int, info: dict[str, Any], steps: int, stopped_by_script: bool
    ) -> None:
        """The steps are measured: the status the parent reads, reported (the real side
        alone: the pair was not interleavable, its real run's log with it)."""
        self.status = ChildStatus(
            outcome="measured" if self._alone_why is None else "not-interleavable",
            message=self._alone_why or "",
            rank=_rank(),
            log_paths=dict(self.side.paths()),
            loader_index=k,
            pass_index=p,
            loader_settings=info,
            steps=steps,
            stopped_by_script=stopped_by_script,
        )
        self.on_measured(self.status)

    def _let_go(self, wrapper: Any, loader: Any) -> None:
        """Close a pass that is not the measured one and remove what it wrote."""
        try:
            wrapper.close()
        finally:
            self._release(loader)
            self._active = self._active_loader = None
            self._remove_logs()

    def _drop_parked(self) -> None:
        """A pair the script left, too short to pair, is no failure's (a pass follows):
        its logs are removed."""
        if self._parked is not None:
            self._parked = None
            self._remove_logs()

    def _remove_logs(self) -> None:
        """Remove what the runs of a pass let go of wrote (their logs and journals)."""
        for path in self.side.paths().values():
            for f in (path, f"{path}.journal"):
                with contextlib.suppress(OSError):
                    os.remove(f)

    def _release(self, loader: Any) -> None:
        """The pass of ``loader`` is over: its own ``iter()`` is the script's again, and the
        copy measured in its place (if any) lets its workers go."""
        self._leave(loader)
        measured = self._rebuilt.pop(id(loader), None)
        if measured is not None:
            self._inside.discard(id(measured))
            shutdown_persistent_workers(measured)

    def close(self, failed: bool = False) -> None:
        """At the child's end: a pass still open (the script failed or exited inside it)
        is closed; its partial log is kept only when its steps were enough to pick it. A
        pair over the loop's epochs that the script ended first keeps what it paired; one
        the script ``failed`` in (an exception, a non-zero exit) keeps its partial logs
        past the warm-up."""
        self._failing = failed
        if self._epochs is not None and self._epochs_of is not None:
            loader = self._epochs_of[0]()
            gen = self._active_pass() if self._active is self._epochs else None
            if gen is not None:
                gen.close()  # (ends the pair through its epoch's generator)
            if self._epochs is not None and self._epochs_of is not None:
                info = describe(loader) if loader is not None else {}
                self._end_epochs(
                    loader, self._epochs_of[1], info, by_script=True, failed=failed, ending=True
                )
        if self._parked is not None and failed and self.status is None:
            parked, self._parked = self._parked, None
            self._measured(*parked, True)
        self._drop_parked()
        wrapper, self._active = self._active, None
        if wrapper is not None:
            try:
                wrapper.close()
            except Exception:
                pass
        for measured in self._rebuilt.values():  # a copy of ours: its workers are ours to stop
            shutdown_persistent_workers(measured)
        self._rebuilt.clear()


def _grouped(passes: list[str]) -> list[str]:
    """Passes of one loader that ended alike, said once: ``DataLoader #1 (...), passes 1-8
    were left early``, not eight times."""
    out: list[str] = []
    runs: list[tuple[str, str, list[str]]] = []  # (loader, how, pass numbers)
    for text in passes:
        m = re.match(r"(.*), pass (\d+) (.*)$", text)
        if m is None:
            runs.append((text, "", []))
            continue
        loader, p, how = m.groups()
        if runs and runs[-1][0] == loader and runs[-1][1] == how and runs[-1][2]:
            runs[-1][2].append(p)
        else:
            runs.append((loader, how, [p]))
    for loader, how, ps in runs:
        if not ps:
            out.append(loader)
        elif len(ps) == 1:
            out.append(f"{loader}, pass {ps[0]} {how}")
        else:
            how = re.sub(r"^was ", "were ", how)
            out.append(f"{loader}, passes {ps[0]}–{ps[-1]} {how}")
    return out


def _where(wrapper: Any) -> str:
    """Where a measuring wrapper's pass is, in words: ``the real side, block 2`` for an
    interleaved pair, ``the real run`` for one side."""
    now = getattr(wrapper, "block_now", None)
    if now is not None:
        return f"the {now[0]} side, block {now[1]}"
    mode = getattr(wrapper, "mode", None)
    return "the ideal run" if mode == "replay" else "the real run"


def _within_a_pass() -> bool:
    """True when the caller runs inside one of our passes' generators: a loader started
    by another loader's own machinery (webdataset's ``WebLoader`` iterating its
    DataLoader), which belongs to that pass and is not a loader of the script's."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code in _PASS_CODES:
            return True
        f = f.f_back  # type: ignore[assignment]
    return False


_PASS_CODES = {
    Picker._pass.__code__,
    Picker._epoch_gen.__code__,
    Picker._unmeasured.__code__,
    Picker._served.__code__,
}


@contextmanager
def patched_dataloader(picker: Picker, loader_from: Optional[str] = None) -> Iterator[None]:
    """Every loader's ``iter()`` answered by ``picker`` within the block (``DataLoader``'s,
    its subclasses', the known loaders', the one ``loader_from`` names: see
    :mod:`..loaders`); restored after."""
    if loader_from is not None:
        picker.only = lambda loader: False  # nothing, until the named loader is found
        picker.named_found = False

    def on_named(only: Callable[[Any], bool]) -> None:
        picker.only = only
        picker.named_found = True

    with patched_loaders(picker.start_pass, loader_from, on_named):
        yield


def _is_dataloader(loader: Any) -> bool:
    from torch.utils.data import DataLoader

    return isinstance(loader, DataLoader)
