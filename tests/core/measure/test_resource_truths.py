"""Ground truths of the resource reading: real DataLoader workers whose resource is known
(burning CPU, sleeping, reading files past the page cache, idle behind a slow step,
fighting the training's intra-op threads), each named right with its numbers in a broad
range. They run real workers on a 2-core machine: classifications and wide ranges only,
each retried once, and skipped when other processes loaded the machine twice."""

from __future__ import annotations

import io
import mmap
import os
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb.core.measure import LoaderEvaluator
from loadeval_nb.core.measure.resource import RUNQ_SHARE, WorkerResource
from tests.timing import retry_once

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="reads Linux's /proc"),
]

MiB = 1 << 20


def burn(seconds: float) -> None:
    """A pure-Python loop until this thread has used ``seconds`` of CPU."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        x += 1


class Burning(Dataset):
    def __init__(self, n: int, cpu_s: float) -> None:
        self.n, self.cpu_s = n, cpu_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        burn(self.cpu_s)
        return torch.zeros(3)


class Sleeping(Burning):
    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.cpu_s)
        return torch.zeros(3)


class Files(Dataset):
    """Each item reads a whole file from storage: ``O_DIRECT`` into an aligned buffer
    where the file system allows it, else after dropping the file from the page cache."""

    def __init__(self, paths: list[str], rounds: int) -> None:
        self.paths, self.rounds = paths, rounds
        self.buf: mmap.mmap | None = None

    def __len__(self) -> int:
        return len(self.paths) * self.rounds

    def __getitem__(self, i: int) -> torch.Tensor:
        path = self.paths[i % len(self.paths)]
        size = os.path.getsize(path)
        if self.buf is None:  # page-aligned, reused: no page faults of its own
            self.buf = mmap.mmap(-1, size)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        except OSError:  # a file system without O_DIRECT (tmpfs): drop the cache instead
            fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n = os.readv(fd, [self.buf])
        finally:
            os.close(fd)
        return torch.tensor([n])


def measure(ds: Dataset, step=None, batch_size: int = 1) -> WorkerResource:
    loader = DataLoader(ds, batch_size=batch_size, num_workers=2)
    ev = LoaderEvaluator(loader, worker_timing=True)
    for _ in ev:
        if step is not None:
            step()
    ev.close()
    reading = ev.to_run().worker_resource
    assert reading is not None, "no reading of the workers"
    r = WorkerResource.from_dict(reading)
    summary = io.StringIO()
    ev.print_summary(file=summary)  # the text report says it too, in the same words
    assert f"  Workers: {r.text()}" in summary.getvalue(), summary.getvalue()
    return r


@retry_once
def test_workers_burning_cpu_are_cpu_bound():
    r = measure(Burning(24, 0.04))
    assert r.kind == "cpu", r.text()
    # on a CPU, or waiting for one on a busy machine: wanting a CPU most of the time
    assert r.on_cpu >= 0.1 and r.on_cpu + (r.runq or 0) >= 0.6, r.text()
    assert r.waiting < 0.3 and (r.idle or 0) < 0.3, r.text()
    assert r.read_bytes is None or r.read_bytes < MiB, r.text()
    assert r.workers == 2 and 0.5 <= r.worker_s <= 30, r.text()


@retry_once
def test_sleeping_workers_wait_not_on_a_cpu():
    r = measure(Sleeping(48, 0.05))
    assert r.kind == "waiting", r.text()
    assert r.on_cpu < 0.25 and r.waiting >= 0.35, r.text()
    assert r.read_bytes is None or r.read_bytes < MiB, r.text()
    assert "neither on a CPU nor on storage" in r.text()


def files_on_storage(folder: Path, n: int = 4) -> list[str]:
    """``n`` files of 4 MiB of random bytes in ``folder``, written back to storage, so
    that dropping their pages then forces reads from it."""
    paths = []
    for k in range(n):
        p = folder / f"part{k}.bin"
        p.write_bytes(os.urandom(4 * MiB))
        paths.append(str(p))
    os.sync()
    return paths


def rounds_for(paths: list[str], worker_s: float = 1.5) -> int:
    """Rounds over ``paths`` for the workers to spend about ``worker_s`` reading them: one
    round read here first, timed (24 at least; a fast disk needs more for the 0.5
    worker-seconds a reading needs, and read 0.4 in 24 once)."""
    one = Files(paths, 1)
    start = time.perf_counter()
    for i in range(len(one)):
        one[i]
    per_round = max(time.perf_counter() - start, 1e-4)
    return max(24, min(400, int(worker_s / per_round) + 1))


@retry_once
def test_workers_reading_files_wait_on_storage(tmp_path):
    paths = files_on_storage(tmp_path)
    rounds = rounds_for(paths)
    r = measure(Files(paths, rounds))
    if r.read_bytes is not None and r.read_bytes < 4 * MiB:
        pytest.skip(f"the page cache served the files (read {r.read_bytes} B): {r.text()}")
    assert r.kind == "storage", r.text()
    if r.read_bytes is not None:  # the workers read what the files hold, give or take
        assert 0.5 * 16 * MiB * rounds <= r.read_bytes <= 1.5 * 16 * MiB * rounds, r.text()
    assert r.on_cpu < 0.5, r.text()


@retry_once
def test_workers_behind_a_slow_step_sit_idle():
    r = measure(Burning(40, 0.002), step=lambda: time.sleep(0.04))
    assert r.kind == "idle", r.text()
    assert r.idle is not None and r.idle >= 0.6, r.text()
    assert r.loop_wait_share is not None and r.loop_wait_share < 0.3, r.text()


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@retry_once
def test_workers_fight_the_training_intra_op_threads(two_threads):
    # two CPU-burning workers and a step of 2-thread matmuls on 2 cores: four threads
    # that want a core each; the workers wait for one about half the time they want one
    a = torch.randn(500, 500)

    def step() -> None:
        for _ in range(8):
            a @ a

    r = measure(Burning(30, 0.06), step=step)
    assert r.kind == "threads", r.text()
    assert r.runq is not None and r.runq >= RUNQ_SHARE * (r.on_cpu + r.runq), r.text()
    assert r.main_cpu_pct is not None and r.main_cpu_pct >= 50, r.text()
    assert "the training process used" in r.text()
