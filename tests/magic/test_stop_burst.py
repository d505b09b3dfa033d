"""Stop pressed again and again while %%loadeval winds up: the run log is whole and
``_loadeval`` is this run's, wherever the presses land.

A press calls the SIGINT handler in place at that moment, as Python does when the
notebook's Stop button interrupts the kernel. The first press is in the cell's loop;
after it, every return of a function of the modules that run and wind up a cell presses
again: the worst points of the wind-up, every one of them, deterministically.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import signal

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import load_run

from ..ipython_shell import ipython_shell

WIND_UP = [
    "loadeval_nb.magic._magic",
    "loadeval_nb.magic._session",
    "loadeval_nb.magic._cell",
    "loadeval_nb.integrations._target",
    "loadeval_nb.integrations._common",
    "loadeval_nb.core.explore.runner",
    "loadeval_nb.core.explore.pair",
    "loadeval_nb.core.explore.result",
    "loadeval_nb.core.measure.base",
    "loadeval_nb.core.measure.evaluator",
    "loadeval_nb.core.measure.oneside",
    "loadeval_nb.core.measure.interleave",
    "loadeval_nb.core.measure.cache",
    "loadeval_nb.core.record.journal",
    "loadeval_nb.core.record.run",
    "loadeval_nb.core.verdict.diagnose",
]
"""The modules whose functions run between the cell's loop and ``_loadeval``."""


class Burst:
    """Presses Stop once in the cell (``stop()``), then at every return of a function of
    the :data:`WIND_UP` modules until the magic is done."""

    def __init__(self, monkeypatch) -> None:
        self.on = False
        self.presses = 0
        self._pressing = False
        wrapped: dict[object, object] = {}
        for name in WIND_UP:
            module = importlib.import_module(name)
            for attr, value in list(vars(module).items()):
                if self._ours(value):
                    monkeypatch.setattr(module, attr, self._wrap(value, wrapped))
                elif inspect.isclass(value) and value.__module__ == name:
                    for key, fn in list(vars(value).items()):
                        if self._ours(fn):
                            monkeypatch.setattr(value, key, self._wrap(fn, wrapped))

    @staticmethod
    def _ours(fn) -> bool:
        return inspect.isfunction(fn) and fn.__module__.startswith("loadeval_nb.")

    def _wrap(self, fn, wrapped):
        if fn not in wrapped:

            def pressing(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                finally:
                    if self.on:
                        self.press()

            functools.update_wrapper(pressing, fn)
            wrapped[fn] = pressing
        return wrapped[fn]

    def press(self) -> None:
        if self._pressing:  # a handler of the package returning: not another press
            return
        self.presses += 1
        handler = signal.getsignal(signal.SIGINT)
        self._pressing = True
        try:
            if callable(handler):
                handler(signal.SIGINT, None)
        finally:
            self._pressing = False

    def __call__(self) -> None:  # the cell's first press
        self.on = True
        self.press()

    def __enter__(self) -> Burst:
        return self

    def __exit__(self, *exc) -> None:
        self.on = False


CELL = "for k, b in enumerate(train_loader):\n    if k == 10:\n        stop()\n"


@pytest.mark.parametrize("order", ["--sequential", ""], ids=["sequential", "interleaved"])
def test_a_burst_of_stops_keeps_the_log_and_the_result(tmp_path, monkeypatch, order):
    loader = DataLoader(TensorDataset(torch.randn(2048, 4)), batch_size=4)
    logs = tmp_path / "logs"
    burst = Burst(monkeypatch)
    with ipython_shell(train_loader=loader, stop=burst) as ip:
        ip.user_ns["_loadeval"] = "the previous run's"
        line = f"train_loader --steps 400 --warmup 2 --cache 3 --quiet --log-dir {logs} {order}"
        with burst, pytest.raises(KeyboardInterrupt):
            ip.run_cell_magic("loadeval", line, CELL)
        assert burst.presses > 20, burst.presses  # pressed all through the wind-up
        res = ip.user_ns["_loadeval"]
        assert res != "the previous run's", "_loadeval is stale"
        assert isinstance(res.error, KeyboardInterrupt)
        assert ip.user_ns["train_loader"] is loader  # the name is the user's loader again
        assert res.real is not None and res.real.n_steps >= 10
        files = sorted(os.listdir(logs))
        assert files and all(f.endswith(".json") for f in files), files  # no journal, temp
        by_mode = {}
        for f in files:
            run = load_run(str(logs / f))
            by_mode[run.mode] = run
        assert by_mode["log"].n_steps == res.real.n_steps  # the whole of what ran
        assert by_mode["log"].status == res.real.status == "stopped"
        if res.ideal is not None:
            assert by_mode["replay"].n_steps == res.ideal.n_steps


def test_stop_pressed_just_after_the_run_keeps_its_result(tmp_path, monkeypatch):
    # the pair has finished: a press while it is kept must not leave _loadeval stale
    loader = DataLoader(TensorDataset(torch.randn(256, 4)), batch_size=4)
    burst = Burst(monkeypatch)
    with ipython_shell(train_loader=loader, stop=burst) as ip:
        ip.user_ns["_loadeval"] = "the previous run's"
        cell = "for k, b in enumerate(train_loader):\n    pass\nstop()\n"
        line = f"train_loader --steps 24 --warmup 2 --cache 3 --quiet --log-dir {tmp_path}"
        with burst, pytest.raises(KeyboardInterrupt):
            ip.run_cell_magic("loadeval", line, cell)
        res = ip.user_ns["_loadeval"]
        assert res != "the previous run's", "_loadeval is stale"
        assert res.real.n_steps == 24 and ip.user_ns["train_loader"] is loader
        for f in os.listdir(tmp_path):
            assert f.endswith(".json") and load_run(str(tmp_path / f)).n_steps in (
                res.real.n_steps,
                res.ideal.n_steps if res.ideal else None,
            )
