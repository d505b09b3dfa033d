"""``%%loadeval``: run a training cell with the real loader, then with a replayed cache.

Thin: it parses options, resolves the loader, and orchestrates the core
(``run_pair``) and the widgets (``Dashboard``, ``RerunPanel``).
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ..core import LoadEvalError
from ..core._env import is_dataloader
from ..core._ladder import RUNGS, LadderResult, run_ladder
from ..core._loader import loader_knobs, rebuild_loader, shutdown_persistent_workers
from ..core._pair import PAIR_NEEDS_TWO_PASSES, PairResult, PairSettings, refuse_one_shot, run_pair
from ..core._sweep import SweepResult, prepare_sweep, run_sweep
from ._cell import LoaderRef, find_loader_names, run_cell_body

__all__ = ["LoadEvalMagics", "stop_all"]

log = logging.getLogger("loadeval_nb")
_sessions: weakref.WeakSet[_Session] = weakref.WeakSet()
last_session: Any = None
"""The most recent ``%%loadeval`` session (its dashboard, panel and results)."""


def stop_all() -> None:
    """Stop every dashboard's background thread (used when the extension is unloaded)."""
    for s in list(_sessions):
        s.close()


class _Session:
    """One ``%%loadeval`` cell: its code, its loader, its dashboard and its reruns."""

    def __init__(
        self, shell: Any, cell: str, ref: LoaderRef, settings: PairSettings, args: Any
    ) -> None:
        self.shell, self.cell, self.ref, self.settings, self.args = shell, cell, ref, settings, args
        self.original = ref.get()
        self.dashboard: Any = None
        self.panel: Any = None
        self.static_handle: Any = None
        self.bokehjs_handle: Any = None
        self.n_pairs = 0
        # the saved notebook's copy: the cell's own result, then each sweep run from the panel
        self.main_card: Optional[tuple[str, str]] = None  # (html, plain text)
        self.panel_cards: list[tuple[str, str]] = []
        _sessions.add(self)

    # -- display ----------------------------------------------------------------------
    def show(self) -> None:
        if self.args.quiet:
            return
        from ..widgets import Dashboard, load_bokehjs

        live = not self.args.no_live
        if live:
            self.bokehjs_handle = load_bokehjs()
        self.dashboard = Dashboard(
            loader_name=self.ref.name,
            steps_per_run=self.settings.steps,
            live=live,
            runs=RUNGS if self.args.ladder else ("real", "ideal"),
            sweep=bool(self.args.sweep),
        )
        display(self.dashboard.widget)

    def _run_once(self, ev: Any) -> None:
        with self.ref.bound(ev):
            run_cell_body(self.shell, self.cell)

    def _write_static(self) -> None:
        """Write (or rewrite) the saved-notebook copy, and drop the BokehJS output it replaces."""
        from ..widgets import static_bundle, unload_bokehjs_output

        cards = ([self.main_card] if self.main_card else []) + self.panel_cards
        bundle = static_bundle(self.dashboard.static_class, cards)
        if self.static_handle is None:
            self.static_handle = display(bundle, raw=True, display_id=True)
        else:
            self.static_handle.update(bundle, raw=True)
        unload_bokehjs_output(self.bokehjs_handle)
        self.bokehjs_handle = None

    def ladder(self) -> LadderResult:
        """``--ladder``: the cell against device, host, sample and real inputs."""
        result = run_ladder(
            self.original,
            self._run_once,
            self.settings,
            hooks=self.dashboard,
            loader_name=self.ref.name,
        )
        self.shell.user_ns["_loadeval"] = result
        if self.dashboard is not None:
            from ..widgets import ladder_html

            self.dashboard.ladder_done(result)
            self.main_card = (ladder_html(result), result.report())
            self._write_static()
        return result

    def sweep(self, spec: Any) -> SweepResult:
        """``--sweep`` (or the panel's "Run sweep"): the real loop per configuration."""
        dash = self.dashboard
        from_panel = dash is not None and dash.sweep_fig is None
        if from_panel:  # a sweep view below the pair's, once the sweep is known to be good
            from ..widgets import Dashboard

            prepare_sweep(self.original, spec, self.ref.name)
            dash = Dashboard(
                loader_name=self.ref.name,
                steps_per_run=self.settings.steps,
                live=dash.live,
                sweep=True,
            )
            self.dashboard.panel_box.children = (*self.dashboard.panel_box.children, dash.widget)
        result = run_sweep(
            self.original,
            self._run_once,
            spec,
            self.settings,
            hooks=dash,
            loader_name=self.ref.name,
        )
        self.shell.user_ns["_loadeval"] = result
        if dash is not None:
            from ..widgets import sweep_html

            dash.sweep_done(result)
            card = (sweep_html(result), result.report())
            if from_panel:
                self.panel_cards.append(card)
            else:
                self.main_card = card
            self._write_static()
        return result

    def _show_result(self, result: PairResult, settings_row: dict[str, Any]) -> None:
        if self.dashboard is None:
            return
        from ..widgets import RerunPanel, pair_html

        self.dashboard.pair_done(result, settings_row)
        if self.panel is None and result.error is None:
            knobs = loader_knobs(self.original)
            self.panel = RerunPanel(
                knobs,
                self.settings.cache,
                self.rerun,
                rebuildable=is_dataloader(self.original),
                on_sweep=self.panel_sweep,
            )
            self.dashboard.set_panel(self.panel.widget)
        report = (
            str(result.diagnosis)
            if result.diagnosis is not None
            else f"loadeval: {self.dashboard.status.value}"
        )
        self.main_card = (pair_html(result, self.dashboard.rows), report)
        self._write_static()

    # -- running ----------------------------------------------------------------------
    def run(self, loader: Any, settings_row: dict[str, Any]) -> PairResult:
        """Run the pair with ``loader`` bound to the cell's name; show it; never raise."""
        self.n_pairs += 1

        label = settings_row.get("label", "")
        result = run_pair(
            loader,
            self._run_once,
            self.settings,
            hooks=self.dashboard,
            label=label,
            loader_name=self.ref.name,
        )
        self.shell.user_ns["_loadeval"] = result
        self._show_result(result, settings_row)
        return result

    def first(self) -> PairResult:
        row = {"label": "#1 as is", "cache": self.settings.cache}
        return self.run(self.original, row)

    def rerun(self, changes: dict[str, Any], cache: int) -> None:
        """The rerun panel's button: rebuild the loader with ``changes``, run the pair again."""
        try:
            loader = rebuild_loader(self.original, **changes) if changes else self.original
        except Exception as e:  # shown in the dashboard: a button has nowhere to raise to
            self.dashboard.show_error(e)
            return
        self.settings.cache = cache
        knobs = {**loader_knobs(self.original), **changes}
        label = _run_label(self.n_pairs + 1, knobs, cache)
        try:
            result = self.run(loader, {"label": label, "cache": cache})
            if result.error is not None and not isinstance(result.error, KeyboardInterrupt):
                self.dashboard.show_error(result.error)
        finally:
            if loader is not self.original:
                shutdown_persistent_workers(loader)

    def panel_sweep(self, spec: str) -> None:
        """The panel's "Run sweep" button: errors are shown in the dashboard, never raised."""
        try:
            result = self.sweep(spec)
        except Exception as e:  # shown in the dashboard: a button has nowhere to raise to
            self.dashboard.show_error(e)
            return
        if result.error is not None and not isinstance(result.error, KeyboardInterrupt):
            self.dashboard.show_error(result.error)

    def close(self) -> None:
        if self.dashboard is not None:
            self.dashboard.close()


def _run_label(n: int, knobs: dict[str, Any], cache: int) -> str:
    parts = [f"#{n}", f"w{knobs.get('num_workers')}"]
    if knobs.get("pin_memory"):
        parts.append("pin")
    if knobs.get("num_workers") and knobs.get("prefetch_factor") not in (None, 2):
        parts.append(f"pf{knobs['prefetch_factor']}")
    if knobs.get("persistent_workers"):
        parts.append("persist")
    parts.append(f"c{cache}")
    return " ".join(parts)


@magics_class
class LoadEvalMagics(Magics):
    """The ``%%loadeval`` cell magic."""

    @magic_arguments()
    @argument(
        "loader",
        nargs="?",
        default=None,
        help="the DataLoader's name in the notebook, or a dotted path (trainer.train_loader); "
        "optional when the cell refers to exactly one DataLoader",
    )
    @argument(
        "--steps",
        default="200",
        help="steps per run, warm-up included (default 200), or 'auto': stop each run once "
        "its median and mean step are known to ±5%% (30 to 2000 steps)",
    )
    @argument(
        "--warmup",
        type=int,
        default=10,
        help="warm-up steps per run left out of the statistics (default 10)",
    )
    @argument("--cache", type=int, default=20, help="batches cached for the ideal run (default 20)")
    @argument(
        "--cache-on",
        choices=["host", "device"],
        default="host",
        help="keep cached batches as produced (host) or on the GPU (device: also excludes the copy)",
    )
    @argument("--log-dir", default=None, help="also save both runs' JSON logs in this folder")
    @argument(
        "--no-live", action="store_true", help="no live plots (status, verdict and panel only)"
    )
    @argument(
        "--only",
        choices=["real", "ideal"],
        default=None,
        help="run only the real or only the ideal run",
    )
    @argument(
        "--quiet", action="store_true", help="show nothing; the result is in the variable _loadeval"
    )
    @argument(
        "--ladder",
        action="store_true",
        help="caching ladder: run the cell with batches cached on the GPU, in host memory, the "
        "real loader over cached samples, and the real loader; say which stage costs most",
    )
    @argument(
        "--sweep",
        default=None,
        metavar="SPEC",
        help='settings sweep, e.g. "num_workers=0,2,4; pin_memory=False,True": the real loop '
        "once per configuration (the ideal once), with the simulator's prediction beside each",
    )
    @cell_magic
    def loadeval(self, line: str, cell: str) -> None:
        """Run a training cell twice: with the real DataLoader, instrumented, then with a
        replayed cache of a few of its batches (loading for free), and say how much faster
        training would be with an ideal loader and where the time goes.

        Example::

            %%loadeval train_loader --steps 200 --warmup 10 --cache 20
            for images, labels in train_loader:
                train_step(model, images.to(device), labels.to(device))

        The cell must iterate the loader by that name. The result (a PairResult with
        ``.diagnosis``, ``.real``, ``.ideal``) is kept in ``_loadeval``.
        """
        args = parse_argstring(self.loadeval, line)
        if not cell.strip():
            raise UsageError(
                "The %%loadeval cell is empty; put the training loop that iterates the loader below it."
            )
        shell = self.shell
        if args.loader is None:
            names = find_loader_names(shell, cell)
            if len(names) != 1:
                found = f" (found {', '.join(names)})" if names else ""
                raise UsageError(
                    f"Name the loader to measure, e.g. %%loadeval train_loader: the cell must refer to exactly "
                    f"one DataLoader{found}."
                )
            args.loader = names[0]
        ref = LoaderRef(shell, args.loader)
        if not hasattr(ref.get(), "__iter__"):
            raise UsageError(
                f"{args.loader} is a {type(ref.get()).__name__}, not a loader; pass the DataLoader's name."
            )
        steps: Any = args.steps.strip().strip("'\"")
        if steps != "auto":
            try:
                steps = int(steps)
            except ValueError:
                raise UsageError(
                    f"--steps must be a number of steps or 'auto', not {args.steps!r}."
                ) from None
        if args.ladder and args.sweep:
            raise UsageError("Use --ladder or --sweep, not both: run them in two cells.")
        if args.only and (args.ladder or args.sweep):
            raise UsageError("--only applies to a pair; leave it out with --ladder or --sweep.")
        many = "--ladder" if args.ladder else "--sweep" if args.sweep else None
        if not args.only:
            try:
                if many:
                    refuse_one_shot(ref.get(), args.loader, f"{many} runs the cell several times")
                else:
                    refuse_one_shot(
                        ref.get(), args.loader, PAIR_NEEDS_TWO_PASSES,
                        "run one side alone with --only real or --only ideal",
                    )  # fmt: skip
            except LoadEvalError as e:
                raise UsageError(str(e)) from None
        if args.sweep:
            args.sweep = args.sweep.strip("'\"")
            try:
                prepare_sweep(ref.get(), args.sweep, args.loader)
            except LoadEvalError as e:
                raise UsageError(str(e)) from None
        settings = PairSettings(
            steps=steps,
            warmup=args.warmup,
            cache=args.cache,
            cache_on=args.cache_on,
            only=args.only,
            log_dir=args.log_dir,
        )
        try:
            settings.validate()
        except LoadEvalError as e:
            raise UsageError(
                str(e).replace("steps must", "--steps must").replace("warmup (", "--warmup (")
            ) from None
        session = _Session(shell, cell, ref, settings, args)
        global last_session
        last_session = session  # a ladder or sweep has no panel holding it; keep the latest
        session.show()
        result: Any
        if args.ladder:
            result = session.ladder()
        elif args.sweep:
            result = session.sweep(args.sweep)  # checked above
        else:
            result = session.first()
        if result.error is not None:
            if isinstance(result.error, LoadEvalError):
                raise UsageError(str(result.error)) from None
            raise result.error
