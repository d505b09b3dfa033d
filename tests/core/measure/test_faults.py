"""The measuring loop's faults (LoaderEvaluator, the replay cache, the samplers): a fault in
the loop, in the source, while the cache fills; odd batches; refusals at construction; Ctrl-C
in ``next()``; and the bad-input catalogue's evaluator cases.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from loadeval_nb import (
    LoaderEvaluator,
    LoadEvalError,
    RunSettings,
    load_run,
    run_pair,
)
from loadeval_nb.errors import CacheMutationWarning
from loadeval_nb.measure import AutoStop
from tests.catalogue import (
    Boom,
    CtrlCAt,
    InputUser,
    User,
    check_bad_input,
    loader_state,
    log_at,
    logged,
    loop,
    nothing_left,
)
from tests.workloads import SleepyItems, sleep_steps

# the added catalogue's cases ran with these around each
pytestmark = pytest.mark.usefixtures("earlier_children", "sigint_put_back")


def ev(u: User, **kw: Any) -> LoaderEvaluator:
    return LoaderEvaluator(u.loader, **{"sample_interval_s": None, **kw})


def used_up(u: User) -> None:
    gen = (b for b in [1, 2])
    list(gen)
    res = run_pair(gen, lambda e: None, RunSettings(steps=6, warmup=1, only="ideal"))
    raise res.error


def empty_replay(u: User) -> None:
    for _ in LoaderEvaluator([], mode="replay", sample_interval_s=None):
        pass


def body_raises(k, b):
    if k == 3:
        raise Boom("the user's own error at step 3")


def body_interrupted(k, b):
    if k == 3:
        raise KeyboardInterrupt


def body_exits(k, b):
    if k == 3:
        sys.exit("stopped by the user")


BODY = [
    # id, body, exception the user sees (None: loop ends by break), its text, steps, status
    ("raise", body_raises, Boom, "the user's own error at step 3", 4, "stopped"),
    ("ctrl-c", body_interrupted, KeyboardInterrupt, "", 4, "stopped"),
    ("sys-exit", body_exits, SystemExit, "stopped by the user", 4, "stopped"),
    ("break-at-3", "break3", None, None, 4, "stopped"),
    ("break-at-0", "break0", None, None, 1, "stopped"),
]


class Faulty(Dataset):
    """Item ``bad`` fails: raises, or (``kill``) its worker process dies."""

    def __init__(self, n: int = 40, bad: int = 13, kill: bool = False) -> None:
        self.n, self.bad, self.kill = n, bad, kill

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == self.bad:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise Boom(f"item {i} is corrupt")
        return torch.full((2,), float(i))


class FaultyStream(IterableDataset):
    def __iter__(self):
        for i in range(40):
            if i == 13:
                raise Boom("the stream broke at 13")
            yield torch.full((2,), float(i))


def failing_generator():
    for i in range(10):
        if i == 3:
            raise Boom("the generator broke at 3")
        yield torch.full((4, 2), float(i))


class LyingLen:
    """Says 10 batches, yields 3."""

    def __len__(self) -> int:
        return 10

    def __iter__(self):
        return iter([torch.zeros(4, 2)] * 3)


class BrokenLen:
    def __len__(self) -> int:
        raise TypeError("no length")

    def __iter__(self):
        return iter([torch.zeros(4, 2)] * 5)


def bad_collate(batch):
    if float(batch[0][0]) >= 12:
        raise Boom("collate failed")
    return torch.stack(batch)


SOURCE = [
    # id, make the loader, mode, exception, start of its text, steps, status
    (
        "item-raises",
        lambda: DataLoader(Faulty(), batch_size=4),
        "log",
        Boom,
        "item 13 is corrupt",
        3,
        "source-error",
    ),
    (
        "item-raises-in-worker",
        lambda: DataLoader(Faulty(), batch_size=4, num_workers=2),
        "log",
        Boom,
        "Caught Boom in DataLoader worker process",
        3,
        "source-error",
    ),
    (
        "worker-killed",
        lambda: DataLoader(Faulty(kill=True), batch_size=4, num_workers=2),
        "log",
        # torch's own error; on a slow machine the dead worker's previous batch can still be
        # in flight, and its shared memory then fails to arrive: torch passes that error on
        (RuntimeError, ConnectionResetError),
        ("DataLoader worker (pid", "[Errno 104]"),
        None,
        "source-error",
    ),
    (
        "persistent-worker-raises",
        lambda: DataLoader(Faulty(), batch_size=4, num_workers=2, persistent_workers=True),
        "log",
        Boom,
        "Caught Boom in DataLoader worker process",
        3,
        "source-error",
    ),
    (
        "collate-raises",
        lambda: DataLoader(Faulty(bad=-1), batch_size=4, collate_fn=bad_collate),
        "log",
        Boom,
        "collate failed",
        3,
        "source-error",
    ),
    (
        "stream-raises-in-worker",
        lambda: DataLoader(FaultyStream(), batch_size=4, num_workers=1),
        "log",
        Boom,
        "Caught Boom in DataLoader worker process",
        3,
        "source-error",
    ),
    (
        "generator-raises",
        failing_generator,
        "log",
        Boom,
        "the generator broke at 3",
        3,
        "source-error",
    ),
    ("len-lies", LyingLen, "log", None, None, 3, "complete"),
    ("len-raises", BrokenLen, "log", None, None, 5, "complete"),
    ("one-batch", lambda: [torch.zeros(4, 2)], "log", None, None, 1, "complete"),
    # a replay epoch is as long as the loader's (DALI's rule), however few batches it has
    ("one-batch-replay", lambda: [torch.zeros(4, 2)], "replay", None, None, 1, "complete"),
    ("short-for-the-cache", lambda: [torch.zeros(4, 2)] * 2, "replay", None, None, 2, "complete"),
]


Point = namedtuple("Point", "x y")


@dataclass
class Pair:
    image: torch.Tensor
    label: int


ODD = {
    "dict": lambda i: {"x": torch.full((2,), float(i)), "meta": {"id": i}},
    "nested": lambda i: (torch.full((2,), float(i)), [torch.zeros(1), (i, "s")]),
    "strings": lambda i: [f"text {i}", f"more {i}"],
    "none-inside": lambda i: (torch.full((2,), float(i)), None),
    "namedtuple": lambda i: Point(torch.full((2,), float(i)), i),
    "dataclass": lambda i: Pair(torch.full((2,), float(i)), i),
    "bytes": lambda i: bytes([i]),
    "scalar": lambda i: i,
}


@dataclasses.dataclass
class Batch:
    img: torch.Tensor
    arr: np.ndarray


NamedPair = namedtuple("Pair", "a b")


class Holder:
    def __init__(self) -> None:
        self.t = torch.zeros(2)
        self.meta = "kept"


def _replay(src: list, steps: int, body) -> list[warnings.WarningMessage]:
    ev = LoaderEvaluator(
        src, mode="replay", num_cached_batches=3, steps=steps, sample_interval_s=None
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for b in ev:
            body(b)
    return list(seen)


@pytest.mark.parametrize("interval", [float("inf"), 1e-9, True, "0.1"])
def test_sample_intervals_that_would_crash_or_spin(interval):
    with pytest.raises(
        LoadEvalError, match="sample_interval_s must be a number of seconds from 0.01 to 3600"
    ):
        LoaderEvaluator([1, 2], sample_interval_s=interval)


def test_a_label_that_is_not_a_string():
    with pytest.raises(LoadEvalError, match="label must be a string such as 'real', not an int"):
        LoaderEvaluator([1, 2], label=3)


def test_a_huge_max_steps_on_a_source_without_len_starts_at_once():
    class NoLen:
        def __iter__(self):
            return iter(range(10))

    ev = LoaderEvaluator(
        NoLen(), mode="replay", num_cached_batches=3, steps=10**12, sample_interval_s=None
    )
    it = iter(ev)  # no trillion-entry list before the first step
    assert [next(it) for _ in range(5)] == [0, 1, 2, 0, 1]
    del it
    assert ev.to_run().n_steps == 5


def test_ctrl_c_in_next_is_a_stop(user):
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as in a fresh process
    ev = LoaderEvaluator(DataLoader(CtrlCAt(), batch_size=4), sample_interval_s=None)
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    assert ev.to_run().blocks[0]["status"] == "stopped"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_in_the_main_thread_leaves_a_run_on_another_thread_alone(user, clock):
    reached, go = threading.Event(), threading.Event()
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(list(range(40)), metrics_file=path, sample_interval_s=None, clock=clock)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as in a fresh process

    def train() -> None:
        for k, _ in enumerate(ev):
            if k == 5:
                reached.set()
                go.wait(30)

    t = threading.Thread(target=train)
    t.start()
    try:
        assert reached.wait(30)
        # the evaluator on the other thread took no SIGINT handler: Python's raises here
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        go.set()
        t.join(30)
    ev.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert all(logged(path, 40, "complete").complete)
    nothing_left(user.tmp, ("run.json",))


@pytest.mark.filterwarnings("ignore::loadeval_nb.errors.CacheMutationWarning")
@pytest.mark.parametrize("mode", ["log", "replay"])
@pytest.mark.parametrize(
    ("name", "body", "kind", "text", "steps", "status"), BODY, ids=[b[0] for b in BODY]
)
def test_fault_in_the_loop(user, mode, name, body, kind, text, steps, status):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(loader, mode=mode, num_cached_batches=4, metrics_file=path)

    def loop():
        for k, b in enumerate(ev):
            if isinstance(body, str):
                if k == int(body[-1]):
                    break
            else:
                body(k, b)
            b[0].mul_(2)  # the loop changes its batch in place: never the user's data

    if kind is None:
        loop()
    else:
        with pytest.raises(kind) as info:
            loop()
        assert str(info.value) == text
    ev.close()
    logged(path, steps, status)
    assert not load_run(path).complete[-1]  # the unfinished step is flagged, left out
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left(user.tmp, ("run.json",))


@pytest.mark.parametrize(
    ("name", "make", "mode", "kind", "text", "steps", "status"), SOURCE, ids=[s[0] for s in SOURCE]
)
def test_fault_in_the_source(user, name, make, mode, kind, text, steps, status):
    source = make()
    before = loader_state(source)
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(source, mode=mode, num_cached_batches=4, steps=8, metrics_file=path)
    if kind is None:
        for _ in ev:
            pass
    else:
        with pytest.raises(kind) as info:
            for _ in ev:
                pass
        assert str(info.value).startswith(text)
    ev.close()
    logged(path, steps, status)
    assert loader_state(source) == before
    nothing_left(user.tmp, ("run.json",))


@pytest.mark.parametrize(
    ("kill", "kind", "text"),
    [(False, Boom, "item 5 is corrupt"), (True, RuntimeError, "DataLoader worker (pid")],
    ids=["cache-fill-raises", "cache-fill-worker-killed"],
)
def test_fault_while_the_replay_cache_fills(user, kill, kind, text):
    # the cache is filled when the replay evaluator is made (as DALI's is): the user's error
    # comes from the constructor, no log is written (nothing ran) and no worker is left
    source = DataLoader(Faulty(bad=5, kill=kill), batch_size=4, num_workers=2 if kill else 0)
    before = loader_state(source)
    path = os.path.join(user.tmp, "run.json")
    with pytest.raises(kind) as info:
        LoaderEvaluator(source, mode="replay", num_cached_batches=4, metrics_file=path)
    assert str(info.value).startswith(text)
    assert loader_state(source) == before
    nothing_left(user.tmp, ())


@pytest.mark.parametrize("kind", list(ODD))
def test_odd_batches_are_replayed_as_they_came(user, kind):
    batches = [ODD[kind](i) for i in range(3)]
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(batches, mode="replay", num_cached_batches=2, metrics_file=path)
    seen = list(ev) + list(ev)
    ev.close()
    cycle = [batches[0], batches[1], batches[0]]  # each epoch cycles the cache from its start
    assert [repr(b) for b in seen] == [repr(b) for b in cycle * 2]
    assert [repr(b) for b in batches] == [repr(ODD[kind](i)) for i in range(3)]  # unchanged
    logged(path, 6, "complete")
    nothing_left(user.tmp, ("run.json",))


@pytest.mark.slow
def test_a_sampler_that_fails_does_not_stop_the_run(user, monkeypatch):

    def broken(self, *a, **k):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "cpu_percent", broken)
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(user.loader(), metrics_file=path, sample_interval_s=0.01)
    sleep_steps(0.005)(ev)
    ev.close()
    logged(path, 16, "complete")
    nothing_left(user.tmp, ("run.json",))


@pytest.mark.parametrize(
    "make",
    [
        lambda data: data,  # a list of the user's tensors
        lambda data: DataLoader(TensorDataset(torch.stack(data)), batch_size=None),
    ],
    ids=["list", "unbatched-loader"],
)
def test_replay_never_changes_the_users_tensors(make):
    data = [torch.full((3,), 2.0) for _ in range(4)]
    source = make(data)
    before = [t.clone() for t in data] if isinstance(source, list) else None
    ev = LoaderEvaluator(
        source, mode="replay", num_cached_batches=2, steps=8, sample_interval_s=None
    )
    with pytest.warns(
        CacheMutationWarning,
        match=r"changed \d of the \d cached tensors.*your own data was not changed",
    ):
        for batch in ev:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            x.mul_(2)  # in place, on what the loop was handed
        ev.close()
    if before is not None:
        assert all(torch.equal(a, b) for a, b in zip(data, before))
    else:
        assert all(torch.equal(t, torch.full((3,), 2.0)) for t in data)


def test_a_collating_loader_is_not_copied():
    ev = LoaderEvaluator(
        DataLoader(TensorDataset(torch.zeros(16, 3)), batch_size=4),
        mode="replay",
        sample_interval_s=None,
    )
    assert ev._mode.cache.copied is False  # default_collate already made new tensors


def test_a_cache_over_budget_is_refused_on_the_real_runs_first_batch(monkeypatch):
    # from the batch the real run takes anyway: no start of the loader of its own
    import loadeval_nb.core.measure.cache as cache

    monkeypatch.setattr(cache, "host_budget", lambda: (100, "a test budget"))
    starts, steps = [], []

    class Counted(DataLoader):
        def __iter__(self):
            starts.append(1)
            return super().__iter__()

    loader = Counted(TensorDataset(torch.zeros(40, 30)), batch_size=4)  # 480 B a batch

    def run_once(ev):
        for _ in ev:
            steps.append(1)

    with pytest.raises(LoadEvalError, match="over the budget of 100 B .*num_cached_batches=1"):
        run_pair(loader, run_once, RunSettings(steps=6, warmup=1, num_cached_batches=5))
    assert len(starts) == 1 and steps == []  # the real run stopped at its first batch


def test_repeated_interrupts_while_finishing_keep_the_log(tmp_path, monkeypatch):
    import signal

    from loadeval_nb.core.measure import UtilSampler

    path = tmp_path / "run.json"
    ev = LoaderEvaluator(list(range(20)), metrics_file=str(path), sample_interval_s=0.05)
    pause = UtilSampler.pause

    def interrupted_pause(self):
        signal.raise_signal(signal.SIGINT)  # Stop pressed three times while the epoch closes
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
        pause(self)

    monkeypatch.setattr(UtilSampler, "pause", interrupted_pause)
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    monkeypatch.setattr(UtilSampler, "pause", pause)
    ev.close()
    assert load_run(path).n_steps == 20  # the log was written: finishing completed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_cache_check_leaves_persistent_workers_startable():
    # the check pulls one batch before the real run; the real run must start afresh
    loader = DataLoader(
        TensorDataset(torch.zeros(64, 3)), batch_size=4, num_workers=1, persistent_workers=True
    )
    res = run_pair(
        loader, loop, RunSettings(steps=8, warmup=1, num_cached_batches=2, sample_interval_s=None)
    )
    assert res.error is None and res.real.n_steps == res.ideal.n_steps == 8
    assert res.real.worker_load_ns is not None  # the real run's workers were timed
    from loadeval_nb.core._shared import shutdown_persistent_workers

    shutdown_persistent_workers(loader)


def test_replay_leaves_a_dataclass_batchs_tensors_and_arrays_as_they_were():
    src = [Batch(torch.ones(2), np.ones(2)) for _ in range(5)]

    def body(b):
        b.img.add_(1)
        b.arr += 1

    seen = _replay(src, 30, body)
    assert src[0].img[0].item() == 1.0 and src[0].arr[0] == 1.0  # 11.0 before the fix
    said = [str(w.message) for w in seen if w.category is CacheMutationWarning]
    assert len(said) == 1
    assert "3 of the 3 cached tensors and 3 of the 3 cached arrays" in said[0]
    assert "cached batch 0.img" in said[0] and "your own data was not changed" in said[0]


def test_replay_copies_named_tuples_objects_and_nested_mixes():
    src = [NamedPair(Holder(), [np.zeros(1), {"k": torch.zeros(1)}]) for _ in range(4)]

    def body(p):
        p.a.t += 1
        p.b[1]["k"].mul_(2).add_(1)
        p.b[0] += 1

    seen = _replay(src, 12, body)
    assert src[0].a.t.sum().item() == 0.0 and src[0].a.meta == "kept"
    assert src[0].b[0][0] == 0.0 and src[0].b[1]["k"].item() == 0.0
    said = " ".join(str(w.message) for w in seen if w.category is CacheMutationWarning)
    assert "cached batch 0.a.t" in said and "cached batch 0.b[1]['k']" in said


def test_a_batch_that_contains_itself_replays():
    b: dict[str, Any] = {"x": torch.zeros(3)}
    b["self"] = b
    ev = LoaderEvaluator([b, b], mode="replay", num_cached_batches=2, sample_interval_s=None)
    assert sum(1 for _ in ev) == 2  # RecursionError ~1,000 frames deep before the fix
    cached = ev.cached_batches[0]
    assert cached["self"] is cached and ev.cache_bytes is not None


def test_a_batch_nested_past_the_depth_limit_is_one_leaf():
    deep: Any = torch.zeros(1)
    for _ in range(5000):
        deep = [deep]
    ev = LoaderEvaluator([deep] * 3, mode="replay", num_cached_batches=2, sample_interval_s=None)
    assert sum(1 for _ in ev) == 3


@pytest.mark.slow
def test_ctrl_c_while_waiting_in_next_is_a_stop_not_a_source_error(tmp_path):
    path = str(tmp_path / "r.json")
    ev = LoaderEvaluator(
        DataLoader(SleepyItems(400, 0.02), batch_size=4), metrics_file=path, sample_interval_s=None
    )
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    assert load_run(path).blocks[0]["status"] == "stopped"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_persistent_workers_loader_is_left_as_it_was():

    def children() -> set[int]:
        return {c.pid for c in psutil.Process().children() if c.is_running()}

    others = children()  # what other tests may still be reaping
    dl = DataLoader(
        TensorDataset(torch.zeros(40, 2)), batch_size=4, num_workers=2, persistent_workers=True
    )
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert dl._iterator is None and not children() - others  # none it did not have
    for _ in dl:  # the user's own workers, running
        pass
    mine = children() - others
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, sample_interval_s=None)
    ev.close()
    run = run_pair(
        dl, lambda e: [None for _ in e], RunSettings(steps=4, warmup=1, sample_interval_s=None)
    )
    assert run.ok
    assert children() - others == mine and len(mine) == 2  # not stopped, not replaced
    from loadeval_nb.core._shared import shutdown_persistent_workers

    shutdown_persistent_workers(dl)


@pytest.mark.parametrize(("value", "path"), [("0", "C"), ("", "C"), ("1", "Python")])
def test_pure_python_switch_reads_as_it_says(value, path):
    code = "from loadeval_nb.measure import step_path; print(step_path())"
    env = {**os.environ, "LOADEVAL_NB_PURE_PYTHON": value}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    from loadeval_nb.measure import step_path

    if step_path() == "Python" and path == "C":  # the extension is not built here
        pytest.skip("the C path is not built in this environment")
    assert got.stdout.strip() == path


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
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
        "mode must be 'log' or 'replay' or 'pair', not 'train'.",
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
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)
