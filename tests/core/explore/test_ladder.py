"""The caching ladder against pipelines whose stage costs are known, on a fake clock
(every loader here loads in the main process): exact, and no sleeping."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, default_collate

from loadeval_nb import LoadEvalError
from loadeval_nb.core.explore import RunHooks, RunSettings, run_ladder
from loadeval_nb.core.explore.samples import CachedSamples, sample_rung_loader
from loadeval_nb.core.verdict.diagnosis import ladder_advice
from tests.workloads import SleepyItems, sleep_steps, take


class SlowCollate:
    def __init__(self, s, clock):
        self.s, self.clock = s, clock

    def __call__(self, items):
        take(self.s, self.clock)
        return default_collate(items)


SETTINGS = dict(steps=36, warmup=4, num_cached_batches=4, sample_interval_s=None)


def test_ladder_finds_per_sample_loading(fake_time):
    # step 10 ms; collation 2 ms; 4 items x 6 ms = 24 ms of loading in the main process
    dl = DataLoader(
        SleepyItems(400, 0.006, fake_time), batch_size=4, collate_fn=SlowCollate(0.002, fake_time)
    )
    res = run_ladder(dl, sleep_steps(0.010, fake_time), RunSettings(**SETTINGS))
    assert res.ok, res.error
    assert res.rung("device").skipped and "CUDA" in res.rung("device").skipped
    rows = {r["rung"]: r for r in res.table()}
    assert rows["host"]["mean_step_s"] == pytest.approx(0.010)
    assert rows["samples"]["mean_step_s"] == pytest.approx(0.012)
    assert rows["real"]["mean_step_s"] == pytest.approx(0.036)
    stages = {s.name: s for s in res.stages}
    assert stages["real"].added_s == pytest.approx(0.024)
    assert stages["real"].significant
    assert res.largest is not None and res.largest.what == "per-sample loading and transforms"
    assert "Largest stage: per-sample loading and transforms, +" in res.text()
    advice = next(f for f in res.facts().facts if f.key == "advice")
    assert advice.pieces == tuple(ladder_advice("real"))  # the per-sample stage's advice


def test_ladder_finds_collation(fake_time):
    # collation 20 ms dominates; per-sample loading 4 x 0.5 ms
    dl = DataLoader(
        SleepyItems(400, 0.0005, fake_time), batch_size=4, collate_fn=SlowCollate(0.020, fake_time)
    )
    res = run_ladder(dl, sleep_steps(0.005, fake_time), RunSettings(**SETTINGS))
    stages = {s.name: s for s in res.stages}
    assert stages["samples"].added_s == pytest.approx(0.020)
    assert res.largest.what == "workers + collation"
    assert "what to do: Handing batches over is the cost (workers and collation)" in res.text()


def test_ladder_says_within_noise_when_loading_is_free(fake_time):
    # loading takes no time on the fake clock (it costs 0.2-0.7 ms of real time here)
    dl = DataLoader(SleepyItems(400, 0.0), batch_size=4)
    res = run_ladder(dl, sleep_steps(0.030, fake_time), RunSettings(**SETTINGS))
    assert res.ok
    assert res.largest is None
    assert "within noise" in res.conclusion()
    assert "what to do" not in res.text()  # nothing stands out: no stage to act on


class Stream(IterableDataset):
    def __iter__(self):
        for i in range(10_000):
            yield torch.zeros(2) + i


@pytest.mark.slow
def test_iterable_dataset_skips_the_sample_rung_and_says_why():
    dl = DataLoader(Stream(), batch_size=2)
    res = run_ladder(
        dl,
        sleep_steps(0.001),
        RunSettings(steps=20, warmup=2, num_cached_batches=3, sample_interval_s=None),
    )
    samples = res.rung("samples")
    assert samples.run is None and "IterableDataset" in samples.skipped
    assert [r.name for r in res.rungs if r.run is not None] == ["host", "real"]
    # the remaining stage spans what the skipped rung would have split
    assert res.stages[0].what == "workers + collation + per-sample loading and transforms"


def test_cached_samples_serve_any_index():
    cs = CachedSamples(["a", "b", "c"], 10)
    assert len(cs) == 10 and cs[7] == "b"
    with pytest.raises(LoadEvalError):
        CachedSamples([], 3)


def test_sample_rung_keeps_sampler_and_collation_and_the_user_loader():
    seen = []

    def collate(items):
        seen.append(len(items))
        return default_collate(items)

    dl = DataLoader(SleepyItems(64, 0.0), batch_size=8, shuffle=True, collate_fn=collate)
    before = dict(vars(dl))
    res = run_ladder(
        dl, sleep_steps(0.0), RunSettings(steps=6, warmup=1, num_cached_batches=2, sample_interval_s=None),
        rungs=("samples",),
    )  # fmt: skip
    assert res.ok and res.rung("samples").run.n_steps == 6
    assert set(seen) == {8}  # the user's collate_fn ran on the sample rung
    assert vars(dl) == before  # the user's DataLoader is untouched


def test_failure_in_the_cell_keeps_partial_rungs_and_stops():
    class Hooks(RunHooks):
        def __init__(self):
            self.started = []

        def run_started(self, which, ev, index, total):
            self.started.append(which)

    calls = {"n": 0}

    def run_once(ev):
        calls["n"] += 1
        for i, _ in enumerate(ev):
            if calls["n"] == 3 and i == 3:
                raise RuntimeError("cell failed")

    hooks = Hooks()
    dl = DataLoader(SleepyItems(100, 0.0), batch_size=4)
    settings = RunSettings(steps=10, warmup=1, num_cached_batches=2, sample_interval_s=None)
    res = run_ladder(dl, run_once, settings, hooks=hooks)
    assert res.failed == "real" and isinstance(res.error, RuntimeError)
    assert res.rung("real").run.n_steps >= 3  # the partial run is kept
    assert hooks.started == ["host", "samples", "real"]
    assert "stopped at the real rung" in res.conclusion()


class NeedsHandle(Dataset):
    """Opens its 'file' in worker_init_fn, as h5py/lmdb datasets do."""

    def __len__(self):
        return 64

    def open(self):
        self.handle = list(range(64))

    def __getitem__(self, i):
        return torch.tensor([float(self.handle[i])])


def _open_in_worker(_):
    from torch.utils.data import get_worker_info

    get_worker_info().dataset.open()


def test_sample_rung_skipped_when_samples_cannot_be_made_in_the_main_process():
    dl = DataLoader(NeedsHandle(), batch_size=4, num_workers=1, worker_init_fn=_open_in_worker)
    res = run_ladder(
        dl,
        sleep_steps(0.0),
        RunSettings(steps=8, warmup=1, num_cached_batches=2, sample_interval_s=None),
    )
    assert res.ok, res.error
    assert "could not be made in the main process" in res.rung("samples").skipped
    assert res.rung("real").run.n_steps == 8


def test_sample_rung_failure_is_left_out_and_the_real_rung_runs():
    def bad_init(_):
        from torch.utils.data import get_worker_info

        if type(get_worker_info().dataset).__name__ == "CachedSamples":
            raise RuntimeError("not my dataset")

    dl = DataLoader(SleepyItems(64, 0.0), batch_size=4, num_workers=1, worker_init_fn=bad_init)
    res = run_ladder(
        dl,
        sleep_steps(0.0),
        RunSettings(steps=8, warmup=1, num_cached_batches=2, sample_interval_s=None),
    )
    assert res.ok, res.error
    assert res.rung("samples").skipped.startswith("it failed (RuntimeError")
    assert res.rung("real").run.n_steps == 8


def test_cached_samples_forward_attributes_to_the_dataset():
    base = NeedsHandle()
    cs = CachedSamples([1], 64, base=base)
    cs.open()  # forwarded
    assert base.handle[3] == 3


def test_bad_rungs():
    with pytest.raises(LoadEvalError, match="rungs"):
        run_ladder([1], sleep_steps(0), RunSettings(), rungs=("gpu",))


class Big(Dataset):
    def __len__(self):
        return 1000

    def __getitem__(self, i):
        return torch.zeros(1024)  # 4 KiB


def test_sample_rung_makes_only_what_fits_the_budget():
    dl = DataLoader(Big(), batch_size=10)
    seen = []
    # 40 batches wanted (400 samples), 100 KiB of budget: 25 samples
    sl, why, _ = sample_rung_loader(dl, 40, seen.append, budget=(100 * 1024, "test budget"))
    assert why is None and len(sl.dataset.samples) == 25 and len(sl.dataset) == 1000
    # not even one batch fits: skipped, saying why
    sl, why, _ = sample_rung_loader(dl, 40, seen.append, budget=(20 * 1024, "test budget"))
    assert sl is None and "would not fit the cache budget (test budget)" in why


@pytest.mark.slow
def test_sample_rung_reports_progress_while_making_samples():
    dl = DataLoader(SleepyItems(400, 0.01), batch_size=4)
    seen = []
    sl, why, _ = sample_rung_loader(dl, 40, seen.append)  # 160 samples x 10 ms
    assert why is None and len(sl.dataset.samples) == 160
    assert seen and all("of 160" in s for s in seen)


def test_ladder_tells_the_hooks_it_is_making_samples():
    class Hooks(RunHooks):
        def __init__(self):
            self.texts = []

        def progress(self, text):
            self.texts.append(text)

    hooks = Hooks()
    dl = DataLoader(SleepyItems(64, 0), batch_size=4)
    res = run_ladder(dl, sleep_steps(0), RunSettings(**SETTINGS), hooks=hooks)
    assert res.ok and hooks.texts == ["ladder: making samples for the sample rung"]


def test_a_one_shot_iterator_is_refused_before_any_rung_runs():
    batches = iter([torch.zeros(3)] * 40)
    with pytest.raises(LoadEvalError, match="one-shot iterator.*once per rung"):
        run_ladder(batches, sleep_steps(0), RunSettings(**SETTINGS))
    assert len(list(batches)) == 40  # nothing was taken from it


class Order(RunHooks):
    def __init__(self):
        self.started = []

    def run_started(self, which, ev, index, total):
        self.started.append((which, index, total))


def test_rungs_run_in_two_blocks_in_abba_order(fake_time):
    loader = DataLoader(SleepyItems(400, 0.0), batch_size=4)
    hooks = Order()
    res = run_ladder(
        loader,
        sleep_steps(0.002, fake_time),
        RunSettings(steps=60, warmup=4, num_cached_batches=4, sample_interval_s=None),
        hooks=hooks,
    )
    assert res.ok
    names = [w for w, _, _ in hooks.started]
    assert names == ["host", "samples", "real", "real", "samples", "host"]  # no CUDA here
    assert [i for _, i, _ in hooks.started] == list(range(6)) and hooks.started[0][2] == 6
    for name in ("host", "samples", "real"):
        run = res.rung(name).run
        assert sorted(set(run.block)) == [0, 1] and run.n_steps == 60  # 30 + 30
    assert any("two blocks" in n for n in res.notes)


def test_a_rung_faster_than_a_more_cached_one_is_called_out(fake_time):
    # the host replay is slowed (outside load on that rung only): caching more cannot
    # make a step slower, so the ladder says the load changed instead of ranking stages
    def run_once(ev):
        sleep_steps(0.012 if ev.label == "host" else 0.004, fake_time)(ev)

    loader = DataLoader(SleepyItems(400, 0.0), batch_size=4)
    res = run_ladder(
        loader,
        run_once,
        RunSettings(steps=40, warmup=4, num_cached_batches=4, sample_interval_s=None),
    )
    assert any(
        "ran faster than the host rung" in n and "rerun it on a quiet machine" in n
        for n in res.notes
    )


def _copy_bound_ladder(pin_memory):
    # the device rung at 10 ms a step, every rung below it at 16 ms: the host-to-device
    # copy is the largest stage (a ladder on a GPU; this machine has none, so by hand)
    from loadeval_nb.core.explore.ladder import LadderResult, Rung, compare_rungs
    from loadeval_nb.core.record import Run

    def run(ms, mode):
        steps = [int((ms + 0.01 * (i % 3)) * 1e6) for i in range(60)]
        start = [sum(steps[:i]) for i in range(60)]
        env = {"cuda_available": True}
        return Run(mode=mode, start_ns=start, step_ns=steps, warmup=2, environment=env)

    res = LadderResult(label="", loader_settings={"num_workers": 2, "pin_memory": pin_memory})
    res.rungs = [
        Rung("device", run=run(10, "replay")),
        Rung("host", run=run(16, "replay")),
        Rung("samples", run=run(16, "log")),
        Rung("real", run=run(16, "log")),
    ]
    compare_rungs(res)
    assert res.largest is not None and res.largest.name == "host"
    return res.text()


def test_the_ladder_advises_pinned_memory_only_where_it_is_off():
    # a loader that pins already is told what is left (non_blocking copies), not to pin
    pinned = _copy_bound_ladder(pin_memory=True)
    assert "pin_memory=True" not in pinned and "the loader pins memory already" in pinned
    assert "pin_memory=True" in _copy_bound_ladder(pin_memory=False)
