"""One ``%%loadeval`` cell: its code, its loader, its dashboard, its results and its reruns.

The session orchestrates: it runs the core's pair, ladder or sweep with the cell as
the loop and the widgets as the hooks, and never changes the settings it was given
(a rerun derives new ones with ``dataclasses.replace``).
"""

from __future__ import annotations

import dataclasses
import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Optional

from IPython.display import display

from ..core._shared import (
    RUNGS,
    SIDES,
    config_label,
    is_dataloader,
    load_history,
    loader_knobs,
    save_history,
    shutdown_persistent_workers,
    torch_threads,
)
from ..core.explore import (
    LadderResult,
    PairResult,
    RunSettings,
    SweepPlan,
    SweepResult,
    prepare_sweep,
    run_ladder,
    run_pair,
    run_sweep,
)
from ..core.measure import rebuild_loader
from ..integrations._shared import Target, log_result
from ._busy import reads_busy
from ._cell import StopLatch, run_cell_body

sessions: weakref.WeakSet[Any] = weakref.WeakSet()
"""Every live session of the magics (``%%loadeval``, ``%loadeval_run``,
``%loadeval_watch``): a cell run again releases its own, and unloading stops them all."""
_kept: set[Any] = set()
"""Sessions nothing else holds (a script's or a watch's): kept until released."""


def claim_cell(session: Any, shell: Any, keep: bool = False) -> Optional[str]:
    """Register ``session`` and return the id of the notebook cell it belongs to
    (JupyterLab and Notebook 7 send it; None elsewhere). Running a cell again replaces its
    session: the one an earlier run of the same cell left is released. ``keep``: hold the
    session until it is released (``sessions`` holds it weakly)."""
    header = getattr(shell, "parent_header", None) or {}
    cell_id: Optional[str] = (header.get("metadata") or {}).get("cellId")
    if cell_id:
        for old in list(sessions):
            if getattr(old, "cell_id", None) == cell_id:
                old.release()
    sessions.add(session)
    if keep:
        _kept.add(session)
    return cell_id


def let_go(session: Any) -> None:
    """The other half of :func:`claim_cell`: ``session`` is no longer a live session."""
    sessions.discard(session)
    _kept.discard(session)


FIRST_LABEL = "#1 as is"
"""The label of a session's first pair, the loader as the user made it."""


def rerun_label(n_before: int, num_workers: Any, changes: dict[str, Any], cache: int) -> str:
    """The label of a rerun from the panel: its number, what changed, its cache
    (PyTorch's default prefetch factor comes with workers: not worth a mention)."""
    shown = {k: v for k, v in changes.items() if (k, v) != ("prefetch_factor", 2)}
    return f"#{n_before + 1} {config_label({'num_workers': num_workers, **shown})} c{cache}"


class NotebookSession:
    """What the three magics' sessions share (``%%loadeval``, ``%loadeval_run``,
    ``%loadeval_watch``): the cell they belong to (a cell run again releases the session
    its earlier run left), the live view shown once with BokehJS loaded for it, the saved
    notebook's copy kept up to date under it, and closing and releasing their widgets.

    A subclass says where its dashboard is (:meth:`_dashboard`) and which widget trees it
    holds (:meth:`_roots`), and drops them in :meth:`_forget`."""

    def __init__(self, shell: Any, keep: bool = False) -> None:
        self.shell = shell
        self.panel: Any = None
        self.static_handle: Any = None
        # the saved notebook's copy: the cell's own result, then each run from the panel
        self.main_card: Optional[tuple[str, str]] = None  # (html, plain text)
        self.panel_cards: list[tuple[str, str]] = []
        self.n_pairs = 0
        self.cell_id = claim_cell(self, shell, keep)

    def _dashboard(self) -> Any:
        raise NotImplementedError

    def _roots(self) -> list[Any]:
        """The widget trees this session holds (closed on release)."""
        return [self.panel.widget if self.panel is not None else None]

    def _forget(self) -> None:
        self.panel = None

    def _write_static(self) -> None:
        """Write (or rewrite) the saved-notebook copy."""
        cards = ([self.main_card] if self.main_card else []) + self.panel_cards
        bundle = self._dashboard().saved_copy(cards)
        if bundle is None:  # nothing to show yet (the text view)
            return
        if self.static_handle is None:
            self.static_handle = display(bundle, raw=True, display_id=True)
        else:
            self.static_handle.update(bundle, raw=True)

    def close(self) -> None:
        dashboard = self._dashboard()
        if dashboard is not None:
            dashboard.close()

    def release(self) -> None:
        """Stop the dashboard and close its widgets (their buttons hold this session, and
        the kernel keeps every open widget): what a replaced cell's session leaves."""
        from ..widgets._shared import close_tree

        self.close()
        for w in self._roots():
            if w is not None:
                close_tree(w)
        self._forget()
        let_go(self)


class Session(NotebookSession):
    """A checked request (``settings`` valid, a sweep's loaders built) ready to run."""

    def __init__(
        self,
        shell: Any,
        cell: str,
        target: Target,
        settings: RunSettings,
        *,
        live: bool = True,
        view: str = "bokeh",
        quiet: bool = False,
        ladder: bool = False,
        sweep: Optional[SweepPlan] = None,
    ) -> None:
        self.cell, self.target, self.settings = cell, target, settings
        self.live, self.quiet, self.ladder_mode, self.sweep_plan = live, quiet, ladder, sweep
        self.view = view
        """The live view: ``bokeh``, ``html`` or ``text`` (see :mod:`._view`)."""
        self.original = target.loader
        self.dashboard: Any = None
        self.latch: Optional[StopLatch] = None
        super().__init__(shell)

    def _dashboard(self) -> Any:
        return self.dashboard

    def _roots(self) -> list[Any]:
        return [self.dashboard.widget if self.dashboard else None, *super()._roots()]

    def _forget(self) -> None:
        self.dashboard = None
        super()._forget()

    # -- display ----------------------------------------------------------------------
    def show(self) -> None:
        """The dashboard of the session's view, then its saved copy (a line saying the run
        has not finished, until it has)."""
        from ..widgets._shared import DASHBOARDS, gpu_notice

        if self.quiet:
            gpu_notice()  # nothing shown, not even the no-GPU line
            return
        self.dashboard = DASHBOARDS[self.view](
            loader_name=self.target.name,
            steps_per_run=self.settings.steps,
            live=self.live,
            runs=RUNGS if self.ladder_mode else self._arms(),
            sweep=self.sweep_plan is not None,
        )
        self.dashboard.show()
        self._write_static()

    def _arms(self) -> tuple[str, ...]:
        """The lines a pair's dashboard may draw: every arm a pass with these settings
        could serve. Which of them a pass serves is its plan's word: the dashboard shows
        the lines of the arms the pass it is told of runs (``run_started``), none other."""
        arms = (*SIDES, "contended")
        return (*arms, "variant") if self.settings.variants else arms

    def _run_once(self, ev: Any) -> None:
        latch = self.latch
        if latch is None:
            self.target.run_once(lambda ev: run_cell_body(self.shell, self.cell))(ev)
        else:  # Stop stops the cell; the wind-up around it is held (see StopLatch)
            self.target.run_once(
                lambda ev: latch.run_body(lambda: run_cell_body(self.shell, self.cell))
            )(ev)

    def _keep(self, result: Any) -> None:
        """``result`` in ``_loadeval``; the Stops the run held are answered by its error."""
        self.shell.user_ns["_loadeval"] = result
        if self.latch is not None and result.error is not None:
            self.latch.forget()

    # -- what the cell asked for --------------------------------------------------------
    def start(self) -> Any:
        """Run what the cell asked for: a ladder, a sweep or a pair."""
        if self.ladder_mode:
            return self.ladder()
        if self.sweep_plan is not None:
            return self.sweep(self.sweep_plan)
        return self.run(self.original, self.settings, FIRST_LABEL)

    def ladder(self) -> LadderResult:
        """``--ladder``: the cell against device, host, sample and real inputs."""
        with self._latched():
            result = run_ladder(
                self.original,
                self._run_once,
                self.settings,
                hooks=self.dashboard,
                loader_name=self.target.name,
            )
            self._keep(result)
            if self.dashboard is not None:
                from ..viz._shared import ladder_html

                self.dashboard.ladder_done(result)
                self.main_card = (ladder_html(result), result.text("options"))
                self._write_static()
        return result

    def sweep(self, plan: SweepPlan, settings: Optional[RunSettings] = None) -> SweepResult:
        """``--sweep`` (or the panel's "Run sweep", in a view of its own below the pair's)."""
        dash = self.dashboard
        from_panel = dash is not None and not dash.sweep
        if from_panel:
            dash = dash.sweep_view()
            self.dashboard.add_view(dash.widget)
        with self._latched():
            result = run_sweep(
                self.original,
                self._run_once,
                plan,
                settings or self.settings,
                hooks=dash,
                loader_name=self.target.name,
            )
            self._keep(result)
            if dash is not None:
                from ..viz._shared import sweep_html

                dash.sweep_done(result)
                card = (sweep_html(result), result.text("options"))
                if from_panel:
                    self.panel_cards.append(card)
                else:
                    self.main_card = card
                self._write_static()
        return result

    def run(self, loader: Any, settings: RunSettings, label: str) -> PairResult:
        """Run the pair with ``loader`` bound to the cell's name; show it; never raise."""
        self.n_pairs += 1
        if self.dashboard is not None:
            self.dashboard.pair_starting(label)
        # Stop stops the cell's loop; the runs' wind-up, their logs, _loadeval and the card
        # are done however often and wherever it is pressed
        with self._latched():
            result = run_pair(
                loader,
                self._run_once,
                settings,
                hooks=self.dashboard,
                label=label,
                loader_name=self.target.name,
            )
            self._keep(result)
            self._show_result(result)
            self._track(result, settings)
        return result

    def _track(self, result: PairResult, settings: RunSettings) -> None:
        """The verdict written to the trackers of ``--log-to``; one that fails is a line
        under the card (the pair stands)."""
        if settings.log_to and result.diagnosis is not None:
            for sentence in log_result(result, settings, trainer=self.target.trainer):
                print(f"loadeval_nb: {sentence}")

    @contextmanager
    def _latched(self) -> Iterator[None]:
        """A :class:`StopLatch` for the runs the block starts (put back in ``finally``:
        a nested one, a panel's rerun during a run, keeps the outer)."""
        outer = self.latch
        with StopLatch() as latch:
            self.latch = latch
            try:
                yield
            finally:
                self.latch = outer

    def _show_result(self, result: PairResult) -> None:
        if self.dashboard is None:
            return
        from ..viz._shared import pair_html
        from ..widgets import RerunPanel

        self.dashboard.pair_done(result)
        if self.panel is None and result.error is None and self.dashboard.shows_panel:
            self.panel = RerunPanel(
                {**loader_knobs(self.original), "num_threads": _threads_now()},
                self.settings.num_cached_batches,
                self.rerun,
                rebuildable=is_dataloader(self.original) and self.target.rebuildable,
                on_sweep=self.panel_sweep,
                fixed_note=(
                    "The loader is not a torch DataLoader: only the cache size can change."
                    if not is_dataloader(self.original)
                    else self.target.fixed_note
                ),
            )
            self.dashboard.set_panel(self.panel.widget)
        report = (
            result.diagnosis.text("options")
            if result.diagnosis is not None
            else f"loadeval: {self.dashboard.status_text()}"
        )
        self.main_card = (pair_html(result, self.dashboard.rows), report)
        self._write_static()

    # -- the panel's buttons (a button has nowhere to raise to: errors are shown) -------
    def rerun(self, changes: dict[str, Any], cache: int) -> None:
        """ "Rerun pair": rebuild the loader with ``changes``, run the pair with ``cache``."""
        changes = dict(changes)
        threads = changes.pop("num_threads", None)
        try:
            settings = replace(self.settings, num_cached_batches=cache)
            loader = rebuild_loader(self.original, **changes) if changes else self.original
        except Exception as e:
            self.dashboard.show_error(e)
            return
        nw = changes.get("num_workers", loader_knobs(self.original)["num_workers"])
        shown = {**changes, **({"num_threads": threads} if threads is not None else {})}
        label = rerun_label(self.n_pairs, nw, shown, cache)
        try:
            with reads_busy(self.shell), torch_threads(threads):  # both runs, then put back
                result = self.run(loader, settings, label)
            if result.error is not None and not isinstance(result.error, KeyboardInterrupt):
                self.dashboard.show_error(result.error)
        finally:
            if loader is not self.original:
                shutdown_persistent_workers(loader)

    def panel_sweep(self, spec: str) -> None:
        """ "Run sweep": checked before its view is added; run with the panel's cache size."""
        try:
            plan = prepare_sweep(self.original, spec, self.target.name)
            cache = (
                self.panel.cache.value
                if self.panel is not None
                else self.settings.num_cached_batches
            )
            with reads_busy(self.shell):
                result = self.sweep(plan, replace(self.settings, num_cached_batches=cache))
        except Exception as e:
            self.dashboard.show_error(e)
            return
        if result.error is not None and not isinstance(result.error, KeyboardInterrupt):
            self.dashboard.show_error(result.error)

    # -- the history, kept beyond the notebook ---------------------------------------------
    def export_history(self, path: str) -> str:
        """Write the rerun panel's history (settings and results of each pair) as JSON."""
        rows = self.dashboard.rows if self.dashboard is not None else []
        return save_history(rows, path)

    def import_history(self, path: str) -> None:
        """Add the rows of an exported history to this dashboard's history table."""
        source = os.path.basename(os.fspath(path))
        rows = [dataclasses.replace(r, label=f"{r.label} ({source})") for r in load_history(path)]
        if self.dashboard is not None:
            self.dashboard.add_history(rows)


def _threads_now() -> int:
    """torch's intra-op threads now (``torch.get_num_threads()``)."""
    import torch

    return int(torch.get_num_threads())
