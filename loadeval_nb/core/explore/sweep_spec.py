"""What a sweep tries: ``"num_workers=0,2,4; pin_memory=False,True"`` parsed into
configurations, their short names, and the loaders built for them before anything runs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from .._env import cpu_count, is_dataloader
from .._errors import a_kind, close_match
from ..errors import LoadEvalError
from ..measure.loader import TUNABLE, WORKERS_PER_CPU, check_workers, rebuild_loader

SWEEPABLE = (*TUNABLE, "num_threads")
"""What a sweep may vary: the DataLoader's settings, and torch's intra-op threads
(``torch.set_num_threads``: on CPU training the main trade-off with ``num_workers``,
as workers and the training step share the cores)."""


def _value(key: str, text: str) -> Any:
    t = text.strip()
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    if t in ("None", "none"):
        return None
    try:
        return int(t)
    except ValueError:
        raise LoadEvalError(
            f"{key}={t!r} is not a value a sweep can try; use integers, True/False or None."
        ) from None


def _checked(key: str, value: Any) -> Any:
    """``value`` for ``key`` as a DataLoader takes it, the same whether it came from a
    string spec or a dict (``"False"`` in a dict is ``False``), or one sentence."""
    if isinstance(value, str):
        value = _value(key, value)
    if key in ("pin_memory", "persistent_workers"):
        if not isinstance(value, bool):
            raise LoadEvalError(f"{key}={value!r} must be True or False.")
    elif key == "num_workers":
        check_workers(value)
    elif key == "num_threads":
        cores = cpu_count()
        most = WORKERS_PER_CPU * cores
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise LoadEvalError(
                f"num_threads={value!r} must be a number of threads from 1 to {most} "
                f"(this machine has {cores} CPUs)."
            )
    elif key == "prefetch_factor" and value is not None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LoadEvalError(f"prefetch_factor={value!r} must be an integer >= 1 or None.")
    return value


def parse_sweep(spec: Any) -> list[dict[str, Any]]:
    """``"num_workers=0,2,4; pin_memory=False,True"`` (or a dict of lists) → configurations,
    every value checked alike whichever form it came in."""
    if isinstance(spec, dict):
        axes = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in spec.items()}
    elif isinstance(spec, str):
        axes = {}
        for part in spec.replace("\n", ";").split(";"):
            if not part.strip():
                continue
            if "=" not in part:
                raise LoadEvalError(
                    f"Sweep part {part.strip()!r} has no '='; write it like \"num_workers=0,2,4; pin_memory=False,True\"."
                )
            k, vals = part.split("=", 1)
            k = k.strip()
            axes[k] = [_value(k, v) for v in vals.split(",") if v.strip()]
    else:
        raise LoadEvalError(
            f'A sweep is a string like "num_workers=0,2,4; pin_memory=False,True", not {a_kind(spec)}.'
        )
    if not axes:
        raise LoadEvalError(
            'The sweep is empty; give settings to try, like "num_workers=0,2,4; pin_memory=False,True".'
        )
    unknown = sorted(set(axes) - set(SWEEPABLE))
    if unknown:
        raise LoadEvalError(
            f"Cannot sweep {', '.join(unknown)}{close_match(unknown[0], SWEEPABLE)}; only "
            f"{', '.join(SWEEPABLE)} can be swept."
        )
    for k, tried in axes.items():
        if not tried:
            raise LoadEvalError(f"{k} has no values to try; list them like {k}=0,2,4.")
        axes[k] = [_checked(k, v) for v in tried]
    keys = list(axes)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]


def config_label(config: dict[str, Any]) -> str:
    """The name of a configuration, in the sweep's own words: ``num_workers=4 pin_memory=True``
    (each setting as it is written in a sweep spec; ``as is`` for none)."""
    return " ".join(f"{k}={v}" for k, v in config.items()) or "as is"


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: its configurations and a DataLoader built for each (no worker
    started yet). :func:`run_sweep` takes it in place of a spec, so a front end that
    checked the spec early does not check and build it again."""

    configs: list[dict[str, Any]]
    loaders: list[Any]


def prepare_sweep(loader: Any, configs: Any, loader_name: str = "the loader") -> SweepPlan:
    """The configurations and a DataLoader built for each (no worker starts), or one
    :class:`LoadEvalError` sentence: a bad value fails here, before minutes of running."""
    if not is_dataloader(loader):
        raise LoadEvalError(
            f"A sweep rebuilds the DataLoader with other settings, and {loader_name} is a "
            f"{type(loader).__name__}; sweep a torch.utils.data.DataLoader."
        )
    if isinstance(configs, list):
        if not all(isinstance(c, dict) for c in configs):
            raise LoadEvalError(
                "A list of sweep configurations holds dicts such as {'num_workers': 2}; "
                f"one is {a_kind(next(c for c in configs if not isinstance(c, dict)))}."
            )
        # each configuration read like a one-point spec: it runs exactly the values it reports
        configs = [parse_sweep({k: [v] for k, v in c.items()})[0] if c else {} for c in configs]
    else:
        configs = parse_sweep(configs)
    if not configs:
        raise LoadEvalError("The sweep has no configurations to run.")
    loaders = [
        rebuild_loader(loader, **{k: v for k, v in c.items() if k in TUNABLE}) for c in configs
    ]
    return SweepPlan(configs, loaders)
