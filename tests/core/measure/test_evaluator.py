"""LoaderEvaluator: DALI-compatible API, drop-in behaviour, bad input, replay caching."""

from __future__ import annotations

import io
import json
import time
import warnings

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, load_run
from loadeval_nb.errors import CacheBudgetError, CacheMutationWarning
from tests.workloads import SleepyItems


def tensor_loader(n=64, batch_size=8, **kw):
    return DataLoader(
        TensorDataset(torch.arange(n, dtype=torch.float32).view(n, 1), torch.arange(n)),
        batch_size=batch_size,
        **kw,
    )


def live_children(before=frozenset()):
    """This process's children still running, but those in ``before`` (started by an
    earlier test and kept: the resource tracker of a spawn context)."""
    return [
        p
        for p in psutil.Process().children()
        if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE
    ]


def children_now():
    return frozenset(p.pid for p in live_children())


class Counting:
    """An iterable that counts how many batches were pulled from it."""

    def __init__(self, n):
        self.n, self.pulled = n, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        for i in range(self.n):
            self.pulled += 1
            yield torch.full((4, 2), float(i))


def test_dali_surface():
    dl = tensor_loader()
    ev = LoaderEvaluator(dl, mode="log", num_cached_batches=20, metrics_file=None)
    assert ev.dataloader is dl and ev.mode == "log" and ev.num_cached_batches == 20
    assert ev.metrics_file is None and ev.cached_batches == [] and ev.cache_ready is False
    assert ev.get_metrics() == {}
    for _ in ev:
        pass
    m = ev.get_metrics()
    for key in (
        "mode",
        "total_batches",
        "total_time",
        "avg_batch_time",
        "min_batch_time",
        "max_batch_time",
        "batch_times",
    ):
        assert key in m
    assert m["total_batches"] == 8 and len(m["batch_times"]) == 8
    assert m["min_batch_time"] <= m["avg_batch_time"] <= m["max_batch_time"]


def test_drop_in_iteration_len_and_attributes():
    dl = tensor_loader(n=20, batch_size=8)
    ev = LoaderEvaluator(dl, sample_interval_s=None)
    assert len(ev) == len(dl) == 3
    assert ev.batch_size == 8 and ev.dataset is dl.dataset and ev.sampler is dl.sampler
    got = [y.tolist() for _, y in ev]
    assert got == [y.tolist() for _, y in dl]
    with pytest.raises(AttributeError):
        ev.no_such_attribute


def test_set_epoch_passes_through():
    class WithEpoch(list):
        epoch = None

        def set_epoch(self, e):
            self.epoch = e

    src = WithEpoch([1, 2, 3])
    ev = LoaderEvaluator(src, sample_interval_s=None)
    ev.set_epoch(4)
    assert src.epoch == 4


def test_unknown_mode_is_value_error():
    with pytest.raises(ValueError, match="mode must be 'log' or 'replay'"):
        LoaderEvaluator([1, 2], mode="fast")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_cached_batches": 0}, "num_cached_batches must be an integer >= 1"),
        ({"steps": -1}, "steps must be an integer >= 1 or None"),
        ({"warmup": 1.5}, "warmup must be an integer >= 0"),
        ({"cache_on": "disk"}, "cache_on must be 'host' or 'device'"),
        ({"sample_interval_s": 0}, "sample_interval_s must be a number of seconds from 0.01"),
    ],
)
def test_bad_arguments_one_sentence(kwargs, match):
    with pytest.raises(LoadEvalError, match=match) as e:
        LoaderEvaluator([torch.zeros(1)], **kwargs)
    assert str(e.value).count(". ") == 0 and str(e.value).endswith(".")


def test_non_iterable():
    with pytest.raises(
        LoadEvalError, match="needs an iterable of batches such as a DataLoader, not an int"
    ):
        LoaderEvaluator(3)


def test_wrapping_an_evaluator_is_refused():
    with pytest.raises(LoadEvalError, match="already a LoaderEvaluator"):
        LoaderEvaluator(LoaderEvaluator([1], sample_interval_s=None))


def test_replay_of_empty_loader():
    empty = DataLoader(TensorDataset(torch.empty(0, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="produced no batches"):
        LoaderEvaluator(empty, mode="replay")


def test_replay_of_unsized_source_needs_max_steps():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(100))

    dl = DataLoader(Stream(), batch_size=4)
    with pytest.raises(LoadEvalError, match="has no len\\(\\); pass steps=N"):
        LoaderEvaluator(dl, mode="replay")
    ev = LoaderEvaluator(dl, mode="replay", steps=7, num_cached_batches=3, sample_interval_s=None)
    assert len(ev) == 7 and sum(1 for _ in ev) == 7


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_device_cache_without_cuda():
    with pytest.raises(LoadEvalError, match="needs a CUDA device.*use cache_on='host'"):
        LoaderEvaluator(tensor_loader(), mode="replay", cache_on="device")


class CountingSet(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n, self.pulled = n, 0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.pulled += 1
        return torch.full((2,), float(i))


def test_replay_pulls_exactly_n_batches_where_len_bounds_the_epoch():
    ds = CountingSet(100)
    ev = LoaderEvaluator(
        DataLoader(ds, batch_size=1), mode="replay", num_cached_batches=5, sample_interval_s=None
    )
    assert ds.pulled == 5 and len(ev.cached_batches) == 5 and ev.cache_ready
    assert sum(1 for _ in ev) == 100
    assert ds.pulled == 5  # replay never touches the source again


@pytest.mark.parametrize("held, said", [(100, 100), (30, 1000), (30, None)])
def test_replay_counts_an_epoch_its_len_does_not_bound(held, said):
    # an iterable's len() is its own word (an IterableDataset's may overstate the stream):
    # the replay counts the loader's batches as it fills its cache, up to the steps asked,
    # and never hands the loop more than the loader would
    src = Counting(held)
    if said is not None:
        src.n = said
        src.__class__ = type("Lying", (Counting,), {"__iter__": _first(held)})
    ev = LoaderEvaluator(src, mode="replay", num_cached_batches=5, steps=60, sample_interval_s=None)
    assert len(ev.cached_batches) == 5 and src.pulled == min(held, 60)
    assert len(ev) == sum(1 for _ in ev) == min(held, 60)


def _first(n):
    def it(self):
        for i in range(n):
            self.pulled += 1
            yield torch.full((4, 2), float(i))

    return it


def test_replay_shuts_workers_down_before_first_step():
    before = children_now()
    dl = tensor_loader(n=256, batch_size=8, num_workers=2)
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=3, sample_interval_s=None)
    assert live_children(before) == []
    assert sum(1 for _ in ev) == len(dl)
    # the user's loader still works as before
    assert sum(1 for _ in dl) == len(dl)


def test_cache_budget_refused_with_advice_and_workers_stopped():
    before = children_now()
    dl = tensor_loader(n=256, batch_size=8, num_workers=2)
    with pytest.raises(
        CacheBudgetError, match=r"pass num_cached_batches=\d+ or less, or raise cache_budget_bytes"
    ):
        LoaderEvaluator(dl, mode="replay", num_cached_batches=20, cache_budget_bytes=100)
    assert live_children(before) == []


def test_cache_bytes_recorded():
    ev = LoaderEvaluator(Counting(10), mode="replay", num_cached_batches=3, sample_interval_s=None)
    assert ev.cache_bytes == 3 * 4 * 2 * 4
    for _ in ev:
        pass
    assert ev.to_run().settings["cache_bytes"] == 96


def test_host_cache_keeps_batches_as_produced():
    dl = tensor_loader()
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, sample_interval_s=None)
    first = next(iter(ev))
    assert first is ev.cached_batches[0]


def test_in_place_modification_warns_once():
    ev = LoaderEvaluator(Counting(6), mode="replay", num_cached_batches=2, sample_interval_s=None)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            for x in ev:
                x.mul_(2)
    assert sum(issubclass(i.category, CacheMutationWarning) for i in w) == 1


def test_out_of_place_loop_does_not_warn():
    ev = LoaderEvaluator(Counting(6), mode="replay", num_cached_batches=2, sample_interval_s=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheMutationWarning)
        for x in ev:
            x = x * 2


def test_print_summary_on_plain_iterable_without_dataset():
    ev = LoaderEvaluator([torch.zeros(2, 2)] * 3, sample_interval_s=None)
    for _ in ev:
        pass
    buf = io.StringIO()
    ev.print_summary(file=buf)
    out = buf.getvalue()
    assert out.startswith("Loader Evaluator Summary:")
    assert "Dataset size: unknown" in out and "Total batches processed: 3" in out


def test_metrics_file_written_at_epoch_end_and_after_break(tmp_path):
    path = tmp_path / "real.json"
    ev = LoaderEvaluator(tensor_loader(), metrics_file=str(path), sample_interval_s=None)
    for k, _ in enumerate(ev):
        if k == 3:
            break
    run = load_run(path)
    assert run.n_steps == 4 and run.status == "stopped"
    for _ in ev:
        pass
    assert load_run(path).n_steps == 4 + 8


def test_save_metrics_without_a_name(capsys):
    ev = LoaderEvaluator([1, 2], sample_interval_s=None)
    assert ev.save_metrics() is None
    assert "No filename provided" in capsys.readouterr().out


def test_save_metrics_is_json(tmp_path):
    ev = LoaderEvaluator(tensor_loader(), sample_interval_s=None)
    list(ev)
    p = ev.save_metrics(str(tmp_path / "m.json"))
    doc = json.loads(open(p).read())
    assert doc["schema_version"] == 4 and doc["loader_settings"]["batch_size"] == 8
    assert doc["total_batches"] == len(doc["steps"]["step_ns"]) == len(doc["batch_times"])
    assert doc["loader_settings"]["num_workers"] == 0 and "pin_memory" in doc["loader_settings"]
    assert (
        "prefetch_factor" in doc["loader_settings"]
        and "persistent_workers" in doc["loader_settings"]
    )
    assert doc["environment"]["torch_version"] == torch.__version__


@pytest.mark.slow
def test_break_with_workers_stops_them_and_sampler():
    before = children_now()
    dl = tensor_loader(n=512, batch_size=8, num_workers=2)
    ev = LoaderEvaluator(dl, sample_interval_s=0.02)
    for k, _ in enumerate(ev):
        if k == 2:
            break
    assert not ev._sampler.running
    deadline = time.monotonic() + 5
    while live_children(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_children(before) == []


def test_exception_in_loop_body_keeps_partial_run(tmp_path):
    path = tmp_path / "r.json"
    ev = LoaderEvaluator(tensor_loader(), metrics_file=str(path), sample_interval_s=0.02)
    with pytest.raises(ZeroDivisionError):
        for k, _ in enumerate(ev):
            if k == 2:
                1 / 0
    assert load_run(path).n_steps == 3
    assert not ev._sampler.running


@pytest.mark.slow
def test_mapstyle_dataset_with_sleep_and_workers_roundtrip():
    dl = DataLoader(SleepyItems(16, 0.001), batch_size=4, num_workers=2)
    ev = LoaderEvaluator(dl, sample_interval_s=0.05)
    assert sorted(int(row[0]) for b in ev for row in b) == list(range(16))
    run = ev.to_run()
    assert run.util is not None and run.util["cpu"]["process_pct"] is not None
    assert run.util["gpu"]["util_pct"] is None or torch.cuda.is_available()


def test_metrics_inside_the_loop_do_not_end_the_epoch():
    dl = tensor_loader(n=64, batch_size=8, num_workers=2)
    ev = LoaderEvaluator(dl, sample_interval_s=0.02)
    seen = 0
    for k, _ in enumerate(ev):
        seen += 1
        if k == 3:
            m = ev.get_metrics()
            assert m["status"] == "running" and m["total_batches"] == 4
            assert ev._sampler.running
    assert seen == 8
    m = ev.get_metrics()
    assert m["status"] == "complete" and m["total_batches"] == 8


def test_run_pair_refuses_a_one_shot_iterator_and_starts_no_workers():
    from loadeval_nb.core.explore import RunSettings, run_pair
    from loadeval_nb.core.explore.runner import is_one_shot

    gen = (torch.zeros(2) for _ in range(50))
    with pytest.raises(LoadEvalError, match="one-shot iterator"):
        run_pair(gen, lambda ev: None, RunSettings(steps=10, warmup=2, num_cached_batches=2))
    assert is_one_shot(iter([1])) and not is_one_shot([1])
    dl = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2, num_workers=2)
    assert not is_one_shot(dl) and dl._iterator is None  # asked without iter(): no workers


@pytest.mark.parametrize("mode", ["log", "replay"])
def test_an_iterator_dropped_before_its_first_batch_is_not_an_epoch(mode):
    # Lightning calls iter() on a non-DataLoader to check it is iterable, then drops it
    ev = LoaderEvaluator(tensor_loader(), mode=mode, num_cached_batches=2, sample_interval_s=None)
    probe = iter(ev)
    del probe
    n = sum(1 for _ in ev)
    run = ev.to_run()
    assert run.status == "complete" and len(run.blocks) == 1 and run.n_steps == n


def test_the_run_is_frozen_at_close_and_fresh_after_another_epoch():
    ev = LoaderEvaluator(tensor_loader(), sample_interval_s=None)
    list(ev)
    open_run = ev.to_run()
    assert ev.to_run() is not open_run  # still open to more epochs: made each time
    ev.close()
    frozen = ev.to_run()
    assert ev.to_run() is frozen and frozen.n_steps == 8
    list(ev)  # another epoch: measured again
    assert ev.to_run() is not frozen and ev.to_run().n_steps == 16


def test_settings_are_checked_when_made_and_when_derived():
    import dataclasses
    import pickle

    from loadeval_nb import RunSettings
    from loadeval_nb.errors import OptionError

    s = RunSettings(steps=50, warmup=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.cache = 3
    with pytest.raises(OptionError, match="^warmup .* must be smaller than steps") as e:
        dataclasses.replace(s, warmup=60)
    assert e.value.option == "warmup"
    assert e.value.renamed("--warmup").startswith("--warmup (60) must be smaller")
    again = pickle.loads(pickle.dumps(e.value))  # errors cross processes (torchrun, workers)
    assert str(again) == str(e.value) and again.option == "warmup"
