"""The bad-input catalogue: every wrong value a user can hand the tool, with the exact
sentence they are shown.

Each case asserts that sentence, word for word (one line, ending in a full stop, no
traceback), that the user's loader and data are as they were, and that nothing was
left in the working folder (no temporary file, probe or journal); the suite's
``no_leaks`` fixture adds that no thread or worker process outlived the case.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from IPython.core.error import UsageError
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import (
    LoaderEvaluator,
    LoadEvalError,
    Run,
    RunSettings,
    compare_runs,
    diagnose,
    load_run,
    run_pair,
    run_sweep,
)
from loadeval_nb.__main__ import main
from loadeval_nb.errors import RunLogError
from loadeval_nb.explore import parse_sweep
from loadeval_nb.measure import AutoStop
from loadeval_nb.whatif import simulate

from ..ipython_shell import ipython_shell

MAX_WORKERS = 4 * len(os.sched_getaffinity(0))  # 4 per CPU this process may run on


class Refused(Exception):
    """What the user saw: a CLI's exit code and message, or a magic's UsageError."""


@dataclass
class User:
    """The user's objects a case may use; compared before and after it."""

    data: torch.Tensor
    loader: DataLoader
    tmp: str

    def fingerprint(self) -> Any:
        d = self.loader.__dict__
        return (
            self.data.clone(),
            {k: v for k, v in d.items() if not k.startswith("_") or k == "_iterator"},
        )


@pytest.fixture
def user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = torch.arange(32.0).reshape(16, 2)
    return User(data, DataLoader(TensorDataset(data), batch_size=4), str(tmp_path))


def run_cli(*args: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse
            code = e.code
    raise Refused(f"exit {code}: {err.getvalue().strip()}")


def run_cell(u: User, line: str, cell: str = "for b in train_loader:\n    pass") -> None:
    with ipython_shell(train_loader=u.loader, not_a_loader=3, empty=[]) as ip:
        try:
            ip.run_cell_magic("loadeval", line, cell)
        except UsageError as e:
            raise Refused(str(e)) from None


def log_at(u: User, name: str, text: Any = None, **change: Any) -> str:
    """A run log in the user's folder: ``text`` as is, or a good log with fields changed."""
    p = os.path.join(u.tmp, name)
    if text is None:
        run = Run(mode="log", start_ns=[0, 10, 20], step_ns=[10, 10, 10], wait_ns=[1, 1, 1])
        run.save(p)
        with open(p) as f:
            doc = json.load(f)
        for key, value in change.items():
            target, leaf = doc, key.split(".")
            for part in leaf[:-1]:
                target = target[part]
            target[leaf[-1]] = value
        text = json.dumps(doc)
    with open(p, "w") as f:
        f.write(text)
    return p


def log_bytes(u: User, name: str, data: bytes) -> str:
    p = os.path.join(u.tmp, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


def ev(u: User, **kw: Any) -> LoaderEvaluator:
    return LoaderEvaluator(u.loader, **{"sample_interval_s": None, **kw})


def never(e: LoaderEvaluator) -> None:
    raise AssertionError("the loop ran although the input should have been refused")


def pair(u: User, **settings: Any) -> None:
    run_pair(u.loader, never, RunSettings(**settings))


def used_up(u: User) -> None:
    gen = (b for b in [1, 2])
    list(gen)
    res = run_pair(gen, lambda e: None, RunSettings(steps=6, warmup=1, only="ideal"))
    raise res.error


def empty_replay(u: User) -> None:
    for _ in LoaderEvaluator([], mode="replay", sample_interval_s=None):
        pass


def ms_run(ms: float, mode: str = "log", n: int = 20) -> Run:
    step = [int(ms * 1e6)] * n
    wait = [1] * n if mode == "log" else None
    return Run(mode=mode, start_ns=[i * step[0] for i in range(n)], step_ns=step, wait_ns=wait)


CASES: list[tuple[str, Callable[[User], Any], type[BaseException], str]] = [
    # ---- LoaderEvaluator ---------------------------------------------------------------
    (
        "evaluator-not-iterable",
        lambda u: LoaderEvaluator(5),
        LoadEvalError,
        "LoaderEvaluator needs an iterable of batches such as a DataLoader, not an int.",
    ),
    (
        "evaluator-nested",
        lambda u: LoaderEvaluator(ev(u)),
        LoadEvalError,
        "dataloader is already a LoaderEvaluator; wrap the original loader instead.",
    ),
    (
        "evaluator-mode",
        lambda u: ev(u, mode="train"),
        ValueError,
        "mode must be 'log' or 'replay', not 'train'.",
    ),
    (
        "evaluator-cache-zero",
        lambda u: ev(u, num_cached_batches=0),
        LoadEvalError,
        "num_cached_batches must be an integer >= 1, not 0.",
    ),
    (
        "evaluator-cache-negative",
        lambda u: ev(u, num_cached_batches=-3),
        LoadEvalError,
        "num_cached_batches must be an integer >= 1, not -3.",
    ),
    (
        "evaluator-cache-string",
        lambda u: ev(u, num_cached_batches="20"),
        LoadEvalError,
        "num_cached_batches must be an integer >= 1, not '20'.",
    ),
    (
        "evaluator-cache-float",
        lambda u: ev(u, num_cached_batches=2.5),
        LoadEvalError,
        "num_cached_batches must be an integer >= 1, not 2.5.",
    ),
    (
        "evaluator-max-steps-zero",
        lambda u: ev(u, steps=0),
        LoadEvalError,
        "steps must be an integer >= 1 or None, not 0.",
    ),
    (
        "evaluator-max-steps-word",
        lambda u: ev(u, steps="ten"),
        LoadEvalError,
        "steps must be an integer, None or 'auto', not 'ten'.",
    ),
    (
        "evaluator-max-steps-and-auto",
        lambda u: ev(u, steps=5, auto_stop=AutoStop()),
        LoadEvalError,
        "steps=5 and auto_stop both set how long a run is; pass one of them (AutoStop(max_steps=...) caps an adaptive run).",
    ),
    (
        "evaluator-warmup-negative",
        lambda u: ev(u, warmup=-1),
        LoadEvalError,
        "warmup must be an integer >= 0, not -1.",
    ),
    (
        "evaluator-budget-negative",
        lambda u: ev(u, cache_budget_bytes=-5),
        LoadEvalError,
        "cache_budget_bytes must be an integer >= 0 or None, not -5.",
    ),
    (
        "evaluator-interval-zero",
        lambda u: ev(u, sample_interval_s=0.001),
        LoadEvalError,
        "sample_interval_s must be a number of seconds from 0.01 to 3600, or None to turn sampling off, not 0.001.",
    ),
    (
        "evaluator-interval-nan",
        lambda u: ev(u, sample_interval_s=float("nan")),
        LoadEvalError,
        "sample_interval_s must be a number of seconds from 0.01 to 3600, or None to turn sampling off, not nan.",
    ),
    (
        "evaluator-interval-negative",
        lambda u: ev(u, sample_interval_s=-1),
        LoadEvalError,
        "sample_interval_s must be a number of seconds from 0.01 to 3600, or None to turn sampling off, not -1.",
    ),
    (
        "evaluator-label-int",
        lambda u: ev(u, label=3),
        LoadEvalError,
        "label must be a string such as 'real', not an int.",
    ),
    (
        "evaluator-metrics-file-int",
        lambda u: ev(u, metrics_file=3),
        LoadEvalError,
        "metrics_file must be a path such as 'run.json', not an int.",
    ),
    (
        "evaluator-metrics-file-dir",
        lambda u: ev(u, metrics_file=u.tmp),
        LoadEvalError,
        "metrics_file '{tmp}' is a directory; pass a file path such as 'run.json'.",
    ),
    (
        "evaluator-metrics-file-under-a-file",
        lambda u: ev(u, metrics_file=log_at(u, "f.txt", "x") + "/run.json"),
        LoadEvalError,
        "Cannot write metrics_file '{tmp}/f.txt/run.json' ('f.txt' is a file, not a folder); pass a path in a folder you can write to.",
    ),
    (
        "evaluator-cache-on",
        lambda u: ev(u, mode="replay", cache_on="tpu"),
        LoadEvalError,
        "cache_on must be 'host' or 'device', not 'tpu'.",
    ),
    (
        "evaluator-device-cache-without-cuda",
        lambda u: ev(u, mode="replay", cache_on="device"),
        LoadEvalError,
        "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'.",
    ),
    (
        "evaluator-used-up-generator",
        used_up,
        LoadEvalError,
        "The generator is an iterator that is used up (it yields nothing now); make a new one, or pass a re-iterable loader such as a DataLoader.",
    ),
    (
        "evaluator-empty-replay",
        empty_replay,
        LoadEvalError,
        "The list produced no batches, so there is nothing to measure; pass a loader that yields at least one batch.",
    ),
    # ---- RunSettings / run_pair --------------------------------------------------------
    (
        "settings-steps-zero",
        lambda u: RunSettings(steps=0),
        LoadEvalError,
        "steps must be a positive integer or 'auto', not 0.",
    ),
    (
        "settings-steps-word",
        lambda u: RunSettings(steps="many"),
        LoadEvalError,
        "steps must be a positive integer or 'auto', not 'many'.",
    ),
    (
        "settings-warmup-over-steps",
        lambda u: RunSettings(steps=10, warmup=10),
        LoadEvalError,
        "warmup (10) must be smaller than steps (10): warm-up steps are not measured.",
    ),
    (
        "settings-cache-zero",
        lambda u: RunSettings(num_cached_batches=0),
        LoadEvalError,
        "num_cached_batches must be a positive number of batches, not 0.",
    ),
    (
        "settings-cache-on",
        lambda u: RunSettings(cache_on="disk"),
        LoadEvalError,
        "cache_on must be 'host' or 'device', not 'disk'.",
    ),
    (
        "settings-only",
        lambda u: RunSettings(only="both"),
        LoadEvalError,
        "only must be None or 'real' or 'ideal', not 'both'.",
    ),
    (
        "settings-auto-stop-without-auto",
        lambda u: RunSettings(steps=50, auto_stop=AutoStop()),
        LoadEvalError,
        "auto_stop applies to steps='auto', not steps=50; pass one or the other.",
    ),
    (
        "settings-interval",
        lambda u: RunSettings(sample_interval_s=1e-9),
        LoadEvalError,
        "sample_interval_s must be a number of seconds from 0.01 to 3600, or None to turn sampling off, not 1e-09.",
    ),
    (
        "pair-not-a-loader",
        lambda u: run_pair(5, never),
        LoadEvalError,
        "The loader must be an iterable of batches such as a DataLoader, not an int.",
    ),
    (
        "pair-not-callable",
        lambda u: run_pair(u.loader, "train"),
        LoadEvalError,
        "run_once must be a function that runs the training loop over the evaluator it is given (def run_once(ev): for batch in ev: ...), not a str.",
    ),
    (
        "pair-empty-loader",
        lambda u: run_pair([], never),
        LoadEvalError,
        "The list produced no batches, so there is nothing to measure; pass a loader that yields at least one batch.",
    ),
    (
        "pair-log-dir-is-a-file",
        lambda u: pair(u, log_dir=log_at(u, "f.txt", "x")),
        LoadEvalError,
        "Cannot write run logs in '{tmp}/f.txt' ('f.txt' is a file, not a folder); pass a log_dir you can write to.",
    ),
    (
        "pair-device-cache-without-cuda",
        lambda u: pair(u, cache_on="device"),
        LoadEvalError,
        "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'.",
    ),
    # ---- sweeps --------------------------------------------------------------------------
    (
        "sweep-unknown-setting",
        lambda u: parse_sweep("num_wrkers=0,2"),
        LoadEvalError,
        "Cannot sweep num_wrkers (did you mean 'num_workers'?); only num_workers, pin_memory, prefetch_factor, persistent_workers, num_threads can be swept.",
    ),
    (
        "sweep-not-a-number",
        lambda u: parse_sweep("num_workers=two"),
        LoadEvalError,
        "num_workers='two' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-negative-workers",
        lambda u: parse_sweep("num_workers=-1"),
        LoadEvalError,
        "num_workers must be an integer >= 0, not -1.",
    ),
    (
        "sweep-too-many-workers",
        lambda u: parse_sweep("num_workers=100000"),
        LoadEvalError,
        f"num_workers=100000 is more worker processes than this machine can run usefully (4 per CPU: at most {MAX_WORKERS}); try a number up to {MAX_WORKERS}.",
    ),
    (
        "sweep-not-a-bool",
        lambda u: parse_sweep("pin_memory=maybe"),
        LoadEvalError,
        "pin_memory='maybe' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-dict-string-bool",
        lambda u: parse_sweep({"pin_memory": ["maybe"]}),
        LoadEvalError,
        "pin_memory='maybe' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-empty",
        lambda u: parse_sweep(""),
        LoadEvalError,
        'The sweep is empty; give settings to try, like "num_workers=0,2,4; pin_memory=False,True".',
    ),
    (
        "sweep-no-values",
        lambda u: parse_sweep("num_workers="),
        LoadEvalError,
        "num_workers has no values to try; list them like num_workers=0,2,4.",
    ),
    (
        "sweep-not-a-dataloader",
        lambda u: run_sweep([1, 2], never, "num_workers=0,1"),
        LoadEvalError,
        "A sweep rebuilds the DataLoader with other settings, and the loader is a list; sweep a torch.utils.data.DataLoader.",
    ),
    # ---- run logs ----------------------------------------------------------------------
    (
        "log-missing",
        lambda u: load_run("nowhere.json"),
        RunLogError,
        "No run log at 'nowhere.json'; check the path or record the run first.",
    ),
    (
        "log-directory",
        lambda u: load_run(u.tmp),
        RunLogError,
        "'{tmp}' is a directory; pass the path of a .json run log.",
    ),
    (
        "log-binary",
        lambda u: load_run(log_bytes(u, "b.json", b"\xff\xfe\x00garbage")),
        RunLogError,
        "'{tmp}/b.json' is not a text file; pass a .json run log written by loadeval_nb.",
    ),
    (
        "log-truncated",
        lambda u: load_run(log_at(u, "t.json", '{"kind": "loadeval_nb.run", "sch')),
        RunLogError,
        "'{tmp}/t.json' is not valid JSON (Unterminated string starting at: line 1, column 29); it may be truncated: record the run again.",
    ),
    (
        "log-foreign",
        lambda u: load_run(log_at(u, "f.json", '{"loss": 0.1}')),
        RunLogError,
        '\'{tmp}/f.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "log-a-list",
        lambda u: load_run(log_at(u, "l.json", "[1, 2]")),
        RunLogError,
        '\'{tmp}/l.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "log-newer-schema",
        lambda u: load_run(log_at(u, "n.json", schema_version=99)),
        RunLogError,
        "'{tmp}/n.json' uses run-log schema 99, newer than the 2 this loadeval_nb reads; upgrade with `pip install -U loadeval-nb`.",
    ),
    (
        "log-no-schema",
        lambda u: load_run(log_at(u, "s.json", schema_version="2")),
        RunLogError,
        "'{tmp}/s.json' has no integer schema_version; write it again with save_metrics().",
    ),
    (
        "log-negative-step",
        lambda u: load_run(log_at(u, "neg.json", **{"steps.step_ns": [10, -1, 10]})),
        RunLogError,
        "'{tmp}/neg.json' is a damaged run log (it holds negative step or wait times); record the run again.",
    ),
    (
        "log-unknown-mode",
        lambda u: load_run(log_at(u, "m.json", mode="train")),
        RunLogError,
        "'{tmp}/m.json' is a damaged run log (its mode is 'train', not 'log' or 'replay'); record the run again.",
    ),
    (
        "log-complete-as-text",
        lambda u: load_run(log_at(u, "c.json", **{"steps.complete": ["false"] * 3})),
        RunLogError,
        "'{tmp}/c.json' is a damaged run log (steps.complete holds values that are not true or false (\"false\" is not)); record the run again.",
    ),
    (
        "log-lengths-differ",
        lambda u: load_run(log_at(u, "len.json", **{"steps.start_ns": [0]})),
        RunLogError,
        "'{tmp}/len.json' is a damaged run log (steps.start_ns has 1 entries but steps.step_ns has 3); record the run again.",
    ),
    (
        "log-no-steps",
        lambda u: load_run(log_at(u, "ns.json", steps=None)),
        RunLogError,
        "'{tmp}/ns.json' is a damaged run log (it has no steps); record the run again.",
    ),
    (
        "log-deep",
        lambda u: load_run(log_at(u, "d.json", "[" * 100_000 + "]" * 100_000)),
        RunLogError,
        "'{tmp}/d.json' is nested too deeply to be a run log; record the run again.",
    ),
    # ---- diagnosis, comparison, simulator ------------------------------------------------
    (
        "diagnose-swapped",
        lambda u: diagnose(ms_run(10, "replay"), ms_run(20)),
        LoadEvalError,
        "The real run is a replay and the ideal run a log: they look swapped; pass the log-mode run as real and the replay as ideal.",
    ),
    (
        "diagnose-not-runs",
        lambda u: diagnose("real.json", "ideal.json"),
        LoadEvalError,
        "No run log at 'real.json'; check the path or record the run first.",
    ),
    (
        "compare-not-runs",
        lambda u: compare_runs(1, 2),
        LoadEvalError,
        "before must be a LoaderEvaluator, a Run or the path of a run log, not an int.",
    ),
    (
        "simulate-no-workers",
        lambda u: simulate(0.01, 0.01, num_workers=-1),
        LoadEvalError,
        "num_workers must be an integer >= 0, not -1.",
    ),
    # ---- command line ------------------------------------------------------------------
    (
        "cli-diagnose-missing",
        lambda u: run_cli("diagnose", "a.json", "b.json"),
        Refused,
        "exit 2: loadeval_nb: No run log at 'a.json'; check the path or record the run first.",
    ),
    (
        "cli-diagnose-foreign",
        lambda u: run_cli("diagnose", log_at(u, "f.json", "{}"), log_at(u, "g.json", "{}")),
        Refused,
        'exit 2: loadeval_nb: \'{tmp}/f.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "cli-report-unwritable",
        lambda u: run_cli(
            "report", log_at(u, "r.json"), log_at(u, "i.json", mode="replay"), "-o", u.tmp
        ),
        Refused,
        "exit 2: loadeval_nb: cannot write '{tmp}' (it is a folder); pass a path you can write to.",
    ),
    (
        "cli-compare-bad-share",
        lambda u: run_cli(
            "compare", log_at(u, "a.json"), log_at(u, "b.json"), "--max-slowdown", "lots"
        ),
        Refused,
        "exit 2: loadeval_nb: 'lots' is not a share; write it like 5% or 0.05.",
    ),
    (
        "cli-demo-device",
        lambda u: run_cli("demo", "--device", "tpu"),
        Refused,
        "exit 2: loadeval_nb: --device 'tpu' is not a device; use cpu, cuda or cuda:N.",
    ),
    (
        "cli-demo-workers",
        lambda u: run_cli("demo", "--workers", "100000"),
        Refused,
        f"exit 2: loadeval_nb: --workers=100000 is more worker processes than this machine can run usefully (4 per CPU: at most {MAX_WORKERS}); try a number up to {MAX_WORKERS}.",
    ),
    (
        "cli-demo-steps",
        lambda u: run_cli("demo", "--steps", "0"),
        Refused,
        "exit 2: loadeval_nb: --steps must be a positive integer or 'auto', not 0.",
    ),
    # ---- the magic ---------------------------------------------------------------------
    (
        "magic-unknown-name",
        lambda u: run_cell(u, "trian_loader"),
        Refused,
        "No variable named 'trian_loader' in the notebook (did you mean 'train_loader'?); define the loader first.",
    ),
    (
        "magic-not-iterable",
        lambda u: run_cell(u, "not_a_loader", "for b in not_a_loader:\n    pass"),
        Refused,
        "not_a_loader is an int, not a loader; pass the DataLoader's name.",
    ),
    (
        "magic-empty",
        lambda u: run_cell(u, "empty", "for b in empty:\n    pass"),
        Refused,
        "The list produced no batches, so there is nothing to measure; pass a loader that yields at least one batch.",
    ),
    (
        "magic-steps-word",
        lambda u: run_cell(u, "train_loader --steps lots"),
        Refused,
        "--steps must be a number of steps or 'auto', not 'lots'.",
    ),
    (
        "magic-cache-zero",
        lambda u: run_cell(u, "train_loader --cache 0"),
        Refused,
        "--cache must be a positive number of batches, not 0.",
    ),
    (
        "magic-warmup-over-steps",
        lambda u: run_cell(u, "train_loader --steps 10 --warmup 10"),
        Refused,
        "--warmup (10) must be smaller than steps (10): warm-up steps are not measured.",
    ),
    (
        "magic-device-cache",
        lambda u: run_cell(u, "train_loader --cache-on device"),
        Refused,
        "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'.",
    ),
    (
        "magic-log-dir-file",
        lambda u: run_cell(u, f"train_loader --log-dir {log_at(u, 'f.txt', 'x')}"),
        Refused,
        "Cannot write run logs in '{tmp}/f.txt' ('f.txt' is a file, not a folder); pass a --log-dir you can write to.",
    ),
    (
        "magic-cell-never-iterates",
        lambda u: run_cell(u, "train_loader", "x = 1"),
        Refused,
        "The cell never iterated train_loader; loop over it (for batch in train_loader: ...).",
    ),
    (
        "magic-bad-sweep",
        lambda u: run_cell(u, 'train_loader --sweep "num_workers=many"'),
        Refused,
        "num_workers='many' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "magic-ladder-and-sweep",
        lambda u: run_cell(u, 'train_loader --ladder --sweep "num_workers=0,1"'),
        Refused,
        "Use --ladder or --sweep, not both: run them in two cells.",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(user, name, call, kind, sentence):
    before_files = set(os.listdir(user.tmp))
    before = user.fingerprint()
    with pytest.raises(kind) as info:
        call(user)
    said = str(info.value)
    if os.environ.get("HARVEST"):
        with open(os.environ["HARVEST"], "a") as f:
            f.write(f"{name}\t{said}\n")
    assert said == sentence.replace("{tmp}", user.tmp)
    assert "\n" not in said and "Traceback" not in said and said.endswith((".", ")"))
    data, loader_state = user.fingerprint()
    assert torch.equal(data, before[0]) and loader_state == before[1]
    left = {
        f for f in set(os.listdir(user.tmp)) - before_files if not f.endswith((".json", ".txt"))
    }
    assert not left, f"left behind: {left}"
