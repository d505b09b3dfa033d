"""The front ends' options, one table: each option once, with the setting it sets, its
argparse keywords and the front ends that take it (``cell``: ``%%loadeval``; ``run``:
``python -m loadeval_nb run`` and ``%loadeval_run``). From it come both parsers' options
(:func:`arguments`), the settings they make (:func:`settings_from`), the option each
setting is named by in a sentence (:func:`flags`) and the options that take a value
(:func:`valued`), so that an option is added in one place (httpx's client options and
their CLI are one signature and one decorator; here one row).

An option of one front end alone that sets nothing of :class:`~loadeval_nb.RunSettings`
(``--view``, ``--ladder``) stays with that front end."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..core.errors import LoadEvalError
from ..core.explore import RunSettings

CELL, RUN = "cell", "run"
"""The front ends: ``%%loadeval``, and the ``run`` command (the command line's and
``%loadeval_run``)."""


def steps_option(text: Any) -> Any:
    """``--steps`` as both front ends take it (``400`` or ``auto``): an int or ``"auto"``;
    one sentence for anything else."""
    if text == "auto":
        return text
    try:
        return int(text)
    except (TypeError, ValueError):
        raise LoadEvalError(f"--steps must be a number of steps or auto, not {text!r}.") from None


def _texts(values: Optional[list[str]], clean: Callable[[str], str]) -> tuple[str, ...]:
    """A repeated option's values as given (an empty one included: it is one sentence,
    never silently nothing); none: ()."""
    return tuple(clean(v) for v in values) if values is not None else ()


@dataclass(frozen=True)
class Option:
    """One front-end option."""

    flags: tuple[str, ...]
    """``("--cache",)``, ``("-o", "--out")``."""
    name: str
    """The :class:`RunSettings` field it sets (``num_cached_batches``); for an option that
    sets none, the name a sentence knows it by (``loader_index``)."""
    keywords: dict[str, Any]
    """argparse's keywords (``dest`` where the parsed value's name is not the flag's)."""
    fronts: tuple[str, ...] = (CELL, RUN)
    setting: Optional[Callable[[Any, Callable[[str], str]], Any]] = field(default=None)
    """The parsed value as the setting's (given the front end's unquoting); None: the
    option sets no :class:`RunSettings` field."""
    helps: dict[str, str] = field(default_factory=dict)
    """A front end's own help where it says more than the shared one."""
    group: str = ""
    """The help's group (the ``run`` command's ranks)."""

    @property
    def dest(self) -> str:
        """The parsed value's name on argparse's namespace (``args.cache``)."""
        return str(self.keywords.get("dest") or self.flags[-1].lstrip("-").replace("-", "_"))

    def takes_value(self) -> bool:
        action = self.keywords.get("action")
        return action not in ("store_true", "store_false", argparse.BooleanOptionalAction)


def _same(v: Any, clean: Callable[[str], str]) -> Any:
    return v


OPTIONS: tuple[Option, ...] = (
    Option(
        ("--steps",),
        "steps",
        {
            "default": "200",
            "help": "steps per run, warm-up included (default 200), or auto: stop each run "
            "once its median and mean step are known to ±5%% (a pair in blocks: once its "
            "interval tells; 30 to 2000 steps)",
        },
        setting=lambda v, clean: steps_option(clean(v) if isinstance(v, str) else v),
    ),
    Option(
        ("--warmup",),
        "warmup",
        {
            "type": int,
            "default": 10,
            "help": "warm-up steps per run left out of the statistics (default 10)",
        },  # fmt: skip
        setting=_same,
    ),
    Option(
        ("--cache",),
        "num_cached_batches",
        {"type": int, "default": 20, "help": "batches cached for the ideal run (default 20)"},
        setting=_same,
    ),
    Option(
        ("--cache-on",),
        "cache_on",
        {
            "choices": ["host", "device"],
            "default": "host",
            "help": "keep cached batches as produced (host) or on the GPU (device: also "
            "excludes the copy)",
        },
        setting=_same,
    ),
    Option(
        ("--log-dir",),
        "log_dir",
        {"default": None, "help": "keep the run logs here"},
        setting=lambda v, clean: clean(v) if v else None,  # 'runs/my runs'
        helps={CELL: "also save both runs' JSON logs in this folder"},
    ),
    Option(
        ("--log-to",),
        "log_to",
        {
            "action": "append",
            "default": None,
            "metavar": "TRACKER",
            "help": "also write the verdict, the speedup, the step times and the settings to "
            "tensorboard:DIR, mlflow[:URI], wandb[:PROJECT] or, in a cell, trainer (the "
            "Trainer's own loggers); repeat it for more than one",
        },
        setting=_texts,
    ),
    Option(
        ("--repeat",),
        "repeat",
        {
            "type": int,
            "default": 1,
            "help": "run the pair N times in ABBA order (real, ideal, ideal, real, ...); the "
            "verdict's interval then holds the spread between repeats (default 1)",
        },
        fronts=(CELL,),
        setting=_same,
    ),
    Option(
        ("--only",),
        "only",
        {
            "choices": ["real", "ideal"],
            "default": None,
            "help": "run only the real or only the ideal run",
        },  # fmt: skip
        fronts=(CELL,),
        setting=_same,
    ),
    Option(
        ("--sequential",),
        "interleave",
        {
            "action": "store_true",
            "help": "a fresh process per side: the real run, then the ideal run (default: one "
            "process measures both, interleaved in blocks, so that a drift of the machine "
            "lands on both and the live plots move block by block)",
        },
        setting=lambda v, clean: not v,
        helps={
            CELL: "run the real run, then the ideal run (default: their steps interleaved in "
            "blocks in one loop, so that a drift of the machine lands on both)"
        },
    ),
    Option(
        ("--contention",),
        "contention",
        {
            "action": argparse.BooleanOptionalAction,
            "default": None,
            "help": "a third arm: cached batches while the loader keeps producing, which "
            "splits the headroom into waiting for data and the CPU loading takes from the "
            "step (needs workers; default: where it adds at most a quarter to the pass; "
            "--no-contention: never)",
        },
        setting=_same,
    ),
    Option(
        ("--try",),
        "variants",
        {
            "action": "append",
            "default": None,
            "metavar": "SETTINGS",
            "dest": "variants",
            "help": "a variant arm in the same pass: the loader rebuilt with other settings "
            "('num_workers=4, pin_memory=True'; num_workers, pin_memory, prefetch_factor, "
            "persistent_workers), its blocks interleaved with the real ones; the verdict "
            "says what it bought, with its interval. 'advice': what the advice names, "
            "measured in a second pass",
        },
        setting=_texts,
    ),
    # the run command's own: what the script runner needs beside the settings
    Option(
        ("-o", "--out"),
        "out",
        {"default": None, "help": "write an HTML report here"},
        fronts=(RUN,),
    ),  # fmt: skip
    Option(
        ("--loader",),
        "loader_index",
        {
            "type": int,
            "default": None,
            "metavar": "K",
            "help": "measure the K-th DataLoader the script iterates (default: the first pass "
            "with gradients on that draws more than the warm-up's batches)",
        },
        fronts=(RUN,),
    ),
    Option(
        ("--loader-from",),
        "loader_from",
        {
            "default": None,
            "metavar": "MODULE:NAME",
            "help": "measure the loader of this class (or this object), whatever iterable it "
            "is, where the script imports it from (mypkg.data:TrainStream; "
            "__main__:TrainStream for a class the script defines); see docs/scripts.md for "
            "the loaders found without it",
        },
        fronts=(RUN,),
    ),
    # deprecated (0.1.0's opt-in, long the default): still taken, warns once, goes in 0.3.0
    Option(
        ("--interleave",),
        "interleave_optin",
        {"action": "store_true", "help": argparse.SUPPRESS},
        fronts=(RUN,),
    ),  # fmt: skip
    Option(
        ("--timeout",),
        "timeout",
        {
            "type": float,
            "default": 1800.0,
            "help": "seconds a side may run before its steps are measured (default 1800)",
        },
        fronts=(RUN,),
    ),
    Option(
        ("--nproc-per-node",),
        "nproc_per_node",
        {"type": int, "default": None, "help": "launch each side on N ranks per node"},
        fronts=(RUN,),
        group="ranks (torch.distributed.run)",
    ),
    Option(
        ("--nnodes",),
        "nnodes",
        {"type": int, "default": 1, "help": "nodes (default 1)"},
        fronts=(RUN,),
        group="ranks (torch.distributed.run)",
    ),
    Option(
        ("--rdzv-endpoint",),
        "rdzv_endpoint",
        {"default": None, "help": "HOST:PORT where the nodes meet"},
        fronts=(RUN,),
        group="ranks (torch.distributed.run)",
    ),
    Option(
        ("--rdzv-id",),
        "rdzv_id",
        {"default": None, "help": "the job's id, the same on every node"},
        fronts=(RUN,),
        group="ranks (torch.distributed.run)",
    ),
    Option(
        ("--prove-straggler",),
        "prove_straggler",
        {
            "action": "store_true",
            "help": "after the pair, in the same pass, put the ranks' suspect (the "
            "straggler, else the rank that waits most) to a counterfactual: its loader freed "
            "in some blocks, the runner-up's in others; the ranks' report says whether every "
            "rank's step recovers (needs ranks and the script's process group; three more "
            "arms of --steps each)",
        },
        fronts=(RUN,),
        group="ranks (torch.distributed.run)",
    ),
)
"""Every option of the two front ends that a setting, a sentence or the script's split
needs, once."""


def options_for(front: str) -> Iterator[Option]:
    """The options ``front`` takes, in the table's order."""
    return (o for o in OPTIONS if front in o.fronts)


def arguments(front: str) -> Iterator[tuple[tuple[str, ...], dict[str, Any], str]]:
    """``(flags, keywords, group)`` for each option of ``front``, ready for argparse's
    ``add_argument`` (or IPython's ``@argument``)."""
    for o in options_for(front):
        kw = dict(o.keywords)
        if front in o.helps:
            kw["help"] = o.helps[front]
        yield o.flags, kw, o.group


def add_arguments(parser: argparse.ArgumentParser, front: str) -> None:
    """``front``'s options added to ``parser`` (a group's under its title)."""
    groups: dict[str, Any] = {}
    for names, kw, group in arguments(front):
        target = parser
        if group:
            target = groups.get(group) or groups.setdefault(group, parser.add_argument_group(group))
        target.add_argument(*names, **kw)


def settings_from(
    args: argparse.Namespace,
    front: str,
    clean: Callable[[str], str] = lambda s: s,
    **more: Any,
) -> RunSettings:
    """The :class:`RunSettings` ``front``'s parsed options make (``clean``: the front
    end's unquoting of a value; ``more``: settings it adds of its own); checked as they
    are made (an :class:`~loadeval_nb.core.errors.OptionError` names the setting, which
    :func:`flags` turns back into the option)."""
    values = {
        o.name: o.setting(getattr(args, o.dest), clean)
        for o in options_for(front)
        if o.setting is not None
    }
    return RunSettings(**values, **more)


def flags(front: str) -> dict[str, str]:
    """Each setting (and named option) of ``front`` by the option that sets it
    (``num_cached_batches`` → ``--cache``): how a sentence names what the user typed."""
    return {o.name: o.flags[-1] for o in options_for(front)}


def valued(front: str = RUN) -> frozenset[str]:
    """``front``'s options that take a value (the next word is theirs, not the script's),
    from the table: an option added there is split right with nothing else to keep."""
    return frozenset(f for o in options_for(front) if o.takes_value() for f in o.flags)
