"""What the parent tells a child (:class:`ChildSpec`, one JSON value in the child's
environment, inherited by every rank torchrun starts) and what a child tells the parent
(:class:`ChildStatus`, one JSON file per process in a folder of the parent's). No
transport of our own: an environment variable down, files up, as torchrun's own
launcher passes its settings and TensorBoard reads event files."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from ...core._shared import env_rank, write_text_atomic
from ...core.explore import RunSettings
from ...core.measure import AutoStop

ENV = "LOADEVAL_NB_CHILD"
"""The environment variable that carries a child's :class:`ChildSpec`."""

MEASURES = {
    "real": "the real run (the script as it is)",
    "ideal": "the ideal run (its training loader's batches replayed from memory)",
    "pair": "the real and the ideal run, interleaved",
}
"""What one child measures (its ``side``: the real run, the ideal run, or the pair, both
interleaved in one pass), as the front ends say it when the child starts."""


def settings_to_dict(settings: RunSettings) -> dict[str, Any]:
    """Every field of ``settings`` as plain JSON values (its :class:`AutoStop` as a dict)."""
    out = {f.name: getattr(settings, f.name) for f in fields(settings)}
    if out["auto_stop"] is not None:
        out["auto_stop"] = out["auto_stop"].to_dict()
    # a variant as its settings ({"num_workers": 4}), "advice" as it is
    out["variants"] = [getattr(v, "settings", v) for v in out["variants"]]
    return out


def settings_from_dict(values: dict[str, Any]) -> RunSettings:
    """The settings :func:`settings_to_dict` wrote, checked again as they are made."""
    values = dict(values)
    if values.get("auto_stop") is not None:
        auto = {k: v for k, v in values["auto_stop"].items() if k != "until"}
        values["auto_stop"] = AutoStop(**auto)  # (the child gives the pair its own until)
    return RunSettings(**values)


@dataclass(frozen=True)
class ChildSpec:
    """One side, as the parent asks a child to measure it."""

    side: str
    """A key of :data:`MEASURES`: ``"real"``, ``"ideal"`` or ``"pair"``."""
    settings: RunSettings
    """The run's settings, whole and checked (``log_dir``: the folder the child writes
    its logs to, the parent's temporary one without ``--log-dir``); the child measures
    with them as they are."""
    stamp: str
    """The job's name in its log names (a time stamp, or the rendezvous id on several
    nodes, so that every node names one job alike)."""
    label: str
    status_dir: str
    loader_index: Optional[int] = None
    """Measure the ``loader_index``-th distinct DataLoader the script iterates (1-based); None:
    the first one a pass of which, started with gradients on, draws more than ``warmup``
    batches."""
    pass_index: Optional[int] = None
    """With ``loader_index``: that loader's ``pass_index``-th pass (1-based); None: its first."""
    loader_from: Optional[str] = None
    """``MODULE:NAME``: the loader to measure is this class's instance (or this object),
    whatever kind of iterable it is (``--loader-from``); None: the loaders found by
    themselves (``integrations/_script/loaders.py``)."""
    picks: dict[str, list[int]] = field(default_factory=dict)
    """Per rank (its ``RANK``, "" without ranks): ``[loader_index, pass_index]`` the real run
    measured, for the ideal run to measure the same pass."""
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per rank: the loader settings the real run measured (the ideal run checks it found
    the same loader)."""
    loader_changes: dict[str, Any] = field(default_factory=dict)
    """DataLoader settings to change on the measured loader before it is measured
    (``num_workers``, ``pin_memory``, ``prefetch_factor``, ``persistent_workers``: a rerun
    from the notebook's panel), as ``rebuild_loader`` applies them."""
    timeout_s: Optional[float] = None
    """The run's time limit (``--timeout``): a child that has not measured its steps this
    long after it started ends itself, with every process it started (its guard), should
    the parent not be there to stop it. None: no limit."""
    log_dir_temporary: bool = False
    """``settings.log_dir`` is a temporary folder the parent made (no ``--log-dir``): a
    child whose parent is gone removes it, unless it holds run logs, which the child's
    last sentence then names (the parent removes it otherwise, or names it in a failure's
    sentence)."""
    prove_straggler: bool = False
    """After the pair, in the same pass, the straggler proof (``--prove-straggler``; the
    side is the pair, under ranks)."""
    one_pass: bool = False
    """The parent cannot run another side (a rank of the user's launcher, the straggler
    proof): a pair too short for blocks is refused, never measured as the real side
    alone for a second run that will not come."""
    parent_pid: int = field(default_factory=os.getpid)
    """The process that runs the side (made where the spec is made): a child whose
    ``parent_pid`` is gone ends itself, with every process it started."""

    @property
    def log_dir(self) -> str:
        """The folder the child writes its run logs to."""
        return str(self.settings.log_dir)

    def to_env(self) -> str:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["settings"] = settings_to_dict(self.settings)
        return json.dumps(values)

    @classmethod
    def from_env(cls, environ: Optional[dict[str, str]] = None) -> Optional[ChildSpec]:
        text = (environ if environ is not None else os.environ).get(ENV)
        if not text:
            return None
        values = json.loads(text)
        values["settings"] = settings_from_dict(values["settings"])
        return cls(**values)


OUTCOMES = (
    "measured",  # the steps were measured: the logs are written
    "script-failed",  # the script raised before its steps were measured
    "script-exited",  # the script ended (or called sys.exit) before its steps were measured
    "refused",  # a setting did not fit the script's loader (one sentence in ``message``)
    "not-interleavable",  # the training pass is too short for blocks (``message``: why)
    "running",  # written at the first DataLoader pass: the script got that far
    "timed-out",  # the child's own guard stopped it at --timeout (the parent was gone)
)


@dataclass
class ChildStatus:
    """What one process of a side reports when it ends (and once its steps are
    measured, before the script's own clean-up runs)."""

    outcome: str
    rank: str = ""
    """torchrun's ``RANK`` ("" without ranks)."""
    message: str = ""
    """One sentence for an outcome other than ``measured`` (or a note on one)."""
    error: str = ""
    """The script's exception, as ``Type: message``."""
    exit_code: Optional[int] = None
    """The script's own ``sys.exit`` code, when it called it."""
    log_paths: dict[str, str] = field(default_factory=dict)
    loader_index: Optional[int] = None
    pass_index: Optional[int] = None
    loader_settings: dict[str, Any] = field(default_factory=dict)
    steps: int = 0
    """Steps measured (warm-up included)."""
    stopped_by_script: bool = False
    """The script ended the measured pass itself, before ``steps``."""
    stopped_at: str = ""
    """Where the child stopped the script after its steps were measured, in words ("at
    the start of ..."): what the script does past that did not run ("": not stopped)."""
    passes: list[str] = field(default_factory=list)
    """The DataLoader passes the script made that were not measured, in words."""
    failed_step: Optional[int] = None
    """The step of the measured pass (from 1) the script raised in, when it raised inside
    it (its batch handed over, the next not yet asked for)."""
    failed_block: str = ""
    """Where in the pass that step was, in words (``the real side, block 2``)."""
    failed_at: Optional[float] = None
    """When the script's exception reached us (``time.monotonic()``, one clock for the
    whole machine): among ranks, the first to fail is the cause, the others usually fail
    in a collective after it."""

    def save(self, status_dir: str) -> str:
        return write_text_atomic(status_path(status_dir, self.rank), json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: str) -> ChildStatus:
        with open(path, encoding="utf-8") as f:
            return cls(**json.load(f))


def rank_key() -> str:
    """This process's rank as its launcher set it (``RANK`` with ``WORLD_SIZE``), the key of
    its status and pick; "" for a single process (``RANK`` alone included)."""
    rank = env_rank()
    return "" if rank is None else str(rank)


def status_path(status_dir: str, rank: str) -> str:
    return os.path.join(status_dir, f"status{'-rank' + rank if rank else ''}.json")


def read_statuses(status_dir: str) -> dict[str, ChildStatus]:
    """Every status in ``status_dir``, by rank ("" without ranks)."""
    out = {}
    for name in sorted(os.listdir(status_dir)):
        if name.startswith("status") and name.endswith(".json"):
            try:
                st = ChildStatus.load(os.path.join(status_dir, name))
            except (OSError, ValueError, TypeError):
                continue  # being replaced: the parent reads again
            out[st.rank] = st
    return out
