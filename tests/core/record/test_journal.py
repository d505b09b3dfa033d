"""metrics_file's journal: a failed append leaves whole lines; one writer a path."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, load_run
from loadeval_nb.core.record import journal as journal_mod


def epochs_of(ev, n_epochs):
    for _ in range(n_epochs):
        for _batch in ev:
            pass


def evaluator(path):
    return LoaderEvaluator(list(range(100)), mode="log", metrics_file=path, sample_interval_s=None)


class _FullDisk:
    """A file of the journal whose disk fills halfway through a write."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(data[: len(data) // 2])
        self._f.flush()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


def said(caplog, words):
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


# ---- a full disk under log_dir -------------------------------------------------------------


def test_a_full_disk_leaves_the_journal_whole_and_says_so_once(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="loadeval_nb")
    # after the first whole document, each epoch is one journal line (never a rewrite)
    monkeypatch.setattr(journal_mod, "FULL_WRITE_SHARE", 1e-12)
    path = str(tmp_path / "run.json")
    journal = path + ".journal"
    ev = evaluator(path)
    epochs_of(ev, 5)
    with open(journal, "rb") as f:
        before = f.read()
    assert before.count(b"\n") == 4  # the first epoch is the document

    real_open = open
    with monkeypatch.context() as m:  # the disk is full: every append stops halfway
        m.setattr(journal_mod, "open", lambda *a, **k: _FullDisk(real_open(*a, **k)), raising=False)
        epochs_of(ev, 3)
    with open(journal, "rb") as f:
        assert f.read() == before  # the cut lines were taken back: whole lines only
    full = said(caplog, "could not append")
    assert len(full) == 1, full  # one sentence for three failed epochs
    assert journal in full[0] and "No space left on device" in full[0]
    assert load_run(path).n_steps == 500  # what was written before reads whole
    assert not said(caplog, "damaged")

    epochs_of(ev, 2)  # space again: the next line brings the epochs the disk refused too
    read = load_run(path)
    assert read.step_ns == ev.to_run().step_ns and read.n_steps == 1000
    assert not said(caplog, "damaged")
    ev.close()
    assert not os.path.exists(journal) and load_run(path).n_steps == 1000


def test_an_append_cut_by_an_interrupt_is_taken_back(tmp_path):
    path = str(tmp_path / "run.json")
    writer = journal_mod.MetricsWriter(path)
    try:
        ev = evaluator(None)
        epochs_of(ev, 1)
        writer.epoch_ended(lambda e, t: ev.to_run())  # the first: the whole document
        with open(writer.journal, "wb") as f:
            f.write(b'{"kind": "loadeval_nb.journal", "cut')  # an earlier crash's half line

        class Interrupted(_FullDisk):
            def write(self, data):
                self._f.write(data[:10])
                raise KeyboardInterrupt

        journal_mod.open = lambda *a, **k: Interrupted(open(*a, **k))
        try:
            with pytest.raises(KeyboardInterrupt):
                writer._append(ev.to_run())
        finally:
            del journal_mod.open
        with open(writer.journal, "rb") as f:
            assert f.read() == b'{"kind": "loadeval_nb.journal", "cut'  # as it was
    finally:
        writer.release()


# ---- two evaluators on one metrics_file ----------------------------------------------------

BUSY = "is being written by another evaluator .*; give each evaluator its own metrics_file"


def test_a_second_evaluator_on_a_live_metrics_file_is_refused(tmp_path):
    path = str(tmp_path / "run.json")
    first = evaluator(path)
    epochs_of(first, 2)  # writing
    with pytest.raises(LoadEvalError, match=BUSY) as info:
        evaluator(path)
    assert "(in this process)" in str(info.value) and repr(path) in str(info.value)
    with pytest.raises(LoadEvalError, match=BUSY):
        evaluator(os.path.join(str(tmp_path), ".", "run.json"))  # the same file, spelt otherwise
    with pytest.raises(LoadEvalError, match=BUSY):  # an interleaved pair, one side on it
        LoaderEvaluator(
            DataLoader(TensorDataset(torch.zeros(200, 1))),
            mode="pair",
            metrics_files={"real": path, "ideal": str(tmp_path / "ideal.json")},
        )
    first.close()  # its run is over: the path is free
    second = evaluator(path)
    epochs_of(second, 1)
    second.close()
    assert load_run(path).n_steps == 100  # the second run alone


def test_a_dropped_evaluator_does_not_hold_its_metrics_file(tmp_path):
    path = str(tmp_path / "run.json")
    first = evaluator(path)
    epochs_of(first, 2)
    first.cycle = first  # dropped without close(), in a reference cycle
    del first
    second = evaluator(path)
    epochs_of(second, 1)
    second.close()
    assert load_run(path).n_steps == 100


def test_both_sides_of_a_pair_on_one_metrics_file_are_refused(tmp_path):
    path = str(tmp_path / "run.json")
    with pytest.raises(LoadEvalError, match=BUSY):
        LoaderEvaluator(
            DataLoader(TensorDataset(torch.zeros(200, 1))),
            mode="pair",
            metrics_files={"real": path, "ideal": path},
        )
    ev = evaluator(path)  # nothing held after the refusal
    ev.close()


HOLDER = textwrap.dedent(
    """
    import sys
    from loadeval_nb.core.record.journal import MetricsWriter
    w = MetricsWriter(sys.argv[1])
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def test_a_metrics_file_another_process_writes_is_refused(tmp_path):
    path = str(tmp_path / "run.json")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "holding"
        with pytest.raises(LoadEvalError, match=BUSY) as info:
            evaluator(path)
        assert f"process {proc.pid}" in str(info.value)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    ev = evaluator(path)  # a killed writer holds nothing
    epochs_of(ev, 1)
    ev.close()
    assert os.listdir(tmp_path) == ["run.json"]  # and no lock beside the log


def test_lock_files_a_killed_writer_left_are_swept_and_the_folder_goes(tmp_path, monkeypatch):
    # every run left TMPDIR/loadeval_nb-locks/, and every stopped or killed run a .lock in
    # it that nothing removed: a writer sweeps the locks no process holds, and the last
    # one to let go removes the folder
    monkeypatch.setattr(journal_mod.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    locks = tmp_path / "tmp" / "loadeval_nb-locks"
    locks.mkdir()
    for k in range(10):  # ten killed writers' files (their flocks went with them)
        (locks / f"{k:032x}.lock").write_text("12345")
    path = str(tmp_path / "run.json")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},
    )
    try:
        assert proc.stdout.readline().strip() == "holding"
        held = os.listdir(locks)
        ev = evaluator(str(tmp_path / "other.json"))  # a writer of another log, here
        epochs_of(ev, 1)
        # the dead ones are gone; the live writer's lock and ours stay
        assert len(held) >= 1 and len(os.listdir(locks)) == 2, os.listdir(locks)
        ev.close()
        assert len(os.listdir(locks)) == 1  # the other process's, still held
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    ev = evaluator(path)  # a killed writer holds nothing: its lock is swept, and ours goes
    epochs_of(ev, 1)
    ev.close()
    assert not locks.exists()


def test_a_lock_held_for_a_moment_by_another_sweep_is_waited_for(tmp_path):
    # two ranks starting at once: one's sweep of stale lock files holds each for a moment,
    # and the other's claim of the same path read it as "being written by another
    # evaluator" (a launch failed 1 time in 20; a notebook's torchrun job 1 time in 4)
    import fcntl
    import threading

    path = str(tmp_path / "run.json")
    lock = journal_mod._lock_path(journal_mod._key(path))
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file: as another process
    threading.Timer(0.1, lambda: fcntl.flock(fd, fcntl.LOCK_UN)).start()
    try:
        writer = journal_mod.MetricsWriter(path)  # waits out the sweep's moment
        writer.release()
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        held = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held for good: a writer
        try:
            with pytest.raises(LoadEvalError, match="is being written by another evaluator"):
                journal_mod.MetricsWriter(path)
        finally:
            os.close(held)
    finally:
        os.close(fd)
