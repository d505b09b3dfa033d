"""``%loadeval_run [options] SCRIPT [ARGS...]``: ``python -m loadeval_nb run`` from a
notebook.

Thin: the command's own parser and checks read the options, the integrations' script
runner starts the child (one process measuring both sides interleaved; a fresh process
per side with ``--sequential``; torch's launcher for ranks) and says what it measured; the widgets follow the children's run logs live. The cell
waits in the runner, as it waits in ``%%loadeval``'s loop: a kernel interrupt (■) stops
every process of the script and is raised again. What the script prints, its traceback
included, shows in the cell (the kernel forwards its children's output).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import replace
from typing import Any, Optional

from IPython.core.error import UsageError

from ..core._shared import ARMS, interrupts_deferred
from ..core.errors import LoadEvalError
from ..core.explore import PairResult, RunSettings
from ..integrations import ScriptHooks, ScriptResult, Torchrun, run_script
from ..integrations._shared import (
    MEASURES,
    RUN_USAGE,
    RUN_VALUED,
    TUNABLE,
    check_target,
    describe_target,
    description,
    label_of,
    option_sentence,
    run_parser,
    save_script_report,
    script_settings,
    split_run,
)
from ._busy import reads_busy
from ._session import FIRST_LABEL, NotebookSession, rerun_label

USAGE = RUN_USAGE.replace("python -m loadeval_nb run", "%loadeval_run")
FAILED_COLOR = "#c62828"


def run_sentence(e: LoadEvalError) -> str:
    """The sentence, naming the option as the line spells it (``--cache``, not
    ``num_cached_batches``)."""
    return option_sentence(e, "%loadeval_run")


def take_view(argv: list[str]) -> tuple[list[str], Optional[str]]:
    """``--view NAME`` (the magic's own option, not the command's) taken out of the
    options before the script; the rest, and the view asked for (None: none)."""
    rest: list[str] = []
    view: Optional[str] = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--view" and i + 1 < len(argv):
            view, i = argv[i + 1], i + 2
        elif a.startswith("--view="):
            view, i = a.split("=", 1)[1], i + 1
        elif a in ("-m", "--", "-") or not a.startswith("-"):
            return rest + argv[i:], view  # the script and its own arguments
        elif a in RUN_VALUED:
            rest, i = rest + argv[i : i + 2], i + 2
        else:
            rest, i = rest + [a], i + 1
    return rest, view


def parse_line(
    line: str,
) -> Optional[tuple[Any, list[str], RunSettings, Optional[Torchrun], Optional[str]]]:
    """The line's options (the command's parser: the same options, checked the same way),
    the script with its arguments, the settings, the ranks and the ``--view`` asked for;
    None after ``-h``. A bad option or script: :class:`UsageError`, one sentence."""
    try:
        argv = shlex.split(line)
    except ValueError as e:
        raise UsageError(
            f"%loadeval_run could not split its line ({e}); close the quote."
        ) from None
    argv, view = take_view(argv)
    ours, target = split_run(argv)
    parser = run_parser("%loadeval_run")
    parser.usage = USAGE.replace("%", "%%")  # argparse formats the usage with %
    parser.description = description(
        ", with the live dashboard, then the verdict card and a rerun panel; the result is "
        "kept in _loadeval"
    )

    def refuse(message: str) -> None:
        raise UsageError(f"%loadeval_run: {message} (see %loadeval_run -h).")

    parser.error = refuse  # type: ignore[method-assign]
    try:
        args = parser.parse_args(ours)
    except SystemExit:  # -h printed the help
        return None
    try:
        check_target(target)
        settings, ranks = script_settings(args)
    except LoadEvalError as e:
        raise UsageError(run_sentence(e)) from None
    return args, target, settings, ranks, view


class ScriptSession(NotebookSession):
    """One ``%loadeval_run`` line: its script, its settings, its dashboard and reruns."""

    def __init__(
        self,
        shell: Any,
        args: Any,
        target: list[str],
        settings: RunSettings,
        ranks: Optional[Torchrun],
        view: str = "bokeh",
    ) -> None:
        self.args, self.target, self.view_kind = args, target, view
        self.settings, self.ranks = settings, ranks
        self.view: Any = None
        self.results: list[ScriptResult] = []
        self.created = time.monotonic()
        super().__init__(shell, keep=True)

    def _dashboard(self) -> Any:
        return self.view.dashboard if self.view is not None else None

    def _roots(self) -> list[Any]:
        return [self.view.box if self.view is not None else None, *super()._roots()]

    def _forget(self) -> None:
        self.view = None
        super()._forget()

    @property
    def name(self) -> str:
        return describe_target(self.target)

    def expected_runs(self) -> list[str]:
        """The lines the dashboard starts with: a pair's, or each local rank's."""
        if self.ranks is None:
            return ["real", "ideal"]
        if self.ranks.nnodes > 1:  # which ranks are this node's: their logs will say
            return []
        n = self.ranks.nproc_per_node
        return [f"{side} r{k}" for k in range(n) for side in ("real", "ideal")]

    # -- display ----------------------------------------------------------------------
    def show(self) -> None:
        from ..widgets._shared import FollowView

        self.view = FollowView(
            title=self.name,
            steps_per_run=self.settings.steps,
            names=self.expected_runs(),
            view=self.view_kind,
        )
        self.view.show()
        self._write_static()

    # -- runs ----------------------------------------------------------------------------
    def start(self) -> ScriptResult:
        return self.run({}, self.settings.num_cached_batches, FIRST_LABEL)

    def run(self, changes: dict[str, Any], cache: int, label: str) -> ScriptResult:
        """Run the script's pair with the training loader's ``changes`` and ``cache``
        batches cached; show it (live, then the verdict); keep it in ``_loadeval``."""
        self.n_pairs += 1
        settings = replace(self.settings, num_cached_batches=cache)
        dash = self.view.dashboard
        dash.pair_starting(label)
        dash.set_status(f"{label}: starting {self.name}")
        hooks = _Follow(self, label)
        try:
            with reads_busy(self.shell):
                result = run_script(
                    self.target,
                    settings,
                    ranks=self.ranks,
                    loader_index=self.args.loader,
                    loader_from=self.args.loader_from,
                    timeout_s=self.args.timeout,
                    prove_straggler=self.args.prove_straggler,
                    hooks=hooks,
                    loader_changes=changes,
                )
        except LoadEvalError as e:  # refused before anything ran (steps=auto with ranks)
            self.view.dashboard.set_status(f"{label}: {run_sentence(e)}", FAILED_COLOR)
            raise
        except KeyboardInterrupt:
            hooks.close()
            self.view.dashboard.set_status(
                f"{label}: stopped (kernel interrupt); every process of {self.name} was stopped.",
                FAILED_COLOR,
            )
            self.view.dashboard.widget.add_class("loadeval-failed")
            raise
        finally:
            hooks.close()
        with interrupts_deferred():  # _loadeval and the card, however often Stop is hit
            self.shell.user_ns["_loadeval"] = result
            self.results.append(result)
            self._show_result(result, settings, label)
        return result

    def _show_result(self, result: ScriptResult, settings: RunSettings, label: str) -> None:
        from ..viz._shared import pair_html, report_html

        dash = self.view.dashboard
        dash.widget.remove_class("loadeval-running")
        if result.diagnosis is not None:
            pair = as_pair(result, settings, label)
            dash.pair_done(pair)
            self.main_card = (pair_html(pair, dash.rows), result.diagnosis.text("cli"))
            if self.panel is None:
                self._add_panel(result)
        elif result.ranks is not None:
            facts = result.ranks.facts()
            dash.verdict.remove_class("loadeval-stale")
            dash.verdict.value = report_html(facts)
            dash.set_status(f"Done: {facts.headline}")
            self.main_card = (report_html(facts), result.ranks.text("cli"))
        else:
            dash.set_status(f"{label}: {result.error}", FAILED_COLOR)
            dash.widget.add_class("loadeval-failed")
            self.main_card = (report_html(result.facts()), result.error or "")
        for note in result.notes:
            print(f"loadeval_nb: note: {note}")
        if result.ok and self.args.out:
            title = f"%loadeval_run {' '.join(self.target)}"
            print(save_script_report(result, self.args.out, title))
        self._write_static()

    def _add_panel(self, result: ScriptResult) -> None:
        """The rerun panel: the script again, its training loader with other settings."""
        from ..widgets import RerunPanel

        info = result.real.loader_settings if result.real is not None else {}
        kind = str(info.get("type") or "")
        fixed = kind.split(".")[0] == "accelerate"
        self.panel = RerunPanel(
            {k: info.get(k) for k in TUNABLE},
            self.settings.num_cached_batches,
            self.rerun,
            rebuildable=not fixed,
            fixed_note=(
                "The training loader comes from accelerator.prepare(): only the cache size can "
                "change here; change the DataLoader the script prepares."
            ),
        )
        # torch's threads are the script's own business in its process
        self.panel.num_threads.layout.display = "none"
        self.view.dashboard.set_panel(self.panel.widget)

    def rerun(self, changes: dict[str, Any], cache: int) -> None:
        """ "Rerun pair": the script again, its training loader rebuilt with ``changes``."""
        changes = {k: v for k, v in changes.items() if k in TUNABLE}
        info = self.results[-1].real.loader_settings if self.results[-1].real else {}
        nw = changes.get("num_workers", info.get("num_workers"))
        label = rerun_label(self.n_pairs, nw, changes, cache)
        out = self.view.dashboard.errors
        out.clear_output()
        with out:  # the script's output, its traceback included, under the dashboard
            try:
                result = self.run(changes, cache, label)
            except LoadEvalError as e:
                print(f"loadeval_nb: {run_sentence(e)}")
                return
            except KeyboardInterrupt:  # stopped: the status line says so
                return
            if result.error is not None:
                print(f"loadeval_nb: {result.error}")


def as_pair(result: ScriptResult, settings: RunSettings, label: str) -> PairResult:
    """A script's pair as the dashboard shows a pair: its runs, verdict and settings (the
    card and the history row read these)."""
    return PairResult.from_runs(
        result.real,
        result.ideal,
        label=label,
        diagnosis=result.diagnosis,
        settings=settings,
        log_paths=result.log_paths,
        contended=result.contended,
        variant=result.variant,
    )


class _Follow(ScriptHooks):
    """Each side's logs followed while its processes run: found in the run's log folder
    by the run's name, streamed by a thread of their own, drawn whole when the side ends."""

    def __init__(self, session: ScriptSession, label: str) -> None:
        self.session, self.label = session, label
        self.ticker: Any = None
        self.folder: Any = None

    def side_started(self, which: str, log_dir: str, stamp: str) -> None:
        from ..core._shared import FolderFollower
        from ..widgets._shared import Ticker

        view = self.session.view
        if self.folder is None:
            self.folder = FolderFollower(
                log_dir, prefix=f"loadeval-{stamp}-{label_of(self.session.target)}-"
            )
            view.follow(self.folder)
        view.title = f"{self.label}: {MEASURES[which]}"
        view.dashboard.set_status(view.status_text())
        if self.ticker is None:
            self.ticker = Ticker(view)
            self.ticker.start()

    def side_ended(self, which: str, statuses: Any) -> None:
        view = self.session.view
        view.tick()  # before the runner removes a temporary log folder
        sides = ARMS if which == "pair" else (which,)  # every arm the pass may have run
        view.end([name for name in view.followers() if name.split(" ")[0] in sides])

    def close(self) -> None:
        if self.ticker is not None:
            self.ticker.stop()
            self.ticker = None
