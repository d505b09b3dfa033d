"""Settings sweep: parsing, measured rates against sleep-based truth, predictions, failures."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import LoadEvalError
from loadeval_nb.core._shared import config_label
from loadeval_nb.core.explore import RunSettings, SweepHooks, parse_sweep, run_sweep
from tests.timing import excused_if_busy, retry_once
from tests.workloads import SleepyItems, sleep_steps, take


def test_parse_sweep_product_and_values():
    cfgs = parse_sweep("num_workers=0,2,4; pin_memory=False,True")
    assert len(cfgs) == 6
    assert cfgs[0] == {"num_workers": 0, "pin_memory": False}
    assert cfgs[-1] == {"num_workers": 4, "pin_memory": True}
    assert parse_sweep({"prefetch_factor": [2, 4]}) == [
        {"prefetch_factor": 2},
        {"prefetch_factor": 4},
    ]
    assert config_label({"num_workers": 4, "pin_memory": True}) == "num_workers=4 pin_memory=True"


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("batch_size=8,16", "only num_workers"),
        ("num_workers", "no '='"),
        ("num_workers=two", "integers"),
        ("", "empty"),
        (42, "not an int"),
    ],
)
def test_parse_sweep_errors(spec, msg):
    with pytest.raises(LoadEvalError, match=msg):
        parse_sweep(spec)


def test_bad_value_fails_before_anything_runs():
    ran = []
    dl = DataLoader(SleepyItems(10, 0), batch_size=2)
    with pytest.raises(LoadEvalError, match="num_workers"):
        run_sweep(dl, lambda ev: ran.append(1), "num_workers=0,-1", RunSettings())
    assert ran == []


@pytest.mark.slow
@retry_once  # worker processes: real time; a busy machine excuses a failure
def test_sweep_against_sleep_truth():
    # a batch takes 4 x 10 ms = 40 ms to load in one worker; the step is 16 ms
    # truth (steps/s): w0 1/(40+16), w1 1/40, w2 1/20, w4 1/16 (receiving a batch from a
    # worker costs another 1-2 ms on this machine: inside the 20 % tolerance)
    dl = DataLoader(SleepyItems(4000, 0.010), batch_size=4)
    points = []

    class Hooks(SweepHooks):
        def point_done(self, point, result):
            points.append(point.label)

    res = run_sweep(
        dl,
        sleep_steps(0.016),
        "num_workers=0,1,2,4",
        RunSettings(steps=45, warmup=8, sample_interval_s=0.05),
        hooks=Hooks(),
    )
    assert res.ok, res.error
    assert points == ["num_workers=0", "num_workers=1", "num_workers=2", "num_workers=4"]
    rates = {r["label"]: r["steps_per_s"] for r in res.table()}
    truth = {f"num_workers={w}": 1 / s for w, s in ((0, 0.056), (1, 0.040), (2, 0.020), (4, 0.016))}
    with excused_if_busy(res.ideal, *(run for p in res.points for run in p.runs)):
        for k, v in truth.items():
            assert rates[k] == pytest.approx(v, rel=0.2), (k, rates)
        assert res.ideal_steps_per_s == pytest.approx(62.5, rel=0.15)
        # the simulator, fed from the w0 run's waits and the ideal steps, lands near the truth
        for r in res.table():
            assert r["predicted_steps_per_s"] == pytest.approx(truth[r["label"]], rel=0.25), r
        assert res.best.label == "num_workers=4"
        assert "Recommended: num_workers=4" in res.recommendation()
    assert dl.num_workers == 0  # the user's loader is untouched


def test_noisy_config_is_repeated_and_failure_is_kept(fake_time):
    class Jitter(Dataset):
        def __len__(self):
            return 1000

        def __getitem__(self, i):
            take(0.0005 if i % 3 else 0.012, fake_time)  # very uneven
            return torch.zeros(1)

    dl = DataLoader(Jitter(), batch_size=1)
    res = run_sweep(
        dl,
        sleep_steps(0.0),
        "num_workers=0",
        RunSettings(steps=14, warmup=2, sample_interval_s=None),
        max_repeats=2,
        noise_rel=0.001,
    )
    assert res.points[0].repeats == 2  # too noisy after one run: run again, pooled
    assert len(res.points[0].steady_s()) == 24

    calls = {"n": 0}

    def failing(ev):
        calls["n"] += 1
        for i, _ in enumerate(ev):
            if calls["n"] == 3 and i == 2:
                raise RuntimeError("boom")

    res = run_sweep(
        DataLoader(SleepyItems(200, 0.0), batch_size=2),
        failing,
        "num_workers=0,0,0",
        RunSettings(steps=12, warmup=1, sample_interval_s=None),
        max_repeats=1,
    )
    assert isinstance(res.error, RuntimeError) and res.failed == "num_workers=0 #2"
    assert [p.error is None for p in res.points] == [True, False]
    assert res.points[1].runs[0].n_steps >= 2  # partial run kept
    assert "failed" in res.text()


def test_load_drift_note_when_batches_get_slower_with_more_workers(monkeypatch):
    from loadeval_nb import LoaderEvaluator
    from loadeval_nb.core.explore import SweepPoint, SweepResult

    def point(label, load_ms):
        ev = LoaderEvaluator(list(range(20)), sample_interval_s=None)
        for _ in ev:
            pass
        run = ev.to_run()
        run.worker_load_ns = [int(load_ms * 1e6)] * 10
        return SweepPoint({"num_workers": 1}, label, {"num_workers": 1}, runs=[run])

    res = SweepResult("", {}, points=[point("w1", 200), point("w12", 290)])
    note = res.load_drift_note()
    assert note and "45% longer" in note and "w12 than at w1" in note
    assert note in res.facts().notes
    res = SweepResult("", {}, points=[point("w1", 200), point("w2", 210)])
    assert res.load_drift_note() is None


def _disturbed(clock, first_ideal_s, later_ideal_s, real_s):
    """A run_once whose first ideal run is slowed (outside load), later ones are not."""
    seen = {"ideal": 0}

    def run_once(ev):
        if ev.mode == "replay":
            seen["ideal"] += 1
            step = first_ideal_s if seen["ideal"] == 1 else later_ideal_s
        else:
            step = real_s
        sleep_steps(step, clock)(ev)

    return run_once, seen


def test_a_configuration_faster_than_the_ideal_has_the_ideal_measured_again(fake_time):
    loader = DataLoader(TensorDataset(torch.zeros(400, 2)), batch_size=4)
    run_once, seen = _disturbed(fake_time, 0.02, 0.004, 0.006)
    res = run_sweep(
        loader, run_once, "num_workers=0", RunSettings(steps=15, warmup=2, sample_interval_s=None)
    )
    assert seen["ideal"] == 2 and res.ideal_again is not None
    assert not res.beats_ideal()  # the second reading is the faster: the ideal holds
    text = str(res)
    assert "of the ideal loader's speed" in text and "within noise" not in text


def test_a_configuration_still_faster_than_the_ideal_is_called_noise(fake_time):
    loader = DataLoader(TensorDataset(torch.zeros(400, 2)), batch_size=4)
    run_once, seen = _disturbed(fake_time, 0.012, 0.012, 0.006)
    res = run_sweep(
        loader, run_once, "num_workers=0", RunSettings(steps=15, warmup=2, sample_interval_s=None)
    )
    assert seen["ideal"] == 2
    assert res.beats_ideal() == [res.best] and res.ideal_again is not None
    assert res.ideal_note() in res.facts().notes  # the note on a configuration beyond ideal
    text = str(res)
    assert "as fast as the ideal loader within noise" in text and "~100% (within noise)" in text
    assert "%" not in text.split("Recommended:")[1].split(")")[0].replace("~100%", "")


def test_torch_threads_are_a_sweep_axis_and_put_back(fake_time):
    seen = []

    def run_once(ev):
        seen.append((ev.mode, ev.label, torch.get_num_threads()))
        sleep_steps(0.002, fake_time)(ev)

    before = torch.get_num_threads()
    loader = DataLoader(TensorDataset(torch.zeros(200, 2)), batch_size=4)
    res = run_sweep(
        loader, run_once, "num_threads=1,2", RunSettings(steps=15, warmup=2, sample_interval_s=None)
    )
    assert [p.label for p in res.points] == ["num_threads=1", "num_threads=2"]
    # each configuration's runs (one, or two when noisy) had its threads
    assert {(label.split()[0], t) for mode, label, t in seen if mode == "log"} == {
        ("num_threads=1", 1),
        ("num_threads=2", 2),
    }
    assert {t for mode, _, t in seen if mode == "replay"} == {
        before
    }  # the ideal: as the user has it
    assert torch.get_num_threads() == before
    assert res.points[1].knobs["num_threads"] == 2


@pytest.mark.parametrize("bad", ["num_threads=0", "num_threads=two", "num_threads=100000"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(LoadEvalError, match="num_threads="):
        parse_sweep(bad)
