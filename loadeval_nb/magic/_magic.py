"""``%%loadeval``: run a training cell over the real loader and over a replayed cache of a
few of its batches, interleaved in blocks within one epoch (``--sequential``: one after
the other).

Thin: it parses options, resolves the loader, and orchestrates the core
(``run_pair``) and the widgets (``Dashboard``, ``RerunPanel``).
"""

from __future__ import annotations

from typing import Any, Optional

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..core._shared import a_kind, said
from ..core.errors import LoadEvalError, OptionError
from ..core.explore import RunSettings, plan_run, prepare_sweep
from ..integrations._shared import (
    CELL,
    Target,
    arguments,
    check_log_to,
    flags,
    is_hf_trainer,
    is_lightning_datamodule,
    is_lightning_trainer,
    settings_from,
    target_for,
)
from ._busy import reads_busy
from ._cell import LoaderRef, find_callers, find_loader_names, find_names, trainers_made_in
from ._session import Session, sessions
from ._view import choose_view

FLAGS = flags(CELL)
"""The option behind each setting, so an error names what the user typed (the one
table's: ``integrations/_options.py``)."""


def _pair_arguments(func: Any) -> Any:
    """``%%loadeval``'s options that make its settings, from the one table, in its order
    (IPython's ``@argument`` for each)."""
    for names, keywords, _ in reversed(list(arguments(CELL))):
        func = argument(*names, **keywords)(func)
    return func


_latest: Optional[Session] = None


def latest_session() -> Optional[Session]:
    """The most recent ``%%loadeval`` session (its dashboard, panel and results); a ladder
    or a sweep has no panel holding it, so the latest is kept here."""
    return _latest


def stop_all() -> None:
    """Stop every dashboard's background thread (used when the extension is unloaded)."""
    for s in list(sessions):
        s.close()


def _usage(e: LoadEvalError) -> UsageError:
    """One sentence for the user, naming the option as they typed it."""
    if isinstance(e, OptionError):
        return UsageError(e.renamed(FLAGS.get(e.option, e.option)))
    return UsageError(str(e))


def _target(ref: LoaderRef, cell: str, shell: Any) -> Target:
    """What the cell's runs measure, and how each run's wrapper reaches the cell: bound to
    the loader's name, or handed out by a datamodule or a Hugging Face Trainer; a
    framework's ``fit`` / ``train`` in the cell runs as a clean, restored measurement
    (:func:`target_for`, as ``fit_pair`` and ``train_pair`` do)."""
    made = trainers_made_in(shell, cell)
    if made:
        raise UsageError(
            f"The cell makes {made[0]} and then trains it; make the Trainer in an earlier cell "
            f"and measure the cell that calls {made[0]}.fit(...) or {made[0]}.train(), so each "
            "run can start it afresh and put it back."
        )
    obj = ref.get()
    trainers = find_callers(shell, cell, "fit", is_lightning_trainer)
    if len(trainers) > 1:
        raise UsageError("The cell fits more than one Lightning Trainer; measure one per cell.")
    framework = is_hf_trainer(obj) or is_lightning_datamodule(obj)
    if not framework and not hasattr(obj, "__iter__"):
        raise UsageError(f"{ref.name} is {a_kind(obj)}, not a loader; pass the DataLoader's name.")
    try:
        return target_for(obj, ref.name, fit=trainers[0] if trainers else None, bind=ref.bound)
    except LoadEvalError as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # the datamodule's own setup or train_dataloader() failed
        raise UsageError(
            f"{ref.name}.train_dataloader() failed after setup('fit') "
            f"({type(e).__name__}: {e}); pass the training DataLoader's name instead."
        ) from None


def _unquote(text: str) -> str:
    return text.strip().strip("'\"")


@magics_class
class LoadEvalMagics(Magics):
    """The ``%%loadeval`` cell magic, and the ``%loadeval_run`` and ``%loadeval_watch`` line
    magics (a script, unmodified, measured from the notebook; a job followed from its run
    logs)."""

    @line_magic
    def loadeval_run(self, line: str) -> None:
        """Measure a training script as it is, as ``python -m loadeval_nb run`` does, with
        the live dashboard, the verdict card and a rerun panel::

            %loadeval_run [options] SCRIPT [ARGS...]
            %loadeval_run [options] -m MODULE [ARGS...]

        A fresh process runs the script once, its training DataLoader's real batches and
        its first batches replayed from memory (the ideal) interleaved in blocks
        (``--sequential``: a fresh process for each side, the real run, then the ideal
        run); its output shows here. The options are the command's (``%loadeval_run -h``
        lists them): ``--steps``, ``--warmup``, ``--cache``, ``--cache-on``,
        ``--log-dir``, ``--log-to``, ``-o``, ``--loader``, ``--sequential``, ``--timeout``, ``--nproc-per-node`` (torch's launcher, one line
        per rank), ``--nnodes``, ``--rdzv-endpoint``, ``--rdzv-id``; everything from
        SCRIPT on is the script's. The result (a ScriptResult: ``.diagnosis``, ``.real``,
        ``.ideal``, or ``.ranks``) is kept in ``_loadeval``. A script that fails says so in
        one sentence under its own traceback; interrupting the kernel stops every process
        of the script.
        """
        from ._script import ScriptSession, parse_line, run_sentence

        request = parse_line(line)
        if request is None:  # -h
            return
        args, target, settings, ranks, view = request
        view = choose_view(view, self.shell)
        session = ScriptSession(self.shell, args, target, settings, ranks, view)
        try:
            with reads_busy(self.shell):
                session.show()
                result = session.start()
        except LoadEvalError as e:  # refused before the script ran
            raise UsageError(run_sentence(e)) from None
        if result.error is not None:
            raise UsageError(result.error)

    @magic_arguments()
    @argument("dir", help="the folder the job writes its run logs to (its --log-dir)")
    @argument(
        "--timeout",
        type=float,
        default=None,
        help="stop watching after this many seconds and show what is there (default: "
        "until every side of every rank has its whole run)",
    )
    @argument(
        "--view",
        default=None,
        metavar="bokeh|html",
        help="the live view: bokeh (plots) or html (a chart redrawn about once a second, "
        "needs no widget JavaScript); default: $LOADEVAL_VIEW, else the one that works here",
    )
    @line_magic
    def loadeval_watch(self, line: str) -> None:
        """Follow a job started elsewhere (a torchrun job, a script) from the run logs it
        writes in DIR: one line per rank and side, live, until every side of every rank
        has its whole run (or ``--timeout``, or a kernel interrupt: the watch stops, the
        job goes on); then the gathered ranks' report, or the verdict of a single pair.
        ``--view html`` draws it without jupyter_bokeh's widget JavaScript.
        Only the job written since the watch began is followed. The result is kept in
        ``_loadeval``::

            %loadeval_watch runs/ --timeout 600
        """
        from ._watch import watch

        args = parse_argstring(self.loadeval_watch, line)
        watch(self.shell, _unquote(args.dir), args.timeout, choose_view(args.view, self.shell))

    @magic_arguments()
    @argument(
        "loader",
        nargs="?",
        default=None,
        help="the DataLoader's name in the notebook, or a dotted path (trainer.train_loader); "
        "optional when the cell refers to exactly one DataLoader",
    )
    @_pair_arguments
    @argument(
        "--no-live", action="store_true", help="no live plots (status, verdict and panel only)"
    )
    @argument(
        "--view",
        default=None,
        metavar="bokeh|html|text",
        help="the live view: bokeh (plots, needs jupyter_bokeh's widget JavaScript), html "
        "(a chart redrawn about once a second, needs no widget JavaScript: VS Code, Colab) "
        "or text (a line that updates, a terminal IPython); default: $LOADEVAL_VIEW, else "
        "the one that works where the cell runs",
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
        ``.diagnosis``, ``.real``, ``.ideal``) is kept in ``_loadeval``. ``--view`` (or
        ``$LOADEVAL_VIEW``) picks the live view; by default the one that works where the
        cell runs (html in VS Code and Colab, text in a terminal IPython, else bokeh).
        """
        args = parse_argstring(self.loadeval, line)
        view = choose_view(args.view, self.shell)
        session = self._request(args, cell, view)
        global _latest
        _latest = session
        try:
            with reads_busy(self.shell):  # JupyterLab shows Busy until the cell ends
                session.show()
                result = session.start()
        except LoadEvalError as e:  # refused before anything ran (the cache, a path)
            raise _usage(e) from None
        if result.error is not None:
            if isinstance(result.error, LoadEvalError):
                raise _usage(result.error) from None
            raise result.error

    def _request(self, args: Any, cell: str, view: str = "bokeh") -> Session:
        """Check everything the cell asked for, once, before anything runs; a session
        holding the checked settings (and a sweep's built loaders)."""
        if not cell.strip():
            raise UsageError(
                "The %%loadeval cell is empty; put the training loop that iterates the loader below it."
            )
        shell = self.shell
        if args.loader is None:
            names = (
                find_loader_names(shell, cell)
                or find_names(shell, cell, is_lightning_datamodule)
                or find_names(shell, cell, is_hf_trainer)
            )
            if len(names) != 1:
                found = f" (found {', '.join(names)})" if names else ""
                raise UsageError(
                    f"Name the loader to measure, e.g. %%loadeval train_loader: the cell must refer to exactly "
                    f"one DataLoader{found}."
                )
            args.loader = names[0]
        target = _target(LoaderRef(shell, args.loader), cell, shell)
        loader = target.loader
        if args.ladder and args.sweep:
            raise UsageError("Use --ladder or --sweep, not both: run them in two cells.")
        kind = "ladder" if args.ladder else "sweep" if args.sweep else "pair"
        try:
            try:
                settings = settings_from(args, CELL, _unquote)
            except OptionError:  # what the loader is comes first, then the numbers
                plan_run(kind, loader, RunSettings(only=args.only), loader_name=args.loader,
                         spelling="options")  # fmt: skip
                raise
            # the run's checks, once, in the magic's words; the runner does not repeat them
            settings = plan_run(kind, loader, settings, loader_name=args.loader, spelling="options")
            if settings.log_to and kind != "pair":
                raise UsageError(f"--log-to writes a pair's verdict; leave it out with --{kind}.")
            if settings.variants and kind != "pair":
                raise UsageError(
                    f"--try measures a variant in a pair's pass; leave it out with --{kind} "
                    "(a sweep measures each setting it is given)."
                )
            check_log_to(
                settings.log_to,
                "--log-to",
                trainer=target.trainer,
                no_trainer="the cell trains no Lightning or Hugging Face Trainer",
            )
            plan = prepare_sweep(loader, _unquote(args.sweep), args.loader) if args.sweep else None
            if settings.auto and target.no_auto:
                raise UsageError(said(target.no_auto, "options"))
        except LoadEvalError as e:
            raise _usage(e) from None
        return Session(
            shell,
            cell,
            target,
            settings,
            live=not args.no_live,
            view=view,
            quiet=args.quiet,
            ladder=args.ladder,
            sweep=plan,
        )
