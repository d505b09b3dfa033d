"""``run_script``: a training script, unmodified, measured as a real + ideal pair, one
fresh child process per side (or one child measuring both interleaved), on one process
or on torchrun's ranks; the parent reads what the children wrote (their run logs and
status files) and is never in their process group."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

from ....core._shared import (
    NVML_SAID_ENV,
    TUNABLE,
    Reported,
    check_writable_dir,
    nothing_advised,
    sweep_locks,
    write_text_atomic,
)
from ....core.errors import LoadEvalError, OptionError, RunLogError
from ....core.explore import RunSettings
from ....core.measure import Variant, gpu_status
from ....core.ranks import RanksResult, gather_logs, proof_path
from ....core.record import Run, load_run
from ....core.verdict import Diagnosis, Facts, diagnose
from ...trackers import check_log_to, log_result
from ..loaders import parse_loader_from
from ..spec import ENV, ChildSpec, ChildStatus, read_statuses
from ..words import describe_target, side_words, timed_out_sentence
from .launch import Ended, LauncherRank, Torchrun, command, run_side, wait_until
from .options import SCRIPT_TRAINER

"""The training loader's settings a run may change (``run_script(loader_changes=...)``,
the notebook's rerun panel): ``rebuild_loader``'s, which core keeps to itself."""

DEFAULT_TIMEOUT_S = 1800.0
"""How long one side may run before its steps are measured (a hung script, a deadlock
between ranks) before it is stopped."""
GATHER_S = 300.0
"""Under a launcher, how long rank 0 waits for the other ranks' logs once its own are
written (``gather_pair``'s wait for the ranks, from outside the process group)."""


class ScriptHooks:
    """Callbacks around each child (a notebook follows the child's logs in ``log_dir``);
    ``which`` is what the child measures: ``"real"``, ``"ideal"`` or ``"pair"``."""

    def side_started(self, which: str, log_dir: str, stamp: str) -> None:
        pass

    def side_ended(self, which: str, statuses: dict[str, ChildStatus]) -> None:
        pass


@dataclass
class ScriptResult(Reported):
    """What ``run_script`` found: the runs (or every rank's, gathered), the verdict, or
    the one sentence that says why there is none. Plain data: no process, no wrapper.
    Shown as every result is (``text()``, ``print``, IPython's display), from
    :meth:`facts`."""

    target: list[str]
    label: str
    log_dir: str
    log_paths: dict[str, str] = field(default_factory=dict)
    """``{"real": path, "ideal": path}``, or per rank ``{"real-rank0": path, ...}``."""
    real: Optional[Run] = None
    ideal: Optional[Run] = None
    contended: Optional[Run] = None
    """The contended arm's run, where the pass had it (its headroom split is in the
    diagnosis)."""
    variant: Optional[Run] = None
    """The variant arm's run (``--try``), where the pass had it (its gain is in the
    diagnosis)."""
    diagnosis: Optional[Diagnosis] = None
    ranks: Optional[RanksResult] = None
    error: Optional[str] = None
    """Why there is no verdict, in one sentence."""
    failed: Optional[str] = None
    """The child that failed: ``"real"``, ``"ideal"`` or ``"pair"`` (both interleaved)."""
    notes: list[str] = field(default_factory=list)
    """What the user should know beside the verdict (the script ended a pass itself, a
    process that had to be stopped)."""
    rank: Optional[int] = None
    """This process's rank, when the user's own launcher started it as one rank of a job
    (``launcher``): rank 0's result holds the ranks', another rank's its own pair."""
    exit_code: Optional[int] = None
    """Under a launcher, the status this rank exits with when it has no verdict: the
    script's own (``128 + n`` for signal ``n``), 1 where the script did not fail."""

    @property
    def ok(self) -> bool:
        return self.error is None and (self.diagnosis is not None or self.ranks is not None)

    def facts(self) -> Facts:
        if self.ranks is not None:
            return self.ranks.facts()
        if self.diagnosis is not None:
            return self.diagnosis.facts()
        return Facts(kind="verdict", title=self.label, headline=self.error or "no verdict")

    # IPython takes a class's own __repr__ (the dataclass's) before an inherited
    # _repr_pretty_: the tail's, named here, so that the display is the text
    _repr_pretty_ = Reported._repr_pretty_


def label_of(target: Sequence[str]) -> str:
    """The script's name in its log names (``train`` for ``train.py``)."""
    path = os.path.normpath(target[0]) if target[0] != "-m" else ""
    name = target[1] if target[0] == "-m" else os.path.splitext(os.path.basename(path))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "script"


def check_target(target: Sequence[str]) -> None:
    """One sentence for a script that cannot be run, before anything starts."""
    if not target or (target[0] == "-m" and len(target) < 2):
        raise LoadEvalError(
            "Name the script to run: python -m loadeval_nb run [options] SCRIPT [ARGS...], or "
            "-m MODULE [ARGS...]."
        )
    if target[0] == "-m":
        return
    if os.path.isdir(target[0]):
        if not os.path.isfile(os.path.join(target[0], "__main__.py")):
            raise LoadEvalError(
                f"{target[0]!r} is a folder without a __main__.py; pass a Python script, a "
                "folder with a __main__.py, or -m MODULE for a module."
            )
    elif not os.path.isfile(target[0]):
        raise LoadEvalError(
            f"No script at {target[0]!r}; pass the path of a Python script, or -m MODULE for a "
            "module."
        )


def check_cache_on(settings: RunSettings) -> None:
    """``--cache-on device`` without CUDA: one sentence before the script starts (torch is
    imported here only for that option)."""
    if settings.cache_on != "device":
        return
    import torch

    if not torch.cuda.is_available():
        raise OptionError(
            "cache_on",
            " device needs a CUDA device, and this machine has none; leave it out (the cache is "
            "then in host memory).",
        )


def run_script(
    target: Sequence[str],
    settings: Optional[RunSettings] = None,
    *,
    ranks: Optional[Torchrun] = None,
    loader_index: Optional[int] = None,
    interleave: Optional[bool] = None,
    timeout_s: Optional[float] = DEFAULT_TIMEOUT_S,
    hooks: Optional[ScriptHooks] = None,
    env: Optional[dict[str, str]] = None,
    loader_changes: Optional[dict[str, Any]] = None,
    loader_from: Optional[str] = None,
    launcher: Optional[LauncherRank] = None,
    prove_straggler: bool = False,
) -> ScriptResult:
    """Measure the training script ``target`` (``[SCRIPT, ARGS...]`` or ``["-m", MODULE,
    ARGS...]``) as it is: one child process runs it with its training loader measured
    as the pair, the real loader's batches and replayed ones in blocks within one pass
    (``interleave``, default ``settings.interleave``, True; a loader too short for blocks
    is measured on the script's own epochs, real, ideal, ideal, real, or, where it has too
    few, a child per side in turn, and a note says so); ``interleave=False``: a fresh
    child per side, the real run, then the ideal run.
    ``ranks`` launches each side with ``torch.distributed.run``. ``loader_index`` picks
    the ``loader_index``-th distinct DataLoader the script iterates instead of the rule (see
    ``docs/scripts.md``). ``settings.log_dir`` keeps the run logs (default: a temporary
    folder, removed). ``loader_changes`` (``num_workers``, ``pin_memory``,
    ``prefetch_factor``, ``persistent_workers``) measures a copy of the training loader
    with those settings instead (``rebuild_loader``'s; the notebook's rerun panel).
    ``loader_from`` (``MODULE:NAME``) names the loader to measure, any iterable (its class,
    or the object), where the rule finds only the loaders ``docs/scripts.md`` lists.
    ``launcher`` (:func:`~.launch.launcher_rank`): this process is one rank of the user's
    own launcher's job; its one child measures the pair with the rank's environment (its
    process group is the job's), every rank writes its logs to the folder they share, and
    rank 0 waits (at most :data:`GATHER_S`, or ``timeout_s`` if shorter) for the other
    ranks' and gathers them (``docs/torchrun.md``). ``prove_straggler`` (under
    ``launcher`` or ``ranks``, interleaved): after the pair, in the same pass of the
    script's loop, the ranks' suspect is put to the straggler proof (its loader freed
    in some blocks, the runner-up's in others); the gathered report carries it
    (``result.ranks.proof``).

    Raises :class:`LoadEvalError` for a bad option or script path, before anything
    runs; a script that fails, exits or never iterates a DataLoader comes back as the
    result's ``error`` (one sentence). Ctrl-C stops every process of the side and is
    re-raised.
    """
    target = list(target)
    check_target(target)
    settings = settings or RunSettings()
    if settings.variants and settings.variant is None:  # --try advice: two passes
        if ranks is not None or launcher is not None or prove_straggler:
            raise OptionError(
                "variants",
                "=advice runs the script twice (a pass to advise, one to measure the advice); "
                "under ranks, give the setting itself (--try num_workers=N).",
            )
        return _advised(
            settings,
            functools.partial(
                run_script,
                target,
                interleave=interleave,
                timeout_s=timeout_s,
                hooks=hooks,
                env=env,
                loader_index=loader_index,
                loader_changes=loader_changes,
                loader_from=loader_from,
            ),
        )
    _check_options(
        settings, ranks, loader_index, interleave, timeout_s, loader_changes, loader_from,
        launcher, prove_straggler,
    )  # fmt: skip
    changes = dict(loader_changes or {})
    if interleave is not None:
        settings = replace(settings, interleave=interleave)
    keep = bool(settings.log_dir) or launcher is not None  # (the job's folder is shared)
    log_dir = settings.log_dir or (
        launcher.default_log_dir() if launcher else tempfile.mkdtemp(prefix="loadeval-run-")
    )
    if keep:
        check_writable_dir(log_dir, "--log-dir")
    multi = ranks is not None and ranks.nnodes > 1
    stamp = (
        re.sub(r"[^A-Za-z0-9_.-]+", "_", str(ranks.rdzv_id))
        if multi and ranks is not None
        else launcher.job
        if launcher is not None
        else time.strftime("%Y%m%d-%H%M%S")
    )
    label = label_of(target)
    result = ScriptResult(target=target, label=label, log_dir=log_dir)
    if launcher is not None:
        result.rank = launcher.rank
        with contextlib.suppress(FileNotFoundError):  # an earlier run's, of the same job id
            os.unlink(ended_path(log_dir, stamp, label, launcher.rank))
    # the children's settings, whole: their log folder is this one (a temporary one
    # without --log-dir, which ``temporary`` tells them)
    child = replace(settings, log_dir=log_dir)
    rest = (
        not keep, timeout_s, hooks or ScriptHooks(), env, changes, loader_from, launcher,
        prove_straggler,
    )  # fmt: skip
    refused = False  # the job's one plan refused the pass: every rank says so, none waits
    kept: list[ChildStatus] = []  # a real epoch the interleaved child kept, if any
    try:
        why = _run_sides(result, child, stamp, ranks, loader_index, *rest, kept=kept)
        if why is not None and (launcher is not None or prove_straggler):  # one pass only
            result.error, result.failed = _once(why, prove_straggler, launcher), "pair"
            result.exit_code = 1
            refused = launcher is not None
        elif why is not None:  # the child found the pass too short for blocks: in turn, said
            result.notes.append(_in_turn(why, describe_target(result.target), bool(kept)))
            _run_sides(
                result,
                replace(child, interleave=False, variants=()),
                stamp,
                ranks,
                loader_index,
                *rest,
                kept=kept,
            )
        if settings.variant is not None and not _variant_measured(result) and result.ok:
            result.notes.append(
                f"the variant ({settings.variant.words}) was not measured: it is served only "
                "in a pass of interleaved blocks, and this loader's epoch is too short for them"
            )
        if launcher is not None and not refused:
            _end_rank(result, launcher, stamp, min(GATHER_S, timeout_s or GATHER_S))
        if prove_straggler and result.ranks is not None:
            _add_proof(result)
    finally:
        kept = result.error is not None and bool(result.log_paths)
        if not keep and not kept:  # a failure's partial logs stay where its sentence says
            shutil.rmtree(log_dir, ignore_errors=True)
            result.log_paths = {}
        if refused and not settings.log_dir:  # the job's own folder, with no run log in it
            _remove_if_no_logs(log_dir)
        if (
            launcher is not None
            and launcher.rank == 0
            and not settings.log_dir
            and (result.ok and result.ranks is not None)
        ):  # every rank has ended and the report is read: the job's temporary folder goes
            shutil.rmtree(log_dir, ignore_errors=True)
            result.log_paths = {}
        # a child stopped or killed with its log open may have left its lock file (held a
        # moment longer by its workers, which share it): swept, waiting a little for them
        stopped = result.error is not None or sys.exc_info()[0] is not None
        sweep_locks(wait_s=2.0 if stopped else 0.0)
    # a tracker that fails is a note: the run stands (under a launcher, rank 0 writes)
    if settings.log_to and result.ok and not result.rank:
        result.notes += log_result(result, settings)
    return result


def _variant_measured(result: ScriptResult) -> bool:
    """The variant arm was measured: in the pair, or on any of the ranks."""
    if result.variant is not None:
        return True
    ranks = result.ranks
    return ranks is not None and any(r.variant for r in ranks.ranks)


def _advised(settings: RunSettings, again: Callable[[RunSettings], ScriptResult]) -> ScriptResult:
    """``--try advice``: the script run once without a variant (``again``), then, where its
    advice names a setting, once more with that setting as the variant arm; the second
    run's result (its verdict saying the first advised it), or the first's."""
    first = again(replace(settings, variants=()))
    d = first.diagnosis
    if d is None or not d.advised:
        if d is not None:
            d.notes.append(nothing_advised(d))  # as the notebook's pair says it
        return first
    second = again(replace(settings, variants=(Variant.of(d.advised),)))
    if second.diagnosis is not None and second.diagnosis.tried is not None:
        second.diagnosis.tried.advised = True
    return second


def _check_options(
    settings: RunSettings,
    ranks: Optional[Torchrun],
    loader_index: Optional[int],
    interleave: Optional[bool],
    timeout_s: Optional[float],
    loader_changes: Optional[dict[str, Any]],
    loader_from: Optional[str],
    launcher: Optional[LauncherRank],
    prove_straggler: bool,
) -> None:
    """:func:`run_script`'s options checked before anything runs: one sentence for the
    first that is wrong."""
    if loader_index is not None and (
        isinstance(loader_index, bool) or not isinstance(loader_index, int) or loader_index < 1
    ):
        raise OptionError(
            "loader_index", f" must be a loader's number from 1, not {loader_index!r}."
        )
    if settings.repeat != 1 or settings.only is not None:
        raise LoadEvalError("repeat and only do not apply to a script's run; leave them out.")
    if launcher is not None:
        _check_launcher(launcher, ranks, settings)
    if interleave is not None:
        settings = replace(settings, interleave=interleave)
    if prove_straggler:
        _check_proof(launcher, ranks, settings)
    if (ranks is not None or launcher is not None) and settings.auto:
        raise OptionError(
            "steps",
            "='auto' stops each rank on its own, which desynchronises the ranks' collectives; "
            "pass a number of steps.",
        )
    if loader_from is not None:
        parse_loader_from(loader_from)
    unknown = sorted(set(loader_changes or {}) - set(TUNABLE))
    if unknown:
        raise LoadEvalError(
            f"Cannot change {', '.join(unknown)} on a script's loader; only "
            f"{', '.join(TUNABLE)} can be changed."
        )
    check_cache_on(settings)
    check_log_to(settings.log_to, no_trainer=SCRIPT_TRAINER)
    if timeout_s is not None and not timeout_s > 0:
        raise OptionError("timeout", f" must be a number of seconds > 0, not {timeout_s!r}.")


def _remove_if_no_logs(folder: str) -> None:
    """Remove ``folder`` (the default folder of a job under the user's launcher) if it is
    empty: a pass the job's plan refused leaves nothing for a sentence to name. Every rank
    of the node may try at once; only an empty folder goes (another rank's file in it, a
    run log or a probe of the folder, keeps it)."""
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def _check_launcher(
    launcher: LauncherRank, ranks: Optional[Torchrun], settings: RunSettings
) -> None:
    """One sentence for what a rank of the user's launcher cannot do, before it starts."""
    here = f"This is rank {launcher.rank} of the {launcher.world_size} your launcher started"
    if ranks is not None:
        raise LoadEvalError(
            f"{here}; leave out --nproc-per-node and --nnodes (your launcher starts the ranks)."
        )
    if not settings.interleave:
        raise LoadEvalError(
            f"{here}, and each rank runs the script once, in the job's process group; leave out "
            "--sequential (the sides are measured interleaved, in that one run)."
        )
    if launcher.own_folders and not settings.log_dir:
        raise LoadEvalError(
            f"{here}, on one of several machines; pass --log-dir a folder every rank can "
            "write to and rank 0 can read (a shared disk), for rank 0 to gather their logs."
        )


def _once(why: str, prove_straggler: bool = False, launcher: Optional[LauncherRank] = None) -> str:
    """The sentence for a pass too short for blocks under a launcher (the sides cannot be
    measured in turn, since each rank runs the script once), or for the pair and the
    straggler proof (one pass holds both)."""
    if prove_straggler:
        return (
            f"Cannot measure the pair and prove a straggler in one pass: {why}; give the "
            "script's training pass more batches, or pass fewer --steps or --cache."
        )
    return (
        f"Cannot interleave: {why}; under your launcher each rank runs the script once, so "
        "give its training pass more batches or pass fewer --steps or --cache, or measure it "
        "with --nproc-per-node instead of your launcher (a run per side)."
    )


def _add_proof(result: ScriptResult) -> None:
    """The proof's file among the run logs (rank 0 wrote it beside its real log), or the
    note that says there is none."""
    real = result.log_paths.get("real-rank0")
    path = proof_path(real) if real else None
    if path is not None and result.ranks is not None and result.ranks.proof is not None:
        result.log_paths["proof"] = path
    else:
        result.notes.append(NO_PROOF)


NO_PROOF = (
    "no straggler proof was written (a rank could not make it: its line on stderr says "
    "why, or the script stopped the pass before the proof's last block)"
)
"""The note for a run asked to prove a straggler whose proof is missing."""


def _check_proof(
    launcher: Optional[LauncherRank], ranks: Optional[Torchrun], settings: RunSettings
) -> None:
    """One sentence for ``--prove-straggler`` where there are no ranks to prove, before
    anything starts."""
    if launcher is None and ranks is None:
        raise OptionError(
            "prove_straggler",
            " needs ranks: run the command under your launcher (torchrun --nproc-per-node 2 "
            "-m loadeval_nb run --prove-straggler SCRIPT), or pass --nproc-per-node 2 or more.",
        )
    world = launcher.world_size if launcher is not None else 0
    if ranks is not None:
        world = ranks.nproc_per_node * ranks.nnodes
    if world < 2:
        raise OptionError(
            "prove_straggler",
            f" needs two ranks or more to tell a straggler from the others, and this job has "
            f"{world}; leave it out, or run more ranks.",
        )
    if not settings.interleave:
        raise OptionError(
            "prove_straggler",
            " runs the proof in the pass that measures the pair, interleaved; leave out "
            "--sequential.",
        )


def rank_exit_code(ended: Ended, statuses: dict[str, ChildStatus]) -> int:
    """A rank's exit status for a side that failed, as the docs' table has it under every
    launcher: the script's own ``sys.exit(n)`` code where it exited with one, else 1 (a
    failure, a crash, a refusal, a ``--timeout``: the sentence says which). 128 + n is the
    command's own, for a signal it was sent (not its child's)."""
    if not ended.timed_out:
        for st in statuses.values():
            code = st.exit_code
            if st.outcome == "script-exited" and isinstance(code, int) and 0 < code < 128:
                return code
    return 1


def ended_path(log_dir: str, stamp: str, label: str, rank: int) -> str:
    """The file a rank of the user's launcher writes beside its run logs once its run has
    ended (``loadeval-JOB-LABEL-rank1.ended``): the logs it wrote, or why there are none."""
    return os.path.join(log_dir, f"loadeval-{stamp}-{label}-rank{rank}.ended")


def _read_ended(path: str) -> Optional[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None  # not there yet (written whole, by a rename)
    return value if isinstance(value, dict) else None


def _another_rank_failed(
    launcher: Optional[LauncherRank], log_dir: str, stamp: str, label: str
) -> Optional[Callable[[], Optional[str]]]:
    """Under the user's launcher: what tells this rank, while its side runs, that another
    rank of the job has ended without measuring anything (it says so at once, beside its
    logs: :func:`_end_rank`), so that this one stops waiting for it in a collective until
    its ``--timeout``; None otherwise."""
    if launcher is None:
        return None

    def failed() -> Optional[str]:
        for r in range(launcher.world_size):
            if r != launcher.rank:
                value = _read_ended(ended_path(log_dir, stamp, label, r))
                if value is not None and value.get("error"):
                    error = str(value["error"]).rstrip(".")
                    return f"No ranks' report, since rank {r} measured nothing: {error}"
        return None

    return failed


def _read_pair(result: ScriptResult, logs: dict[str, str]) -> None:
    """One process's pair read back from its logs (``{"real": path, ...}``): every arm the
    pass ran, and the verdict."""
    result.real, result.ideal = load_run(logs["real"]), load_run(logs["ideal"])
    result.contended = load_run(logs["contended"]) if "contended" in logs else None
    result.variant = load_run(logs["variant"]) if "variant" in logs else None
    result.diagnosis = diagnose(
        result.real, result.ideal, contended=result.contended, variant=result.variant
    )


def _end_rank(result: ScriptResult, launcher: LauncherRank, stamp: str, wait_s: float) -> None:
    """Under the user's launcher, once this rank's run has ended: say so beside its logs;
    rank 0 then waits at most ``wait_s`` for every other rank to have said so and gathers
    their logs (the ranks' report), another rank reads its own pair."""
    log_dir, label = result.log_dir, result.label
    own = {k.split("-rank")[0]: p for k, p in result.log_paths.items()}
    if launcher.rank != 0 and result.error is None:  # its own pair, for its own line
        result.real, result.ideal = load_run(own["real"]), load_run(own["ideal"])
        _read_pair(result, own)
    write_text_atomic(
        ended_path(log_dir, stamp, label, launcher.rank),
        json.dumps(
            {
                "rank": launcher.rank,
                "error": result.error,
                "logs": {side: os.path.basename(p) for side, p in own.items()},
            }
        ),
    )
    if result.error is not None or launcher.rank != 0:
        return
    ended: dict[int, dict[str, Any]] = {}

    def all_ended() -> bool:
        for r in range(1, launcher.world_size):
            if r not in ended:
                value = _read_ended(ended_path(log_dir, stamp, label, r))
                if value is None:
                    return False
                ended[r] = value
        return True

    if not wait_until(all_ended, wait_s):
        missing = [r for r in range(1, launcher.world_size) if r not in ended]
        result.error, result.exit_code = _missing(missing, log_dir, wait_s, launcher), 1
        return
    failed = {r: v for r, v in ended.items() if v.get("error")}
    if failed:
        r = min(failed)
        result.error = f"No ranks' report, since rank {r} measured nothing: {failed[r]['error']}"
        result.exit_code = 1
        return
    found = dict(result.log_paths)
    for r, value in ended.items():
        for side, name in value.get("logs", {}).items():
            found[f"{side}-rank{r}"] = os.path.join(log_dir, name)
    result.log_paths = dict(sorted(found.items(), key=lambda kv: kv[0].replace("ideal", "~")))
    result.ranks = gather_logs(list(result.log_paths.values()))


def _missing(missing: list[int], log_dir: str, wait_s: float, launcher: LauncherRank) -> str:
    """The sentence for ranks whose run had not ended when rank 0 stopped waiting."""
    many = len(missing) > 1
    names = ", ".join(map(str, missing))
    return (
        f"Rank{'s' if many else ''} {names} of {launcher.world_size} had not written "
        f"{'their' if many else 'its'} run logs to {log_dir} {wait_s:g} s after rank 0 "
        f"had written its own, so there is no ranks' report (ranks on other machines need a "
        f"--log-dir they share; python -m loadeval_nb ranks {log_dir} gathers the logs that "
        "are there)."
    )


def _steps_measured(s: ChildStatus) -> bool:
    """A child's steps are measured: the pair's, or the real side's alone."""
    return s.outcome == "measured" or (s.outcome == "not-interleavable" and bool(s.log_paths))


def _in_turn(why: str, name: str = "the script", kept: bool = False) -> str:
    if kept:  # the script's own run measured the real side: one more run for the ideal
        return (
            f"{why}, so that run of {name} measured the real run, and a second run measured "
            "the ideal run (stopped after its steps); a drift of the machine between the "
            f"two is in the difference. {name} ran twice: what it wrote last (checkpoints, "
            "logs) may come from the second run, which trained on the cached batches "
            "replayed"
        )
    return (
        f"{why}, so a child per side measured the real run, then the ideal run (each within "
        "one epoch of the loader), and a drift of the machine between them is in the "
        f"difference. {name} ran three times (the first run, then one a side): what it wrote "
        "last (checkpoints, logs) comes from the ideal side's run, which trained on the "
        "cached batches replayed"
    )


STATUS_PREFIX = "loadeval-status-"
"""The children's status folders in TMPDIR: ``loadeval-status-PID-XXXX``, PID the command's."""


def sweep_status_dirs() -> None:
    """Remove the status folders whose command is gone (killed with SIGKILL, it could not
    remove its own): nothing of a run is left in TMPDIR but the folders a sentence names."""
    folder = tempfile.gettempdir()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = re.match(re.escape(STATUS_PREFIX) + r"(\d+)-", name)
        if m is None or int(m.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # its command is alive (or another user's: not ours to remove)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
        except OSError:
            continue


def _run_sides(
    result: ScriptResult,
    settings: RunSettings,
    stamp: str,
    ranks: Optional[Torchrun],
    loader_index: Optional[int],
    temporary: bool,
    timeout_s: Optional[float],
    hooks: ScriptHooks,
    env: Optional[dict[str, str]],
    changes: dict[str, Any],
    loader_from: Optional[str] = None,
    launcher: Optional[LauncherRank] = None,
    prove_straggler: bool = False,
    kept: Optional[list[ChildStatus]] = None,
) -> Optional[str]:
    """Measure the sides with ``settings`` (``settings.interleave``: the pair in one child,
    else a child per side; ``settings.log_dir``: the folder the children write to); the
    reason, when the child found the training pass too short to interleave (the caller
    then measures the sides in turn), else None. ``kept``: the interleaved child's status
    that kept a real epoch, put there by the first call; the second (in turn) takes its
    real log from it and runs the ideal side alone."""
    name = describe_target(result.target)
    log_dir = str(settings.log_dir)
    local = ranks.nproc_per_node if ranks is not None else 1
    picks: dict[str, list[int]] = {}
    expect: dict[str, dict[str, Any]] = {}
    found: dict[str, str] = {}
    gpu_status()  # why there are no GPU readings, said once here, not by every child
    sweep_status_dirs()  # those of a command killed before it could remove them
    sides: tuple[str, ...] = ("pair",) if settings.interleave else ("real", "ideal")
    if not settings.interleave and kept:  # the real side is the first run's, every rank's
        sides = ("ideal",)
        for st in kept:
            found[f"real-rank{st.rank}" if st.rank else "real"] = st.log_paths["real"]
            picks[st.rank] = [st.loader_index or 1, st.pass_index or 1]
            expect[st.rank] = st.loader_settings
    for which in sides:
        status_dir = tempfile.mkdtemp(prefix=f"{STATUS_PREFIX}{os.getpid()}-")
        try:
            spec = ChildSpec(
                side=which,
                settings=settings,
                stamp=stamp,
                label=result.label,
                status_dir=status_dir,
                loader_index=loader_index,
                loader_from=loader_from,
                picks=picks,
                expect=expect,
                loader_changes=changes,
                timeout_s=timeout_s,
                log_dir_temporary=temporary,
                prove_straggler=prove_straggler,
                one_pass=launcher is not None or prove_straggler,
            )
            child_env = {
                **(env if env is not None else os.environ),
                ENV: spec.to_env(),
                NVML_SAID_ENV: "1",
            }
            hooks.side_started(which, log_dir, stamp)

            def measured() -> bool:
                st = read_statuses(status_dir)  # noqa: B023  (read while this side runs)
                return len([s for s in st.values() if _steps_measured(s)]) >= local

            ended = run_side(
                command(result.target, which, ranks),
                child_env,
                timeout_s=timeout_s,
                measured=measured,
                abandon=_another_rank_failed(launcher, log_dir, stamp, result.label),
                ranks=ranks is not None,
            )
            statuses = read_statuses(status_dir)
        finally:
            shutil.rmtree(status_dir, ignore_errors=True)
        hooks.side_ended(which, statuses)
        short = [s for s in statuses.values() if s.outcome == "not-interleavable"]
        if short and which == "pair":  # the child's decision, by the core's rule: reported
            reals = [s for s in statuses.values() if os.path.isfile(s.log_paths.get("real", ""))]
            if kept is not None and len(reals) == len(statuses) == len(short):
                kept.extend(reals)  # every rank measured its real side: the ideal is left
            return short[0].message
        error = _side_error(name, which, ended, statuses, local, settings, timeout_s, loader_index)
        if error is not None:
            result.error, result.failed = error, which
            result.exit_code = rank_exit_code(ended, statuses)
            result.log_paths = {  # the partial logs its sentence names are kept
                f"{side}-rank{rank}" if rank else side: path
                for rank, st in statuses.items()
                for side, path in st.log_paths.items()
                if os.path.isfile(path) and path in error
            }
            return None
        result.notes += _side_notes(name, which, ended, statuses)
        for rank, st in statuses.items():
            if st.loader_index is not None:
                picks[rank] = [st.loader_index, st.pass_index or 1]
                expect[rank] = st.loader_settings
            for side, path in st.log_paths.items():
                if side in ("real", "ideal") or os.path.isfile(path):  # (the contended arm's
                    # log is there only where the pass had the arm)
                    found[f"{side}-rank{rank}" if rank else side] = path
    result.log_paths = dict(sorted(found.items(), key=lambda kv: kv[0].replace("ideal", "~")))
    if launcher is not None:
        return None  # rank 0 gathers the ranks' logs once every rank has written them
    try:
        if ranks is None:
            _read_pair(result, found)
        else:
            result.ranks = gather_logs(_job_logs(log_dir, found, stamp, result.label, ranks))
    except RunLogError as e:  # measured, but its log not written whole (a full disk)
        result.error, result.failed = _unwritten(name, log_dir, e), "logs"
        result.exit_code = 1
        result.log_paths = {k: p for k, p in found.items() if os.path.isfile(p)}
    return None


FULL_BELOW = 1 << 20
"""A log folder with less than this free (1 MiB) is called full."""


def _unwritten(name: str, log_dir: str, e: Exception) -> str:
    """The sentence for steps measured whose run logs could not be read back: the disk
    that was full, named, where it is."""
    try:
        free: Optional[int] = shutil.disk_usage(log_dir).free
    except OSError:
        free = None
    why = (
        f"the disk holding {log_dir} is full ({free:,} bytes free)"
        if free is not None and free < FULL_BELOW
        else str(e).rstrip(".")
    )
    return (
        f"{name}'s steps were measured, but its run logs could not be written to {log_dir} "
        f"({why}); free space there, or pass --log-dir a folder on another disk, and run it "
        "again."
    )


def _job_logs(
    log_dir: str, found: dict[str, str], stamp: str, label: str, ranks: Torchrun
) -> list[str]:
    """This node's ranks' logs; on several nodes, every node's of this job that are in the
    (shared) log folder by now."""
    paths = set(found.values())
    if ranks.nnodes > 1:
        start = f"loadeval-{stamp}-{label}-"
        paths |= {
            os.path.join(log_dir, n)
            for n in os.listdir(log_dir)
            if n.startswith(start) and n.endswith(".json")
        }
    return sorted(paths)


def _side_error(
    name: str,
    which: str,
    ended: Ended,
    statuses: dict[str, ChildStatus],
    local: int,
    settings: RunSettings,
    timeout_s: Optional[float],
    loader_index: Optional[int] = None,
) -> Optional[str]:
    """The one sentence for a side that did not measure its steps on every rank, or None."""
    side = side_words(which)
    bad = {r: s for r, s in statuses.items() if s.outcome not in ("measured", "running")}
    if ended.abandoned is not None and not bad:
        return f"{ended.abandoned}; this rank stopped its own run then, during {side}."
    if ended.timed_out:
        iterated = any(s.passes for s in statuses.values())
        return timed_out_sentence(name, side, iterated, timeout_s)
    if bad:
        rank, st = _first_bad(bad)
        silent = _silent_ranks(statuses, local)
        if silent and PEER_GONE.search(st.error):
            # the rank that lost its peer is the consequence: the peer ended without a
            # word (os._exit, a crash, a signal), its exit status the launcher's to say
            who = ", ".join(silent)
            return (
                f"{name} (rank {who}) ended its process without an exception (os._exit, a "
                f"crash or a signal) during {side}, before it reported its steps; rank "
                f"{rank} then lost its peer ({_short_error(st.error)}); the output is above."
            )
        return side_sentence(
            f"{name} (rank {rank})" if rank else name, side, st, settings, loader_index
        )
    if len(statuses) < local or any(s.outcome == "running" for s in statuses.values()):
        first = ended.first_gone
        if local > 1 and first is not None and first in _silent_ranks(statuses, local):
            # it ended first; torch's launcher then stopped the others, which may not
            # have had the time to say so
            return (
                f"{name} (rank {first}) ended its process without an exception (os._exit, "
                f"a crash or a signal) during {side}, before it reported its steps; the "
                "launcher then stopped the other ranks; the output is above."
            )
        return _ended_silently(name, side, ended, local)
    return None


def _ended_silently(name: str, side: str, ended: Ended, local: int) -> str:
    """A process that ended without a word: its exit code says how."""
    who = "process for a rank" if local > 1 else "process"
    code = ended.returncode
    if code is not None and code < 0:
        sig = -code
        try:
            signame = signal.Signals(sig).name
        except ValueError:
            signame = f"signal {sig}"
        why = " (out of memory?)" if sig == signal.SIGKILL else ""
        return (
            f"{name}'s {who} for {side} was killed by {signame}{why} before it reported its "
            "steps; its output is above."
        )
    if local > 1:
        return (
            f"{name}'s processes for {side} ended (exit code {code}) before every rank "
            "reported its steps: a rank ended its process itself (os._exit) or was killed, or "
            "the launcher failed; its output is above."
        )
    return (
        f"{name} ended its process itself with exit code {code} (os._exit, or a crash of "
        f"the interpreter) during {side}, before its steps were reported; its output is above."
    )


PEER_GONE = re.compile(
    r"DistBackendError|DistNetworkError|Connection closed by peer|Connection reset by peer|"
    r"remote worker crashing|Broken pipe|communicator was aborted",
)
"""A rank's error that says another rank went away: a consequence, not the cause."""


def _silent_ranks(statuses: dict[str, ChildStatus], local: int) -> list[str]:
    """This node's ranks (0 to ``local`` - 1, where the statuses are numbered so) that
    reported no end (nothing, or only that they were running): they ended without a word."""
    if local < 2 or not all(r.isdigit() and int(r) < local for r in statuses):
        return []
    ended = {r for r, st in statuses.items() if st.outcome != "running"}
    return [str(r) for r in range(local) if str(r) not in ended]


def _short_error(error: str) -> str:
    """A collective's error without its file-and-line prefix and advice: ``Connection
    closed by peer [127.0.0.1]:55013``."""
    text = re.sub(r"\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", error)
    return text.split(". ")[0]


def _first_bad(bad: dict[str, ChildStatus]) -> tuple[str, ChildStatus]:
    """The status that says most about a failed side: one that is not a collective failing
    because another rank went away (its ``finally`` may tear the group down before its
    error reaches us: a consequence, whatever the other rank did, an exit included);
    then a failure before a refusal before an exit; then the first."""
    order = {"script-failed": 0, "refused": 1, "script-exited": 2}

    def key(r: str) -> tuple[bool, int, float, int]:
        st = bad[r]
        at = st.failed_at if st.failed_at is not None else float("inf")
        gone = bool(PEER_GONE.search(st.error))
        return gone, order.get(st.outcome, 3), at, int(r) if r.isdigit() else -1

    rank = min(bad, key=key)
    return rank, bad[rank]


def side_sentence(
    name: str, side: str, st: ChildStatus, settings: RunSettings, loader_index: Optional[int] = None
) -> str:
    if st.outcome == "refused":
        return st.message
    where = (
        f" after step {st.failed_step} of the pass being measured ({st.failed_block})"
        if st.failed_step is not None
        else f" after the {st.steps} steps of {side} were measured"
        if st.steps
        else f" before the steps of {side} were measured"
    )
    written = [p for p in st.log_paths.values() if os.path.isfile(p)]  # (a contended
    # arm's log only where the pass had the arm; a pair on the loop's epochs that failed in
    # its first epoch: the real side's alone)
    logs = f"; the partial run logs: {', '.join(written)}" if written else ""
    if st.outcome == "script-failed":
        ours = (
            "; the contended arm draws the loader's batches from a thread of its own (on by "
            "default where cheap): --no-contention leaves it out"
            if st.failed_block.startswith("the contended side")
            and "DataLoader worker" not in st.error  # (a worker's death is the loader's)
            else ""
        )
        return f"{name} failed{where} ({st.error}){ours}; its traceback is above{logs}."
    if st.exit_code:
        return f"{name} exited with code {st.exit_code}{where}{logs}."
    if loader_index is not None:
        seen = "; ".join(st.passes) if st.passes else "no DataLoader at all"
        return (
            f"{name} never drew more than the {settings.warmup} warm-up batches from "
            f"DataLoader #{loader_index} (--loader {loader_index}); it iterated {seen}. Pick one of those "
            "with --loader K."
        )
    if not st.passes:
        return (
            f"{name} ended without iterating a DataLoader, so there was nothing to measure: "
            "loadeval_nb measures the torch DataLoader a script trains on."
        )
    return (
        f"{name} ended before any DataLoader pass with gradients on drew more than the "
        f"{settings.warmup} warm-up batches ({'; '.join(st.passes)}); pick a loader with "
        "--loader K, or pass a smaller --warmup."
    )


def _side_notes(name: str, which: str, ended: Ended, statuses: dict[str, ChildStatus]) -> list[str]:
    side = side_words(which)
    notes = []
    short = sorted({s.steps for s in statuses.values() if s.stopped_by_script})
    if short:
        notes.append(
            f"{name} ended the measured pass itself in {side}, after "
            f"{'/'.join(map(str, short))} steps (its own step limit): the run has those."
        )
    stops = sorted({s.stopped_at for s in statuses.values() if s.stopped_at})
    for where in stops:
        notes.append(f"{name} was stopped in {side} {where}.")
    if ended.lingered:
        notes.append(
            f"{name} was still running a minute after the steps of {side} were measured "
            "(a thread or a process of its own) and was stopped."
        )
    if ended.leftovers:
        notes.append(
            f"{ended.leftovers} process{'es' if ended.leftovers > 1 else ''} the script left "
            f"running after {side} {'were' if ended.leftovers > 1 else 'was'} stopped."
        )
    return notes
