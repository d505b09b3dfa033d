"""The per-transform split: each step of a dataset's pipeline timed where it runs, checked
against pipelines whose costs are known (a fake clock, exact; sleeps, within tolerances)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset

from loadeval_nb import LoadEvalError, RunSettings, run_ladder
from loadeval_nb.core.verdict.diagnosis import ladder_advice
from loadeval_nb.explore import split_transforms
from tests.workloads import sleep_steps, take

# -- pipelines whose costs are known --------------------------------------------------------


class Compose:
    """torchvision's Compose as far as the split can tell: steps in a list ``.transforms``."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Sleep:
    """A step that takes ``s`` seconds: it sleeps (which takes no core: true with workers
    too), or advances a fake ``clock`` (the copy in the process that runs it)."""

    def __init__(self, s, clock=None):
        self.s, self.clock = s, clock

    def __call__(self, x):
        take(self.s, self.clock)
        return x


class RandomResizedCrop(Sleep):
    pass


class ColorJitter(Sleep):
    pass


class Normalize(Sleep):
    pass


class Tick:
    """A step that moves a fake clock by ``ns``."""

    def __init__(self, clock, ns):
        self.clock, self.ns = clock, ns

    def __call__(self, x):
        self.clock.advance(self.ns)
        return x


class Crop(Tick):
    pass


class Flip(Tick):
    pass


class Images(Dataset):
    """``n`` samples; reading one takes ``load`` (seconds, or a callable), then ``transform``."""

    def __init__(self, n, load, transform=None, target_transform=None):
        self.n, self.load = n, load
        self.transform, self.target_transform = transform, target_transform

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if callable(self.load):
            self.load()
        elif self.load:
            take(self.load)
        x = torch.full((3, 4, 4), float(i))
        y = i % 10
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y


def shares(split):
    return {p.name: p.share for p in split.parts}


# -- exact numbers with a fake clock (main process) --------------------------------------------


def test_exact_split_with_a_fake_clock_and_nested_pipelines(clock):
    # load 2 us; Crop 5 us; an inner Compose of Flip (3 us) and the same Crop object again
    crop = Crop(clock, 5_000)
    inner = Compose([Flip(clock, 3_000), crop])
    ds = Images(40, lambda: clock.advance(2_000), Compose([crop, inner]))
    split = split_transforms(DataLoader(ds, batch_size=4), batches=3, clock=clock)
    assert split.samples == 12 and split.batches == 3
    parts = {p.name: p for p in split.parts}
    assert set(parts) == {"Crop", "Flip", "rest of __getitem__"}  # one object, one step
    assert parts["Crop"].calls == 24 and parts["Flip"].calls == 12
    assert parts["Crop"].per_sample_s == pytest.approx(10e-6)
    assert parts["Flip"].per_sample_s == pytest.approx(3e-6)
    assert parts["rest of __getitem__"].per_sample_s == pytest.approx(2e-6)
    assert split.per_sample_s == pytest.approx(15e-6)
    assert [p.name for p in split.parts] == ["Crop", "Flip", "rest of __getitem__"]
    assert shares(split)["Crop"] == pytest.approx(10 / 15)
    assert split.collate_s == 0  # the fake clock does not move while collating


def test_subset_and_getitems_and_repeated_classes_are_named_apart(clock):
    # a Subset fetches a batch with __getitems__; two Crop objects are two steps
    ds = Images(40, lambda: clock.advance(1_000), Compose([Crop(clock, 4_000), Crop(clock, 2_000)]))
    split = split_transforms(
        DataLoader(Subset(ds, range(20)), batch_size=5), batches=2, clock=clock
    )
    parts = {p.name: p.per_sample_s for p in split.parts}
    assert parts == pytest.approx(
        {"Crop #1": 4e-6, "Crop #2": 2e-6, "rest of __getitems__": 1e-6}, rel=1e-9
    )


class Stream(IterableDataset):
    def __init__(self, clock, transform):
        self.clock, self.transform = clock, transform

    def __iter__(self):
        for i in range(100):
            self.clock.advance(7_000)
            yield self.transform(torch.zeros(2) + i)


def test_an_iterable_dataset_is_split_per_next(clock):
    split = split_transforms(
        DataLoader(Stream(clock, Flip(clock, 1_000)), batch_size=2), batches=4, clock=clock
    )
    assert {p.name: p.per_sample_s for p in split.parts} == pytest.approx(
        {"rest of next()": 7e-6, "Flip": 1e-6}
    )


# -- in the main process and in two workers (each advancing its own copy of the clock) --------


@pytest.mark.parametrize("workers", [0, 2])
def test_shares_match_a_known_pipeline(workers, clock):
    # per sample: RandomResizedCrop 6 ms, ColorJitter 3 ms, Normalize 1 ms, reading 2 ms (12 ms)
    pipe = Compose(
        [RandomResizedCrop(0.006, clock), ColorJitter(0.003, clock), Normalize(0.001, clock)]
    )
    dl = DataLoader(
        Images(400, lambda: take(0.002, clock), pipe), batch_size=4, num_workers=workers
    )
    split = split_transforms(dl, batches=8, clock=clock)
    truth = {"RandomResizedCrop": 6 / 12, "ColorJitter": 3 / 12, "Normalize": 1 / 12}
    truth["rest of __getitem__"] = 2 / 12
    got = shares(split)
    assert got == pytest.approx(truth), split.text()
    assert split.parts[0].name == "RandomResizedCrop"
    assert split.per_sample_s == pytest.approx(0.012)
    assert all(p.calls == split.samples for p in split.parts)
    assert split.samples >= 32 and split.processes == max(workers, 1)
    text = split.text()
    assert text.startswith("Per-sample time by step: RandomResizedCrop ")
    assert pipe.transforms[0].__class__ is RandomResizedCrop  # put back
    assert dl.dataset.transform is pipe and len(vars(pipe)) == 1


@pytest.fixture(scope="module")
def resource_tracker():
    """spawn starts multiprocessing's resource tracker once per interpreter; start it
    before the leak check looks, so it is not mistaken for a leaked worker."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@pytest.mark.slow
def test_spawned_workers_get_the_timed_steps_through_pickling(resource_tracker):
    pipe = Compose([RandomResizedCrop(0.004), Normalize(0.0005)])
    dl = DataLoader(
        Images(40, 0.001, pipe), batch_size=4, num_workers=1, multiprocessing_context="spawn"
    )
    split = split_transforms(dl, batches=3)
    assert [p.name for p in split.parts][0] == "RandomResizedCrop"
    assert all(p.calls == split.samples > 0 for p in split.parts)
    assert split.processes == 1 and "in 1 worker process" in split.text()
    assert pipe.transforms[0].__class__ is RandomResizedCrop


@pytest.mark.slow
def test_the_ladder_splits_the_real_rung_and_says_so():
    pipe = Compose([RandomResizedCrop(0.004), Normalize(0.0005)])
    dl = DataLoader(Images(200, 0.0, pipe), batch_size=2)
    res = run_ladder(
        dl,
        sleep_steps(0.001),
        RunSettings(steps=10, warmup=2, num_cached_batches=3, sample_interval_s=None),
    )
    assert res.ok, res.error
    split = res.transforms
    assert split is not None and split.parts[0].name == "RandomResizedCrop"
    facts = res.facts()
    assert [f.key for f in facts.facts] == ["transform-split", "advice"]
    assert facts.facts[0] == split.ladder_fact()
    assert facts.facts[0].text.startswith("RandomResizedCrop ")
    # the per-sample stage's advice, starting with its costliest step
    assert facts.facts[1].pieces == tuple(ladder_advice("real", "RandomResizedCrop"))
    assert any(
        n.startswith("per-transform split, measured after the rungs: 6 samples") for n in res.notes
    ), res.notes
    assert "RandomResizedCrop takes" in res.conclusion()
    assert dl.dataset.transform is pipe and type(pipe.transforms[0]) is RandomResizedCrop
    off = run_ladder(
        dl,
        sleep_steps(0.001),
        RunSettings(steps=6, warmup=1, num_cached_batches=2, sample_interval_s=None),
        rungs=("host", "real"),
        transforms=None,
    )
    assert off.transforms is None and [f.key for f in off.facts().facts] == ["advice"]


# -- named steps ------------------------------------------------------------------------------


def slow_decode(x):
    global decoded
    decoded += 1
    return x


decoded = 0


class Decoding(Images):
    def decode(self, x):
        self.load()  # the fake clock moves here
        return slow_decode(x)

    def __getitem__(self, i):
        return self.transform(self.decode(torch.zeros(2)))


def test_named_steps_bound_methods_and_module_functions_are_timed_and_put_back(clock):
    crop, flip = Crop(clock, 2_000), Flip(clock, 9_000)
    ds = Decoding(50, lambda: clock.advance(4_000), Compose([crop, flip]))
    before = dict(vars(ds))
    split = split_transforms(
        DataLoader(ds, batch_size=5), [ds.decode, flip, slow_decode], batches=2, clock=clock
    )
    per = {p.name: p.per_sample_s for p in split.parts}
    # crop is not named: its 2 us stay in the rest of __getitem__
    assert per == pytest.approx(
        {"decode": 4e-6, "Flip": 9e-6, "slow_decode": 0.0, "rest of __getitem__": 2e-6}
    )
    assert {p.name: p.calls for p in split.parts}["slow_decode"] == 10
    assert vars(ds) == before and "decode" not in vars(ds)  # the stand-in is gone
    assert slow_decode.__name__ == "slow_decode" and globals()["slow_decode"] is slow_decode
    assert ds.transform.transforms == [crop, flip]


def test_a_named_step_never_called_is_noted(clock):
    ds = Images(20, lambda: clock.advance(1_000), Compose([Flip(clock, 1_000)]))
    unused = Crop(clock, 5)
    ds.unused = unused  # reachable from the dataset, never called by it
    split = split_transforms(DataLoader(ds, batch_size=2), [unused], batches=1, clock=clock)
    assert "Crop never ran while 2 samples were made" in split.text()
    assert {p.name: p.calls for p in split.parts}["Crop"] == 0


# -- the user's objects are left as they were -------------------------------------------------


class Boom:
    def __init__(self, after, exc=ValueError):
        self.calls, self.after, self.exc = 0, after, exc

    def __call__(self, x):
        self.calls += 1
        if self.calls > self.after:
            raise self.exc("bad sample")
        return x


@pytest.mark.parametrize("workers, exc", [(0, ValueError), (0, KeyboardInterrupt), (2, ValueError)])
def test_the_pipeline_is_put_back_after_an_error(workers, exc):
    steps = [Normalize(0.0), Boom(3, exc)]
    pipe = Compose(steps)
    ds = Images(40, 0.0, pipe, target_transform=Normalize(0.0))
    target = ds.target_transform
    dl = DataLoader(ds, batch_size=2, num_workers=workers)
    loader_before = dict(vars(dl))
    with pytest.raises(exc, match="bad sample"):
        split_transforms(dl, batches=10)
    assert pipe.transforms is steps and steps[0].__class__ is Normalize
    assert [type(t) for t in steps] == [Normalize, Boom]
    assert ds.transform is pipe and ds.target_transform is target
    assert vars(dl) == loader_before


@dataclasses.dataclass(frozen=True)
class Frozen(Dataset):
    transform: object
    target_transform: object

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.transform(torch.zeros(1)), self.target_transform(i)


def test_a_step_that_cannot_be_replaced_is_refused_and_the_rest_put_back(clock):
    steps = [Crop(clock, 1)]
    pipe = Compose(steps)
    ds = Frozen(pipe, str)  # str sits in a frozen dataclass: it cannot be swapped
    with pytest.raises(LoadEvalError, match=r"Frozen.target_transform cannot be replaced"):
        split_transforms(DataLoader(ds, batch_size=2))
    assert pipe.transforms is steps and ds.target_transform is str


# -- bad input: one sentence ------------------------------------------------------------------


def test_bad_input_gets_one_sentence(clock):
    ds = Images(8, 0.0, Compose([Crop(clock, 1)]))
    dl = DataLoader(ds, batch_size=2)
    cases = [
        (
            lambda: split_transforms(dl, [ds.transform.transforms[0], "Resize"]),
            "transforms[1] is a str",
        ),
        (lambda: split_transforms(dl, [Flip(clock, 1)]), "transforms[0] (Flip) is not reachable"),
        (lambda: split_transforms(dl, [Flip]), "is the class Flip; name the instance"),
        (lambda: split_transforms(dl, 42), "transforms must be 'auto' or a list"),
        (
            lambda: split_transforms(DataLoader(Images(8, 0.0), batch_size=2)),
            "No transform pipeline",
        ),
        (lambda: split_transforms([1, 2]), "needs a torch.utils.data.DataLoader, not a list"),
        (lambda: split_transforms(dl, batches=0), "batches must be an integer >= 1"),
    ]
    for call, words in cases:
        with pytest.raises(LoadEvalError, match=re.escape(words)) as info:
            call()
        msg = str(info.value)
        assert msg.endswith(".") and msg.count(". ") == 0, msg


def test_the_ladder_refuses_bad_named_steps_before_any_rung_runs(clock):
    ran = []
    ds = Images(8, 0.0, Compose([Crop(clock, 1)]))
    dl = DataLoader(ds, batch_size=2)
    with pytest.raises(LoadEvalError, match=re.escape("transforms[0] is an int")):
        run_ladder(dl, lambda ev: ran.append(1), RunSettings(), transforms=[3])
    with pytest.raises(LoadEvalError, match="add 'real' to rungs"):
        run_ladder(
            dl, lambda ev: ran.append(1), RunSettings(), rungs=("host",), transforms=[ds.transform]
        )
    assert ran == []


# -- a real torchvision v2 pipeline, where torchvision works next to this torch ---------------


def _v2():
    try:
        import torchvision.transforms.v2 as v2
    except Exception as e:  # not installed, or a build for another torch (its CUDA wheel on CPU)
        pytest.skip(f"torchvision is not usable here ({type(e).__name__}: {e})")
    return v2


class Pictures(Dataset):
    def __init__(self, transform):
        self.transform = transform

    def __len__(self):
        return 64

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, 96, 96), dtype=torch.uint8, generator=g)
        return self.transform(img), i % 10


@pytest.mark.parametrize("workers", [0, 2])
def test_a_torchvision_v2_pipeline_is_split_by_its_steps(workers):
    v2 = _v2()
    steps = [
        v2.RandomResizedCrop(64, antialias=True),
        v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4)], p=1.0),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize([0.5] * 3, [0.25] * 3),
    ]
    pipe = v2.Compose(steps)
    dl = DataLoader(Pictures(pipe), batch_size=8, num_workers=workers)
    split = split_transforms(dl, batches=4)
    names = {p.name for p in split.parts}
    # RandomApply is opened: its ColorJitter is a step of its own
    assert names == {
        "RandomResizedCrop",
        "ColorJitter",
        "RandomHorizontalFlip",
        "ToDtype",
        "Normalize",
        "rest of __getitem__",
    }
    assert sum(p.share for p in split.parts) == pytest.approx(1.0)
    assert all(p.calls == split.samples for p in split.parts)
    assert pipe.transforms is steps and all(
        type(t).__module__.startswith("torchvision") for t in steps
    )
    assert pipe(torch.zeros(3, 96, 96, dtype=torch.uint8)).shape == (3, 64, 64)
