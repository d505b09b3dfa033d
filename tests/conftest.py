"""Shared fixtures: a leak check after every test, GPU skipping, a fake clock; Python's own
SIGINT handler where the suite was started with SIGINT ignored; the installed packages'
versions in the report's header."""

from __future__ import annotations

import gc
import signal
import threading
import time

import psutil
import pytest


def _cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_configure(config):
    # The tests of Ctrl-C (and of Stop, which interrupts as Ctrl-C does) need Python's own
    # SIGINT handler, here and in the kernels and scripts they start. A shell starts a
    # background command (`cmd &` in a script) with SIGINT ignored, and Python then keeps
    # it ignored; put Python's handler back, so that children get the default too.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config):
    # What pip resolved (as `pip freeze` names it), before the first test: a suite that
    # fails on a fresh machine and passes on one with older packages says what changed.
    from importlib.metadata import distributions

    names = sorted(
        {f"{d.metadata['Name']}=={d.version}" for d in distributions() if d.metadata["Name"]},
        key=str.lower,
    )
    lines, line = [], "packages:"
    for name in names:
        if len(line) + len(name) > 98:
            lines.append(line)
            line = " "
        line += f" {name}"
    return [*lines, line]


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _live_children() -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail a test that leaves a thread or a worker process running after it."""
    threads_before = set(threading.enumerate())
    children_before = {p.pid for p in _live_children()}
    yield
    deadline = time.monotonic() + 10
    polls = 0
    while True:
        threads = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
        kids = [p for p in _live_children() if p.pid not in children_before]
        if not threads and not kids:
            return
        polls += 1
        if polls == 4 and threads:
            # a paused sampler's thread ends once its evaluator is collected: at once by
            # reference counting, or by the cyclic GC if the test left a cycle holding it
            gc.collect()
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for p in kids:  # do not poison the next test
        try:
            p.kill()
        except psutil.Error:
            pass
    pytest.fail(
        f"leaked after the test: threads {[t.name for t in threads]}, processes {[p.pid for p in kids]}"
    )


class FakeClock:
    """An integer-nanosecond clock that only moves when told to."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.t = start

    def __call__(self) -> int:
        return self.t

    def advance(self, ns: int) -> None:
        self.t += ns


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fake_time(monkeypatch, clock) -> FakeClock:
    """``clock``, read by every LoaderEvaluator the test makes without a clock of its own:
    those of run_pair, run_ladder and run_sweep too. A loop (or a dataset read in the main
    process) that advances it instead of sleeping is timed exactly, on a busy machine too."""
    from loadeval_nb.core.measure import base, evaluator

    # one default clock for every wrapper: their base's (the pair is one of its modes)
    monkeypatch.setattr(base, "DEFAULT_CLOCK", clock)
    probe = evaluator.LoaderEvaluator([0], sample_interval_s=None)
    pair = evaluator.LoaderEvaluator(
        list(range(100)), mode="pair", steps=40, sample_interval_s=None
    )
    if probe.clock is not clock or pair.clock is not clock:
        pytest.fail("an evaluator no longer reads measure.base.DEFAULT_CLOCK: fix fake_time")
    return clock


# ---- the fault catalogue's user (tests/catalogue.py; the cases are in tests/*/test_faults.py) --


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user's data and loader in a working folder of the case's own."""
    import torch

    from tests.catalogue import User

    monkeypatch.chdir(tmp_path)
    return User(torch.arange(128.0).reshape(64, 2), str(tmp_path))


@pytest.fixture
def input_user(tmp_path, monkeypatch):
    """The bad-input catalogue's user: a loader over 16 rows, in a folder of its own."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from tests.catalogue import InputUser

    monkeypatch.chdir(tmp_path)
    data = torch.arange(32.0).reshape(16, 2)
    return InputUser(data, DataLoader(TensorDataset(data), batch_size=4), str(tmp_path))


@pytest.fixture
def quiet_frameworks():
    """Lightning and transformers (when imported) say only errors; warnings are ignored."""
    import logging
    import sys
    import warnings

    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        transformers.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the frameworks' advice on workers, logging, ...
        yield


@pytest.fixture
def earlier_children():
    """The child processes running before the case (``catalogue.no_children`` leaves them out)."""
    from tests.catalogue import EARLIER

    EARLIER.clear()
    EARLIER.update(p.pid for p in psutil.Process().children(recursive=True))
    yield


@pytest.fixture
def sigint_put_back():
    """No case hands another SIGINT handler to the cases after it (a package fault that
    leaves one is a case of its own: ``test_a_failed_pair_..._puts_sigint_back``)."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)
