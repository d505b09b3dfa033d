"""Behaviour NVIDIA DALI's LoaderEvaluator promises, checked against ours.

Each test restates, in our own words, one expectation from DALI's unit tests
(NVIDIA/DALI ``dali/test/python/test_pytorch_loader_evaluator.py``) or, where
marked, from its implementation
(``dali/python/nvidia/dali/plugin/pytorch/loader_evaluator/loader.py``).
The one deliberate difference: an unknown ``mode`` is refused with ``ValueError``
(DALI keeps it and falls back to log mode).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator, load_run

DALI_METRIC_KEYS = {
    "mode",
    "total_batches",
    "total_time",
    "avg_batch_time",
    "min_batch_time",
    "max_batch_time",
    "batch_times",
}


def make_loader(n=40, batch_size=8, shuffle=False):
    """A small image-like (data, target) loader: ``ceil(n / batch_size)`` batches."""
    gen = torch.Generator().manual_seed(0)
    data = torch.randn(n, 3, 4, 4, generator=gen)
    targets = torch.randint(0, 10, (n,), generator=gen)
    return DataLoader(
        TensorDataset(data, targets), batch_size=batch_size, shuffle=shuffle, num_workers=0
    )


def consume(ev, limit=None):
    """Iterate ``ev`` (stopping after ``limit`` batches if given); return how many came."""
    count = 0
    for _ in ev:
        count += 1
        if limit is not None and count >= limit:
            break
    return count


# -- construction -------------------------------------------------------------------------


def test_wraps_the_given_loader():
    dl = make_loader()
    ev = LoaderEvaluator(dl)
    assert ev.dataloader is dl
    assert ev.mode == "log"  # the default


@pytest.mark.parametrize("mode", ["log", "replay"])
def test_mode_is_kept(mode):
    assert LoaderEvaluator(make_loader(), mode=mode).mode == mode


def test_constructor_arguments_are_attributes():
    ev = LoaderEvaluator(
        make_loader(), mode="replay", num_cached_batches=3, metrics_file="dali_metrics.json"
    )
    assert ev.num_cached_batches == 3
    assert ev.metrics_file == "dali_metrics.json"


def test_unknown_mode_is_refused():
    # DALI accepts it and iterates as in log mode; ours refuses it on purpose.
    with pytest.raises(ValueError):
        LoaderEvaluator(make_loader(), mode="no_such_mode")


# -- len and iteration --------------------------------------------------------------------


@pytest.mark.parametrize("n", [40, 41, 1])
def test_len_matches_the_loader(n):
    dl = make_loader(n=n)
    assert len(LoaderEvaluator(dl)) == len(dl)


def test_batches_are_data_target_pairs_of_tensors():
    seen = 0
    for batch in LoaderEvaluator(make_loader(shuffle=True)):
        assert isinstance(batch, (tuple, list))
        assert len(batch) == 2
        assert all(isinstance(t, torch.Tensor) for t in batch)
        seen += 1
        if seen == 3:
            break
    assert seen == 3


def test_log_mode_yields_what_the_loader_yields():
    dl = make_loader()
    plain, wrapped = [], []
    for i, (a, b) in enumerate(zip(dl, LoaderEvaluator(dl))):
        plain.append(a)
        wrapped.append(b)
        if i == 2:
            break
    assert len(plain) == len(wrapped) == 3
    for (x0, y0), (x1, y1) in zip(plain, wrapped):
        assert torch.equal(x0, x1)
        assert torch.equal(y0, y1)


# -- log mode metrics ---------------------------------------------------------------------


def test_log_mode_counts_batches_after_an_early_break():
    ev = LoaderEvaluator(make_loader(shuffle=True), mode="log")
    assert consume(ev, limit=2) == 2
    m = ev.get_metrics()
    assert m["total_batches"] == 2
    assert m["mode"] == "log"


def test_get_metrics_is_an_empty_dict_before_any_batch():
    m = LoaderEvaluator(make_loader()).get_metrics()
    assert isinstance(m, dict)
    assert len(m) == 0


def test_get_metrics_after_two_batches_has_dali_fields():
    ev = LoaderEvaluator(make_loader(), mode="log")
    consume(ev, limit=2)
    m = ev.get_metrics()
    assert isinstance(m, dict)
    assert m["total_batches"] == 2
    assert m["mode"] == "log"
    assert "avg_batch_time" in m
    assert "total_time" in m
    assert len(m["batch_times"]) == 2


def test_get_metrics_carries_every_dali_key():
    # from DALI's implementation: these nine keys, times in seconds
    ev = LoaderEvaluator(make_loader(), mode="log")
    consume(ev)
    m = ev.get_metrics()
    assert DALI_METRIC_KEYS | {"cached_batches", "cache_ready"} <= set(m)
    times = m["batch_times"]
    assert m["min_batch_time"] == min(times)
    assert m["max_batch_time"] == max(times)
    assert m["avg_batch_time"] == pytest.approx(sum(times) / len(times))
    assert m["total_time"] >= 0
    assert m["cached_batches"] == 0
    assert m["cache_ready"] is False


# -- replay mode --------------------------------------------------------------------------


def test_replay_caches_while_constructing():
    ev = LoaderEvaluator(make_loader(shuffle=True), mode="replay", num_cached_batches=3)
    assert ev.cache_ready
    assert 0 < len(ev.cached_batches) <= 3


def test_replay_counts_batches_after_an_early_break():
    ev = LoaderEvaluator(make_loader(), mode="replay", num_cached_batches=3)
    assert consume(ev, limit=5) == 5
    m = ev.get_metrics()
    assert m["total_batches"] == 5
    assert m["mode"] == "replay"


def test_replay_epoch_is_as_long_as_the_loaders():
    dl = make_loader(n=100, batch_size=16, shuffle=True)  # 7 batches, 2 cached
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2)
    assert consume(ev) == len(dl)
    m = ev.get_metrics()
    assert m["total_batches"] == len(dl)
    assert m["mode"] == "replay"


def test_replay_cycles_through_the_cache():
    # from DALI's implementation: batch i of an epoch is cached batch i % len(cache)
    dl = make_loader(n=40, batch_size=8)
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2)
    served = list(ev)
    assert len(served) == len(dl) == 5
    for i, batch in enumerate(served):
        cached = ev.cached_batches[i % 2]
        assert torch.equal(batch[0], cached[0])
        assert torch.equal(batch[1], cached[1])


def test_replay_of_a_loader_shorter_than_the_cache():
    dl = make_loader(n=2, batch_size=1)
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=5)
    assert len(ev.cached_batches) == 2
    assert ev.cache_ready
    assert consume(ev) == 2


def test_replay_metrics_carry_cache_fields():
    # from DALI's implementation: cached_batches is the cache length, cache_ready a bool
    ev = LoaderEvaluator(make_loader(), mode="replay", num_cached_batches=3)
    consume(ev)
    m = ev.get_metrics()
    assert m["cached_batches"] == 3
    assert m["cache_ready"] is True


# -- save_metrics -------------------------------------------------------------------------


def test_save_metrics_file_reads_back_with_json_load(tmp_path):
    ev = LoaderEvaluator(make_loader(shuffle=True), mode="log")
    consume(ev, limit=2)
    path = tmp_path / "dali_metrics.json"
    ev.save_metrics(str(path))
    assert path.exists()
    with open(path) as f:
        saved = json.load(f)
    assert saved["total_batches"] == 2
    assert saved["mode"] == "log"


def test_saved_file_has_dali_keys_at_top_level(tmp_path):
    ev = LoaderEvaluator(make_loader(), mode="log")
    consume(ev, limit=3)
    path = tmp_path / "dali_metrics.json"
    ev.save_metrics(str(path))
    with open(path) as f:
        saved = json.load(f)
    missing = DALI_METRIC_KEYS - set(saved)
    assert not missing, f"saved file lacks DALI keys {sorted(missing)}"
    assert saved["mode"] == "log"
    assert saved["total_batches"] == 3
    assert len(saved["batch_times"]) == 3


def test_saved_file_is_still_a_run_log(tmp_path):
    ev = LoaderEvaluator(make_loader(), mode="log")
    consume(ev, limit=3)
    path = tmp_path / "dali_metrics.json"
    ev.save_metrics(str(path))
    run = load_run(path)
    assert run.mode == "log"
    assert run.n_steps == 3


def test_save_metrics_without_any_filename_only_prints(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ev = LoaderEvaluator(make_loader())
    ev.save_metrics()  # must not raise
    assert "No filename provided" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_save_metrics_falls_back_to_metrics_file(tmp_path, capsys):
    # from DALI's implementation: no argument means metrics_file; it says where it wrote
    path = tmp_path / "fallback.json"
    ev = LoaderEvaluator(make_loader(), mode="log", metrics_file=str(path))
    consume(ev, limit=2)
    capsys.readouterr()
    ev.save_metrics()
    assert path.exists()
    assert f"Metrics saved to: {path}" in capsys.readouterr().out


# -- print_summary ------------------------------------------------------------------------


def test_print_summary_text(capsys):
    dl = make_loader(n=40, batch_size=8)
    ev = LoaderEvaluator(dl, mode="log")
    consume(ev, limit=2)
    capsys.readouterr()
    ev.print_summary()
    out = capsys.readouterr().out
    assert "Loader Evaluator Summary:" in out
    assert "Mode: log" in out
    assert "Dataset size:" in out
    assert "Number of batches:" in out
    assert "Total batches processed: 2" in out
    # from DALI's implementation: the figures themselves and the cache lines
    assert "Dataset size: 40" in out
    assert "Number of batches: 5" in out
    assert "Cache size: 0/20" in out
    assert "Cache ready: False" in out


def test_print_summary_before_any_batch_has_no_totals(capsys):
    LoaderEvaluator(make_loader()).print_summary()
    out = capsys.readouterr().out
    assert "Loader Evaluator Summary:" in out
    assert "Total batches processed" not in out


# -- edge cases ---------------------------------------------------------------------------


def test_empty_loader_in_log_mode():
    dl = DataLoader(
        TensorDataset(torch.empty(0, 3, 4, 4), torch.empty(0, dtype=torch.long)), batch_size=16
    )
    ev = LoaderEvaluator(dl)
    assert len(ev) == 0
    assert consume(ev) == 0
    assert len(ev.get_metrics()) == 0


def test_single_batch_loader():
    dl = make_loader(n=1, batch_size=1)
    ev = LoaderEvaluator(dl)
    assert len(ev) == 1
    assert consume(ev) == 1
    assert ev.get_metrics()["total_batches"] == 1
