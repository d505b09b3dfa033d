"""Issue 12: nothing lost, nothing changed behind the user's back, every bad input one
sentence, refused before anything runs."""

from __future__ import annotations

import os

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, RunSettings, load_run, run_pair
from loadeval_nb.__main__ import main
from loadeval_nb.errors import CacheMutationWarning
from loadeval_nb.explore import parse_sweep

from ..ipython_shell import ipython_shell


def never_called(ev):
    raise AssertionError("the loop ran although the request should have been refused")


# ---- the user's data is never changed ------------------------------------------------------


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


# ---- logs are never overwritten --------------------------------------------------------------


def _loop(ev):
    for _ in ev:
        pass


def test_two_pairs_in_the_same_second_keep_four_logs(tmp_path):
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    s = RunSettings(
        steps=6, warmup=1, num_cached_batches=2, log_dir=str(tmp_path), sample_interval_s=None
    )
    a = run_pair(loader, _loop, s, label="same")
    b = run_pair(loader, _loop, s, label="same")
    paths = {*a.log_paths.values(), *b.log_paths.values()}
    assert len(paths) == 4 and all(os.path.exists(p) for p in paths)
    assert all(load_run(p).n_steps == 6 for p in paths)


def test_a_file_already_there_is_not_replaced(tmp_path):
    from loadeval_nb.core.explore.runner import claim_path

    mine = tmp_path / "loadeval-20260101-000000-x-real.json"
    mine.write_text("mine")
    first = claim_path(str(mine))
    assert first.endswith("-x-real-2.json")
    assert claim_path(str(mine)).endswith("-x-real-3.json")  # claimed, even before written
    assert mine.read_text() == "mine"


# ---- refused before anything runs ------------------------------------------------------------


def test_an_unwritable_log_dir_is_refused_before_the_loop(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="Cannot write run logs in .* pass a log_dir"):
        run_pair(loader, never_called, RunSettings(steps=6, warmup=1, log_dir=str(blocker / "sub")))


def test_a_metrics_file_that_is_a_directory_is_refused_at_construction(tmp_path):
    with pytest.raises(LoadEvalError, match="is a directory; pass a file path"):
        LoaderEvaluator([1, 2], metrics_file=str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left


def test_device_cache_without_cuda_is_refused_before_the_real_run():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="needs a CUDA device"):
        run_pair(loader, never_called, RunSettings(steps=6, warmup=1, cache_on="device"))


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


def test_a_pair_starts_the_users_loader_exactly_twice():
    starts = []

    class Counted(DataLoader):
        def __iter__(self):
            starts.append(1)
            return super().__iter__()

    loader = Counted(TensorDataset(torch.zeros(40, 3)), batch_size=4, num_workers=1)

    def run_once(ev):
        for _ in ev:
            pass

    res = run_pair(
        loader,
        run_once,
        RunSettings(steps=6, warmup=1, num_cached_batches=2, sample_interval_s=None),
    )
    assert res.ok, res.error
    assert len(starts) == 2  # the real run and the replay's cache fill, nothing else


def test_an_empty_loader_is_refused_before_the_real_run():
    loader = DataLoader(TensorDataset(torch.zeros(0, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="produced no batches"):
        run_pair(loader, never_called, RunSettings(steps=6, warmup=1))


# ---- sweeps and workers ----------------------------------------------------------------------


def test_dict_specs_are_read_like_string_specs():
    assert parse_sweep({"pin_memory": ["False"]}) == [{"pin_memory": False}]
    assert parse_sweep({"num_workers": "2"}) == parse_sweep("num_workers=2")
    with pytest.raises(LoadEvalError, match=r"pin_memory='yes' is not a value"):
        parse_sweep({"pin_memory": ["yes"]})
    with pytest.raises(LoadEvalError, match="num_workers must be an integer >= 0, not True"):
        parse_sweep({"num_workers": [True]})


def test_worker_counts_a_machine_cannot_take_are_refused(capsys):
    with pytest.raises(LoadEvalError, match=r"num_workers=100000 is more worker processes"):
        parse_sweep("num_workers=100000")
    assert main(["demo", "--workers", "100000", "--out", ""]) == 2
    assert "--workers=100000 is more worker processes" in capsys.readouterr().err


# ---- paths in the magic ----------------------------------------------------------------------


def test_quoted_log_dir_with_a_space(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with ipython_shell(train_loader=loader) as ip:
        ip.run_cell_magic(
            "loadeval",
            "train_loader --steps 6 --warmup 1 --cache 2 --quiet --log-dir 'runs/my runs'",
            "for b in train_loader:\n    pass\n",
        )
    written = list((tmp_path / "runs" / "my runs").glob("*.json"))
    assert len(written) == 2 and not (tmp_path / "'runs").exists()


# ---- atomic writes ---------------------------------------------------------------------------


def test_a_failed_report_leaves_the_previous_one(tmp_path, monkeypatch):
    import loadeval_nb.viz._comparison as comparison
    from loadeval_nb import Run, save_report

    def run(ms, mode):
        step = [int(ms * 1e6)] * 20
        return Run(mode=mode, start_ns=[i * step[0] for i in range(20)], step_ns=step)

    out = tmp_path / "report.html"
    out.write_text("the previous report")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(comparison, "file_html", boom)
    with pytest.raises(RuntimeError):
        save_report(run(20, "log"), run(10, "replay"), out)
    assert out.read_text() == "the previous report"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_write_that_fails_half_way_keeps_the_old_file(tmp_path):
    from loadeval_nb.core._files import atomic_open

    target = tmp_path / "log.json"
    target.write_text("old")
    with pytest.raises(OSError):
        with atomic_open(target) as f:
            f.write("half of the new")
            raise OSError("disk full")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["log.json"]


# ---- interrupts ------------------------------------------------------------------------------


def test_repeated_interrupts_while_finishing_keep_the_log(tmp_path, monkeypatch):
    import signal

    from loadeval_nb.core import UtilSampler

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
        loader, _loop, RunSettings(steps=8, warmup=1, num_cached_batches=2, sample_interval_s=None)
    )
    assert res.error is None and res.real.n_steps == res.ideal.n_steps == 8
    assert res.real.worker_load_ns is not None  # the real run's workers were timed
    from loadeval_nb.core._shared import shutdown_persistent_workers

    shutdown_persistent_workers(loader)
