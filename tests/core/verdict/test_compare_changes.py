"""compare names the stage that changed: two runs (wait and compute), two ladders (a
rung's stage), two transform splits (a step), each against a change of known size made
on a fake clock with seeded jitter (exact, no sleeping); identical measurements name
nothing; the gate looks at one stage; ladders and splits round-trip through their files."""

from __future__ import annotations

import json
import random
import statistics

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb import LoadEvalError, Run
from loadeval_nb.__main__ import main
from loadeval_nb.core.explore import RunSettings, run_ladder, split_transforms
from loadeval_nb.core.record.ladderlog import LadderLog, SplitLog, load_log
from loadeval_nb.core.verdict import compare_runs
from loadeval_nb.errors import RunLogError

MS = 1_000_000

# ---- a pipeline and a loop on the fake clock, each cost with seeded jitter ------------------


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Tick:
    """A step that moves the fake clock by ``ms`` give or take ``sd_ms`` (seeded), and keeps
    what it took: the stopwatch the tool is checked against."""

    def __init__(self, clock, ms, sd_ms=0.3, seed=0):
        self.clock, self.ms, self.sd = clock, ms, sd_ms
        self.rng = random.Random(seed)
        self.taken_ms: list[float] = []

    def __call__(self, x):
        ms = max(0.0, self.rng.gauss(self.ms, self.sd))
        self.taken_ms.append(ms)
        self.clock.advance(round(ms * MS))
        return x


class RandomResizedCrop(Tick):
    pass


class Normalize(Tick):
    pass


class Items(Dataset):
    """Reading an item moves the clock by ``load`` (a Tick); then ``transform``."""

    def __init__(self, load, transform=None):
        self.load, self.transform = load, transform

    def __len__(self):
        return 400

    def __getitem__(self, i):
        x = self.load(torch.full((3,), float(i)))
        return self.transform(x) if self.transform is not None else x


def split_of(clock, crop_ms, seed):
    crop = RandomResizedCrop(clock, crop_ms, seed=seed)
    norm = Normalize(clock, 1.0, seed=seed + 1)
    ds = Items(Tick(clock, 1.0, seed=seed + 2), Compose([crop, norm]))
    split = split_transforms(DataLoader(ds, batch_size=4), batches=16, clock=clock)
    return split, crop


def test_two_splits_name_the_step_made_slower_by_its_stopwatch_delta(clock):
    before, crop_b = split_of(clock, 2.0, seed=1)
    after, crop_a = split_of(clock, 5.0, seed=11)  # RandomResizedCrop +3 ms a sample
    res = compare_runs(before, after)
    assert res.kind == "transform splits" and res.unit == "sample"
    assert [c.name for c in res.located] == ["RandomResizedCrop"]
    c = res.located[0]
    stopwatch = statistics.fmean(crop_a.taken_ms) - statistics.fmean(crop_b.taken_ms)
    assert c.delta_s * 1e3 == pytest.approx(stopwatch, rel=1e-6)
    lo, hi = c.ci_s
    assert lo * 1e3 < 3.0 < hi * 1e3  # the constructed change inside its interval
    # the interval is as wide as the jitter makes it: 2 t se, se = 0.3 ms sqrt(2 / 64)
    assert (hi - lo) * 1e3 == pytest.approx(2 * 2.0 * 0.3 * (2 / 64) ** 0.5, rel=0.3)
    assert c.unit == "sample"  # +3 ms a sample: the change the headline names
    assert "changed: RandomResizedCrop +3.0 ms a sample (95% CI +" in res.text()
    assert res.regression  # 4 -> 7 ms a sample: 75 % slower


def test_two_identical_splits_name_nothing(clock):
    before, _ = split_of(clock, 2.0, seed=1)
    again, _ = split_of(clock, 2.0, seed=21)
    res = compare_runs(before, again, max_slowdown="0%")
    assert res.located == () and not res.regression
    assert {c.name for c in res.changes} == {
        "RandomResizedCrop",
        "Normalize",
        "rest of __getitem__",
    }
    assert all(not c.located for c in res.changes)
    assert "changed: no stage beyond noise" in res.text()


def test_the_gate_looks_at_one_transform_step(clock, tmp_path, capsys):
    b, _ = split_of(clock, 2.0, seed=1)
    a, _ = split_of(clock, 5.0, seed=11)
    pb, pa = b.save(tmp_path / "before.json"), a.save(tmp_path / "after.json")
    assert main(["compare", pb, pa, "--stage", "RandomResizedCrop"]) == 1
    out = capsys.readouterr().out
    assert "Compare transform splits: REGRESSION: RandomResizedCrop is 3.0 ms a sample" in out
    assert main(["compare", pb, pa, "--stage", "normalize"]) == 0  # any case
    assert "Compare transform splits: OK: Normalize " in capsys.readouterr().out
    # +3 ms of a 4 ms sample is 75 %: under a limit of 80 % it passes
    assert main(["compare", pb, pa, "--stage", "RandomResizedCrop", "--max-slowdown", "80%"]) == 0


# ---- two ladders -------------------------------------------------------------------------

SETTINGS = dict(steps=36, warmup=4, num_cached_batches=4, sample_interval_s=None)


def ladder_of(clock, item_ms, step_ms, seed):
    loader = DataLoader(Items(Tick(clock, item_ms, sd_ms=0.2, seed=seed)), batch_size=4)
    step = Tick(clock, step_ms, sd_ms=0.5, seed=seed + 1)

    def run_once(ev):
        for batch in ev:
            step(batch)

    res = run_ladder(loader, run_once, RunSettings(**SETTINGS), transforms=None)
    assert res.ok, res.error
    return res


def test_two_ladders_name_the_rung_whose_stage_got_slower(fake_time, tmp_path, capsys):
    before = ladder_of(fake_time, 2.0, 10.0, seed=1)
    after = ladder_of(fake_time, 3.0, 10.0, seed=5)  # loading +1 ms an item: real +4 ms a step
    res = compare_runs(before, after)
    assert res.kind == "ladders" and res.whole == "real"
    assert [c.name for c in res.changes] == ["host", "samples", "real"]
    assert [c.name for c in res.located] == ["real"]
    real = res.located[0]
    lo, hi = real.ci_s
    assert lo * 1e3 < 4.0 < hi * 1e3 and (hi - lo) * 1e3 < 2.0
    assert real.what == "per-sample loading and transforms"
    assert real.delta_s * 1e3 == pytest.approx(4.0, rel=0.15)
    assert round(real.delta_s * 1e3, 1) == 3.6  # the change the gate below reads
    # the exit code gates on one stage
    pb, pa = before.save(tmp_path / "b.json"), after.save(tmp_path / "a.json")
    assert main(["compare", pb, pa, "--stage", "real"]) == 1
    assert (
        "REGRESSION: real is 3.6 ms a step slower (19.6% of the step), over the 5.0% allowed"
        in (capsys.readouterr().out)
    )
    assert main(["compare", pb, pa, "--stage", "samples", "--max-slowdown", "0%"]) == 0
    assert main(["compare", pb, pa, "--stage", "host"]) == 0
    assert main(["compare", pb, pa, "--stage", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "loadeval_nb: --stage 'nope' is not a stage both ladders measured; name one of "
        "host, samples, real."
    )


def test_a_slower_model_is_the_top_rung_and_passes_a_gate_on_loading(fake_time):
    before = ladder_of(fake_time, 2.0, 10.0, seed=1)
    after = ladder_of(fake_time, 2.0, 13.0, seed=5)  # the step +3 ms on every rung
    res = compare_runs(before, after)
    assert [c.name for c in res.located] == ["host"]
    assert res.located[0].what == "the whole step, batches cached in host memory"
    assert res.regression  # the whole real step is 3 ms slower
    assert not compare_runs(before, after, stage="real").regression
    assert compare_runs(before, after, stage="host").regression


def test_two_identical_ladders_name_nothing(fake_time):
    before = ladder_of(fake_time, 2.0, 10.0, seed=1)
    again = ladder_of(fake_time, 2.0, 10.0, seed=9)
    res = compare_runs(before, again, max_slowdown="0%")
    assert res.located == () and not res.regression
    assert all(compare_runs(before, again, stage=s).judged for s in ("host", "samples", "real"))
    assert not any(compare_runs(before, again, stage=s).regression for s in ("host", "real"))


# ---- two runs: waiting for data against the step's own work ------------------------------


def run_with(wait_ms, compute_ms, seed, n=200):
    rng = random.Random(seed)
    wait = [round(max(0.0, rng.gauss(wait_ms, 0.3)) * MS) for _ in range(n)]
    step = [w + round(max(0.0, rng.gauss(compute_ms, 0.3)) * MS) for w in wait]
    start = [sum(step[:i]) for i in range(n)]
    return Run(mode="log", start_ns=start, step_ns=step, wait_ns=wait, samples=[8] * n)


def test_two_runs_say_whether_waiting_or_the_step_changed():
    before = run_with(2.0, 10.0, seed=1)
    res = compare_runs(before, run_with(6.0, 10.0, seed=2))
    assert [c.name for c in res.located] == ["wait"]
    lo, hi = res.located[0].ci_s
    assert lo * 1e3 < 4.0 < hi * 1e3
    assert compare_runs(before, run_with(6.0, 10.0, seed=2), stage="wait").regression
    assert not compare_runs(before, run_with(6.0, 10.0, seed=2), stage="compute").regression
    slower_model = compare_runs(before, run_with(2.0, 13.0, seed=3))
    assert [c.name for c in slower_model.located] == ["compute"]
    same = compare_runs(before, run_with(2.0, 10.0, seed=4), max_slowdown="0%")
    assert same.located == () and not same.regression


def test_runs_without_waits_have_no_stage_to_gate_on():
    n = 40
    ideal = Run(mode="replay", start_ns=list(range(n)), step_ns=[10 * MS] * n)
    with pytest.raises(LoadEvalError, match="have no stages both measured"):
        compare_runs(ideal, ideal, stage="wait")
    assert compare_runs(ideal, ideal).changes == ()


# ---- files ---------------------------------------------------------------------------------


def test_a_ladder_and_a_split_read_back_as_they_were_saved(fake_time, clock, tmp_path):
    ladder = ladder_of(fake_time, 2.0, 10.0, seed=1)
    log = load_log(ladder.save(tmp_path / "ladder.json"))
    assert isinstance(log, LadderLog)
    assert [r.name for r in log.rungs] == [r.name for r in ladder.rungs]
    assert log.rungs[0].skipped and log.rungs[0].run is None  # no CUDA here
    for saved, rung in zip(log.rungs[1:], ladder.rungs[1:]):
        assert saved.run.steady_step_s() == rung.run.steady_step_s()
        assert saved.adds == {"host": "host-to-device copy"}.get(rung.name, saved.adds)
    split, _ = split_of(clock, 2.0, seed=1)
    back = load_log(split.save(tmp_path / "split.json"))
    assert isinstance(back, SplitLog) and back.samples == split.samples == 64
    assert [p.name for p in back.parts] == [p.name for p in split.parts]
    assert all(p.sum_sq_s2 and p.sum_sq_s2 > 0 for p in back.parts)
    assert back.per_sample_s == pytest.approx(split.per_sample_s)


def test_bad_files_and_mixed_kinds_are_one_sentence(clock, tmp_path):
    split, _ = split_of(clock, 2.0, seed=1)
    path = split.save(tmp_path / "split.json")
    doc = json.loads(open(path).read())
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**doc, "schema_version": 99}))
    with pytest.raises(RunLogError, match="newer than the 1 this loadeval_nb reads; upgrade"):
        load_log(newer)
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps({**doc, "samples": -1}))
    with pytest.raises(RunLogError, match="is a damaged split .*; measure it again"):
        load_log(damaged)
    foreign = tmp_path / "foreign.json"
    foreign.write_text("{}")
    with pytest.raises(RunLogError, match="not a loadeval_nb run log, ladder or transform split"):
        load_log(foreign)
    run = run_with(2.0, 10.0, seed=1)
    with pytest.raises(LoadEvalError, match="^before is a run log and after a transform split; "):
        compare_runs(run, path)
    with pytest.raises(LoadEvalError, match="before must be a run, a ladder or a transform split"):
        compare_runs(3, path)
