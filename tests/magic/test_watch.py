"""``%loadeval_watch`` in an in-process IPython shell: a single pair written by another
thread of this process (as another process would write it), a folder that stays empty,
jobs that were done before the watch began, and bad input. (A 2-rank torchrun job is
watched in a real kernel: ``test_run_watch_kernel.py``.)"""

from __future__ import annotations

import os
import threading
import time

import pytest
from IPython.core.error import UsageError
from torch.utils.data import DataLoader

from loadeval_nb import Run, RunSettings, run_pair

from ..ipython_shell import ipython_shell
from ..workloads import SleepyItems


@pytest.fixture
def shell():
    with ipython_shell() as ip:
        yield ip


def _watched(shell, tmp_path, n: int, **settings):
    """A pair of ``n`` items of 2 ms (8 ms a batch) run by another thread with its logs in
    ``tmp_path``, watched to its end: (what the watch made of it, the job's own result)."""
    loader = DataLoader(SleepyItems(n, 0.002), batch_size=4)

    def train(batches):
        for _ in batches:
            time.sleep(0.002)

    both = RunSettings(steps=80, warmup=4, num_cached_batches=4, log_dir=str(tmp_path), **settings)
    done = []
    job = threading.Thread(target=lambda: done.append(run_pair(loader, train, both)))
    job.start()
    try:
        shell.run_line_magic("loadeval_watch", f"{tmp_path} --timeout 120")
    finally:
        job.join()
    return shell.user_ns["_loadeval"], done[0]


def test_a_pair_written_elsewhere_is_followed_to_its_verdict(shell, tmp_path):
    result, job = _watched(shell, tmp_path, 800)
    assert type(result).__name__ == "PairResult" and result.diagnosis is not None
    # the watch read what the job wrote: the same steps as the job's own result
    assert result.real.step_ns == job.real.step_ns
    assert result.ideal.step_ns == job.ideal.step_ns
    assert result.diagnosis.verdict == job.diagnosis.verdict


def test_the_watch_reads_the_variant_arm_and_what_it_bought(shell, tmp_path):
    result, job = _watched(shell, tmp_path, 1600, variants="num_workers=2")
    assert result.variant is not None and result.variant.step_ns == job.variant.step_ns
    assert result.diagnosis is not None and result.diagnosis.tried is not None
    assert result.diagnosis.tried.settings == {"num_workers": 2}
    assert result.diagnosis.tried.speedup == job.diagnosis.tried.speedup


def test_nothing_written_ends_at_the_timeout_and_says_so(shell, tmp_path):
    old = tmp_path / "loadeval-20250101-100000-real-rank0.json"
    Run(mode="log", start_ns=[0], step_ns=[1], blocks=[{"status": "complete"}]).save(str(old))
    past = time.time() - 3600
    os.utime(old, (past, past))
    shell.user_ns.pop("_loadeval", None)
    t = time.monotonic()
    shell.run_line_magic("loadeval_watch", f"{tmp_path} --timeout 0.5")
    assert time.monotonic() - t < 30
    assert "_loadeval" not in shell.user_ns  # the job done before the watch is not followed


def test_bad_input_is_one_sentence(shell, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("")
    with pytest.raises(UsageError, match=r"is a file; pass the folder the job writes"):
        shell.run_line_magic("loadeval_watch", str(f))
    with pytest.raises(UsageError, match=r"^--timeout must be a number of seconds > 0, not -1"):
        shell.run_line_magic("loadeval_watch", f"{tmp_path} --timeout -1")
