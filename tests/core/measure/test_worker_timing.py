"""WorkerFetchTimer: batch production times measured inside DataLoader workers."""

from __future__ import annotations

import os

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from loadeval_nb.core.errors import LoadEvalError
from loadeval_nb.core.measure import WorkerFetchTimer
from tests.workloads import SleepyItems, take

SAMPLE_S = 0.005
SAMPLE_NS = 5_000_000
BATCH = 4


class SleepyStream(IterableDataset):
    """``n`` samples, each taking SAMPLE_S on a fake ``clock`` (the worker's own copy)."""

    def __init__(self, n: int, clock) -> None:
        self.n, self.clock = n, clock

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(wid, self.n, nw):
            take(SAMPLE_S, self.clock)
            yield torch.tensor([i])


class MarkerInit:
    """A user worker_init_fn with a side effect the test can check (a file per worker)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def __call__(self, worker_id: int) -> None:
        with open(os.path.join(self.folder, f"w{worker_id}-{os.getpid()}"), "w") as f:
            f.write("ran")


def test_map_style_timings_arrive_from_every_worker(tmp_path, clock):
    # a fake clock, copied into each forked worker: the dataset moves the copy the timer reads
    init = MarkerInit(str(tmp_path))
    loader = DataLoader(
        SleepyItems(40, SAMPLE_S, clock), batch_size=BATCH, num_workers=2, worker_init_fn=init
    )
    timer = WorkerFetchTimer(loader, clock=clock)
    assert timer.available and timer.reason is None
    got = list(timer.iter())
    records = timer.collect()
    timer.close()

    assert loader.worker_init_fn is init  # restored, the very same object
    assert len(got) == len(loader) == 10
    assert len(records) == len(loader)  # every batch produced, recorded before it was sent
    assert {w for w, _, _ in records} == {0, 1}
    # each batch: 4 samples of 5 ms, exactly, timed around the fetch inside its worker
    assert [t1 - t0 for _, t0, t1 in records] == [BATCH * SAMPLE_NS] * len(loader)
    # the user's own init ran in both workers, in the worker processes
    marks = sorted(p.name.split("-")[0] for p in tmp_path.iterdir())
    assert marks == ["w0", "w1"]
    assert all(int(p.name.split("-")[1]) != os.getpid() for p in tmp_path.iterdir())


def test_batches_are_identical_to_an_uninstrumented_loader():
    ds = SleepyItems(24, 0.0)
    plain = list(DataLoader(ds, batch_size=BATCH, num_workers=2))
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2)
    timer = WorkerFetchTimer(loader)
    timed = list(timer.iter())
    timer.close()
    assert len(timed) == len(plain)
    assert all(torch.equal(a, b) for a, b in zip(timed, plain))


def test_partial_epoch_counts_prefetched_batches():
    loader = DataLoader(SleepyItems(80, 0.0), batch_size=BATCH, num_workers=2)
    timer = WorkerFetchTimer(loader)
    it = timer.iter()
    for _ in range(3):
        next(it)
    seen = len(timer.load_ns())
    del it
    timer.close()
    assert 3 <= seen <= 3 + 2 * 2  # consumed plus at most prefetch_factor * workers


def test_iterable_dataset_is_timed(clock):
    loader = DataLoader(SleepyStream(32, clock), batch_size=BATCH, num_workers=2)
    timer = WorkerFetchTimer(loader, clock=clock)
    got = list(timer.iter())
    durations = timer.load_ns()
    timer.close()
    assert sorted(int(x) for b in got for x in b.flatten()) == list(range(32))
    assert len(durations) == len(got) == 8  # the StopIteration fetches are not recorded
    assert list(durations) == [BATCH * SAMPLE_NS] * 8


def test_persistent_workers_keep_recording_across_epochs():
    loader = DataLoader(
        SleepyItems(16, 0.0), batch_size=BATCH, num_workers=2, persistent_workers=True
    )
    timer = WorkerFetchTimer(loader)
    for _ in range(2):
        assert len(list(timer.iter())) == 4
    assert len(timer.collect()) == 8
    assert loader.worker_init_fn is None
    timer.close()
    loader._iterator._shutdown_workers()


def test_persistent_workers_started_before_the_timer_are_reported():
    loader = DataLoader(
        SleepyItems(8, 0.0), batch_size=BATCH, num_workers=1, persistent_workers=True
    )
    list(loader)
    timer = WorkerFetchTimer(loader)
    assert len(list(timer.iter())) == 2
    assert not timer.available and "before the timer" in timer.reason
    assert timer.collect() == []
    loader._iterator._shutdown_workers()


def test_num_workers_zero_is_a_plain_iter():
    loader = DataLoader(SleepyItems(8, 0.0), batch_size=BATCH)
    timer = WorkerFetchTimer(loader)
    assert not timer.available
    assert timer.reason.startswith("num_workers=0")
    assert len(list(timer.iter())) == 2
    assert timer.collect() == [] and timer.load_ns() == []


def test_non_dataloader_iterable():
    batches = [torch.zeros(2), torch.ones(2)]
    timer = WorkerFetchTimer(batches)
    assert not timer.available and "list" in timer.reason
    assert list(timer.iter()) == batches
    assert timer.collect() == []


def test_ring_overflow_is_counted_not_fatal():
    loader = DataLoader(SleepyItems(40, 0.0), batch_size=BATCH, num_workers=2)
    timer = WorkerFetchTimer(loader, capacity=4)
    assert len(list(timer.iter())) == 10
    records = timer.collect()
    # 10 records in a ring of 4: the oldest slot left (record 6) is not trusted either,
    # since a worker could be writing record 10 into it while it is read
    assert len(records) == 3 and timer.lost == 7
    timer.close()


def test_bad_capacity():
    with pytest.raises(LoadEvalError, match="capacity"):
        WorkerFetchTimer([], capacity=0)


def test_iter_after_close_times_again():
    loader = DataLoader(SleepyItems(8, 0.0), batch_size=BATCH, num_workers=1)
    timer = WorkerFetchTimer(loader)
    list(timer.iter())
    timer.close()
    list(timer.iter())
    assert len(timer.collect()) == 4  # two epochs, the first one kept
    timer.close()


@pytest.fixture(scope="module")
def resource_tracker():
    """spawn starts multiprocessing's resource tracker once per interpreter; start it
    before the leak check looks, so it is not mistaken for a leaked worker."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@pytest.mark.slow
def test_spawn_context_pickles_the_hook(tmp_path, resource_tracker):
    loader = DataLoader(
        SleepyItems(8, SAMPLE_S),
        batch_size=BATCH,
        num_workers=1,
        multiprocessing_context="spawn",
        worker_init_fn=MarkerInit(str(tmp_path)),
    )
    timer = WorkerFetchTimer(loader)
    assert len(list(timer.iter())) == 2
    assert len(timer.load_ns()) == 2
    timer.close()
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == ["w0"]


@pytest.mark.slow
def test_second_timer_on_persistent_workers_keeps_timing():
    """A cell run twice on a persistent_workers loader: the second run still gets timings
    (its timer reads the buffer the still-running, still-patched workers fill)."""
    from torch.utils.data import DataLoader

    from loadeval_nb.core.measure import WorkerFetchTimer

    dl = DataLoader(SleepyItems(24, 0.002), batch_size=4, num_workers=2, persistent_workers=True)
    first = WorkerFetchTimer(dl)
    assert len(list(first.iter())) == 6
    n_first = len(first.load_ns())
    first.close()
    second = WorkerFetchTimer(dl)
    assert len(list(second.iter())) == 6
    assert second.available, second.reason
    assert len(second.load_ns()) == 6  # only the second epoch's batches
    assert n_first == 6
    second.close()
    dl._iterator._shutdown_workers()
