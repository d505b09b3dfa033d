"""The fault catalogue (plain Python and an in-process shell): runs that go wrong.

Each case asserts what the user is shown (their own exception, unchanged, or the
tool's one sentence), that nothing is lost (the partial run log is on disk and loads,
with the steps that ran), that the user's loader and data are as they were, and that
no temporary file or journal is left; the suite's ``no_leaks`` fixture adds that no
thread or worker process outlived the case. Faults in a real kernel (interrupts
included) are in ``test_catalogue_kernel.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset

from loadeval_nb import LoaderEvaluator, RunSettings, load_run, run_pair

from ..ipython_shell import ipython_shell

# ---- what every case checks ---------------------------------------------------------------


@dataclass
class User:
    data: torch.Tensor
    tmp: str

    def loader(self, **kw: Any) -> DataLoader:
        return DataLoader(TensorDataset(self.data), batch_size=4, **kw)


@pytest.fixture
def user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return User(torch.arange(128.0).reshape(64, 2), str(tmp_path))


def loader_state(loader: Any) -> Any:
    d = getattr(loader, "__dict__", {})
    return {k: v for k, v in d.items() if not k.startswith("_") or k == "_iterator"}


def nothing_left(folder: str, logs: tuple[str, ...]) -> None:
    """Only the run logs are in the folder: no temporary file, probe or journal."""
    found = sorted(os.listdir(folder))
    extra = [f for f in found if f not in logs]
    assert not extra, f"left behind: {extra}"


def logged(path: str, steps: Optional[int], status: str) -> None:
    run = load_run(path)
    assert run.status == status
    if steps is not None:
        assert run.n_steps == steps


# ---- faults in the loop body ---------------------------------------------------------------


class Boom(Exception):
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


# ---- faults in the source ------------------------------------------------------------------


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


# ---- odd batches: replayed as they came -------------------------------------------------------

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


# ---- a pair that fails part-way --------------------------------------------------------------


def fails_in(which: str, exc: BaseException) -> Callable[[LoaderEvaluator], None]:
    def run_once(ev: LoaderEvaluator) -> None:
        for k, _b in enumerate(ev):
            if ev.mode == which and k == 5:
                raise exc

    return run_once


PAIR = [
    ("real-raises", fails_in("log", Boom("real failed")), "real", Boom, 6, None),
    ("ideal-raises", fails_in("replay", Boom("ideal failed")), "ideal", Boom, 16, 6),
    ("real-interrupted", fails_in("log", KeyboardInterrupt()), "real", KeyboardInterrupt, 6, None),
    (
        "ideal-interrupted",
        fails_in("replay", KeyboardInterrupt()),
        "ideal",
        KeyboardInterrupt,
        16,
        6,
    ),
]


@pytest.mark.parametrize(
    ("name", "run_once", "failed", "kind", "real_steps", "ideal_steps"),
    PAIR,
    ids=[p[0] for p in PAIR],
)
def test_a_pair_that_fails(user, name, run_once, failed, kind, real_steps, ideal_steps):
    loader = user.loader(num_workers=1)
    before, data = loader_state(loader), user.data.clone()
    res = run_pair(
        loader, run_once, RunSettings(steps=20, warmup=2, num_cached_batches=3, log_dir="logs")
    )
    assert isinstance(res.error, kind) and res.failed == failed
    logs = sorted(os.listdir("logs"))
    assert len(logs) == (1 if ideal_steps is None else 2)
    real_log = next(f for f in logs if "real" in f)
    logged(
        os.path.join("logs", real_log), real_steps, "stopped" if failed == "real" else "complete"
    )
    if ideal_steps is not None:
        logged(os.path.join("logs", next(f for f in logs if "ideal" in f)), ideal_steps, "stopped")
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


def test_a_sampler_that_fails_does_not_stop_the_run(user, monkeypatch):
    import psutil

    def broken(self, *a, **k):
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(psutil.Process, "cpu_percent", broken)
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(user.loader(), metrics_file=path, sample_interval_s=0.01)
    for _ in ev:
        time.sleep(0.005)
    ev.close()
    logged(path, 16, "complete")
    nothing_left(user.tmp, ("run.json",))


def test_a_log_folder_removed_during_the_run_is_said_and_the_run_goes_on(user, caplog):
    folder = os.path.join(user.tmp, "gone")
    os.makedirs(folder)
    ev = LoaderEvaluator(user.loader(), metrics_file=os.path.join(folder, "run.json"))
    for k, _ in enumerate(ev):
        if k == 2:
            os.rmdir(folder)
            open(folder, "w").close()  # a file where the folder was: the write must fail
    ev.close()
    assert ev.to_run().n_steps == 16  # kept in memory
    assert any("could not write" in r.getMessage() for r in caplog.records)
    os.remove(folder)
    nothing_left(user.tmp, ())


def test_a_failed_write_keeps_the_previous_log(user, monkeypatch, caplog):
    path = os.path.join(user.tmp, "run.json")
    first = LoaderEvaluator(user.loader(), metrics_file=path)
    list(first)
    first.close()
    before = load_run(path).step_ns

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    second = LoaderEvaluator(user.loader(), metrics_file=path)
    monkeypatch.setattr(os, "replace", disk_full)
    list(second)  # its write fails half-way: said, and the previous log stays whole
    second.close()
    monkeypatch.undo()
    assert load_run(path).step_ns == before
    assert any("No space left on device" in r.getMessage() for r in caplog.records)
    nothing_left(user.tmp, ("run.json",))
    second.save_metrics(quiet=True)  # the run was kept in memory: written once there is room
    assert load_run(path).step_ns == second.to_run().step_ns != before


# ---- a process killed part-way -------------------------------------------------------------

KILLED = textwrap.dedent(
    """
    import sys, time
    from loadeval_nb import LoaderEvaluator
    ev = LoaderEvaluator(list(range(50)), metrics_file=sys.argv[1], sample_interval_s=None)
    for epoch in range(1000):
        for _ in ev:
            pass
        print(epoch, flush=True)
        if epoch == 40:
            time.sleep(60)  # killed here
    """
)


def test_a_process_killed_after_many_epochs_keeps_them(user):
    path = os.path.join(user.tmp, "run.json")
    proc = subprocess.Popen([sys.executable, "-c", KILLED, path], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.strip() == "40":
                break
        proc.kill()
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    run = load_run(path)  # the document and its journal
    assert run.n_steps == 41 * 50 and max(run.epoch) == 40
    leftovers = set(os.listdir(user.tmp)) - {"run.json", "run.json.journal"}
    assert not leftovers


# ---- the magic in an in-process shell ------------------------------------------------------

QUIET = "--steps 24 --warmup 2 --cache 3 --quiet --log-dir logs"
RAISE_AT_5 = "for k, b in enumerate(train_loader):\n    if k == 5:\n        raise {exc}\n"
RAISE_IN_IDEAL = (
    "for k, b in enumerate(train_loader):\n"
    "    if k == 5 and train_loader.mode == 'replay':\n"
    "        raise {exc}\n"
)

SHELL = [
    # id, cell, exception, its text, failed run, logs written
    (
        "cell-raises-real",
        RAISE_AT_5.format(exc="Boom('cell failed')"),
        Boom,
        "cell failed",
        "real",
        1,
    ),
    (
        "cell-raises-ideal",
        RAISE_IN_IDEAL.format(exc="Boom('ideal failed')"),
        Boom,
        "ideal failed",
        "ideal",
        2,
    ),
    (
        "cell-interrupted",
        RAISE_AT_5.format(exc="KeyboardInterrupt"),
        KeyboardInterrupt,
        "",
        "real",
        1,
    ),
    (
        "cell-interrupted-ideal",
        RAISE_IN_IDEAL.format(exc="KeyboardInterrupt"),
        KeyboardInterrupt,
        "",
        "ideal",
        2,
    ),
    (
        "cell-rebinds-and-raises",
        "for k, b in enumerate(train_loader):\n    train_loader = None\n    raise Boom('x')\n",
        Boom,
        "x",
        "real",
        1,
    ),
    ("cell-breaks", "for k, b in enumerate(train_loader):\n    break\n", None, None, None, 2),
]


@pytest.mark.parametrize(
    ("name", "cell", "kind", "text", "failed", "n_logs"), SHELL, ids=[s[0] for s in SHELL]
)
def test_fault_in_a_cell(user, name, cell, kind, text, failed, n_logs):
    loader = user.loader(num_workers=1)
    before, data = loader_state(loader), user.data.clone()
    with ipython_shell(train_loader=loader, Boom=Boom) as ip:
        if kind is None:
            ip.run_cell_magic("loadeval", f"train_loader {QUIET}", cell)
        else:
            with pytest.raises(kind) as info:
                ip.run_cell_magic("loadeval", f"train_loader {QUIET}", cell)
            assert str(info.value) == text
        assert ip.user_ns["train_loader"] is loader  # the name is restored
        res = ip.user_ns["_loadeval"]
        assert res.failed == failed
    logs = sorted(os.listdir("logs"))
    assert len(logs) == n_logs
    for f in logs:
        assert load_run(os.path.join("logs", f)).n_steps >= 1
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


@pytest.mark.parametrize("what", ["--ladder", '--sweep "num_workers=0,1"'])
def test_a_ladder_or_sweep_cell_that_fails(user, what):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    cell = RAISE_IN_IDEAL.format(exc="Boom('late')").replace(
        "train_loader.mode == 'replay'", "True"
    )
    with ipython_shell(train_loader=loader, Boom=Boom) as ip:
        with pytest.raises(Boom, match="late"):
            ip.run_cell_magic("loadeval", f"train_loader {QUIET} {what}", cell)
        assert ip.user_ns["train_loader"] is loader
    logs = sorted(os.listdir("logs"))
    assert logs and all(load_run(os.path.join("logs", f)).n_steps == 6 for f in logs)
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))
