"""Which DataLoader a script trains on, and the pass measured: the rule in-process, with
the patched ``DataLoader.__iter__`` and real evaluators on tiny loaders (no sleeps)."""

from __future__ import annotations

import os

import pytest
import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator
from loadeval_nb.integrations._script.child.pick import (
    Measured,
    Picker,
    Refused,
    Side,
    patched_dataloader,
)


def side(tmp_path, mode="log", **kw):
    """A side writing ``run.json`` in ``tmp_path``; ``made`` lists the loaders wrapped."""
    made = []

    def make(loader, claim):
        made.append(loader)
        return LoaderEvaluator(
            loader, mode=mode, metrics_file=claim(("real",))["real"], sample_interval_s=None, **kw
        )

    s = Side(make, lambda name: str(tmp_path / "run.json"))
    s.made = made
    return s


def loader(n, batch=1):
    return DataLoader(torch.arange(n * batch, dtype=torch.float32), batch_size=batch)


def test_a_pass_under_no_grad_and_a_short_pass_are_not_the_training_pass(tmp_path):
    s = side(tmp_path, steps=8, warmup=2)
    picker = Picker(s, warmup=2)
    val, train = loader(5), loader(20)
    seen = []
    with patched_dataloader(picker), pytest.raises(Measured):
        with torch.no_grad():
            list(val)  # a validation pass: never measured
        next(iter(train))  # a look at one batch: measured from its start, then let go
        assert not os.path.exists(tmp_path / "run.json")  # what it wrote is removed
        for x in train:
            seen.append(float(x))
    assert DataLoader.__iter__ is DataLoader.__dict__["__iter__"]  # restored
    assert seen == [float(i) for i in range(8)]  # the script stops after the 8 steps
    st = picker.status
    assert st.outcome == "measured" and (st.loader_index, st.pass_index, st.steps) == (2, 2, 8)
    assert st.loader_settings["len"] == 20 and not st.stopped_by_script
    assert picker.passes == [
        "DataLoader #1 (batch_size 1, 5 batches, Tensor), pass 1 under no_grad",
        "DataLoader #2 (batch_size 1, 20 batches, Tensor), pass 1 was left after 1 batch",
    ]
    assert os.path.exists(st.log_paths["real"])


def test_a_loader_shorter_than_the_steps_is_measured_whole(tmp_path):
    picker = Picker(side(tmp_path, steps=50, warmup=2), warmup=2)
    with patched_dataloader(picker), pytest.raises(Measured):
        for _ in loader(6):
            pass
    assert picker.status.steps == 6


def test_a_pass_within_the_warmup_is_let_go_and_the_script_goes_on(tmp_path):
    picker = Picker(side(tmp_path, steps=5, warmup=3), warmup=3)
    with patched_dataloader(picker):
        assert len(list(loader(3))) == 3  # ended within the warm-up: not the training pass
    assert picker.status is None and picker.passes[0].endswith("pass 1 ended after 3 batches")


def test_a_pass_the_script_ends_itself_is_measured_and_the_next_loader_stops_it(tmp_path):
    picker = Picker(side(tmp_path, steps=50, warmup=2), warmup=2)
    train = loader(20)
    with patched_dataloader(picker):
        for i, _ in enumerate(train):
            if i == 9:
                break  # the script's own step limit
        assert picker.status.stopped_by_script and picker.status.steps == 10
        with pytest.raises(Measured):
            iter(loader(3))  # nothing of the script's past its measured pass runs


def test_the_ideal_side_measures_the_pass_the_real_side_measured(tmp_path):
    s = side(tmp_path, mode="replay", num_cached_batches=2, steps=6)
    picker = Picker(s, warmup=2, want=(1, 2))
    train = loader(20)
    with patched_dataloader(picker):
        assert len(list(train)) == 20  # pass 1: the loader's own
        with pytest.raises(Measured):
            for _ in train:  # pass 2: replayed (its cache filled from the loader itself)
                pass
    assert s.made == [train] and picker.status.steps == 6


def test_the_kth_loader_is_measured_with_gradients_off(tmp_path):
    picker = Picker(side(tmp_path, steps=4, warmup=1), warmup=1, want=(2, None))
    a, b = loader(10), loader(10)
    with patched_dataloader(picker), torch.no_grad():
        list(a)
        with pytest.raises(Measured):
            list(b)
    assert picker.status.loader_index == 2


def test_a_setting_that_does_not_fit_stops_the_script_with_one_sentence(tmp_path):
    def make(loader, claim):
        raise __import__("loadeval_nb").LoadEvalError("The cache would not fit.")

    picker = Picker(Side(make, lambda name: str(tmp_path / "r.json")), 2)
    with patched_dataloader(picker), pytest.raises(Refused) as e:
        list(loader(5))
    assert e.value.message == "The cache would not fit." and e.value.code == 3


def test_the_ideal_side_refuses_another_loader_than_the_real_one(tmp_path):
    picker = Picker(
        side(tmp_path, mode="replay", num_cached_batches=2),
        warmup=2,
        want=(1, 1),
        expect={"batch_size": 1, "len": 5, "dataset_type": "Tensor"},
    )
    with patched_dataloader(picker), pytest.raises(Refused) as e:
        list(loader(20))
    assert "not the one the real run measured (len 20 vs 5)" in e.value.message
    assert "--loader K" in e.value.message


def test_a_variant_workers_death_is_the_variants_whatever_block_ran(tmp_path):
    # torch raises a worker's death in the main thread when it happens (SIGCHLD), often
    # in another arm's block: the sentence blamed "the real side"
    class Pass:
        workers = {"real": {101, 102}, "variant": {201, 202}}

    picker = Picker(side(tmp_path), warmup=2)
    picker._measuring = Pass()
    told = picker.blame(
        "the real side, block 3", "RuntimeError: DataLoader worker (pid(s) 202) exited unexpectedly"
    )
    assert told == "the variant's loader: its worker (pid 202) ended, in the real side, block 3"
    real = "RuntimeError: DataLoader worker (pid 101) is killed by signal: Killed."
    assert picker.blame("the real side, block 3", real) == "the real side, block 3"
    assert picker.blame("the ideal side, block 1", "ValueError: bad") == "the ideal side, block 1"


def test_a_pass_records_each_arms_workers():
    loader = DataLoader(torch.arange(2400.0), batch_size=4, num_workers=1)
    ev = LoaderEvaluator(loader, mode="pair", steps=120, warmup=4, variant="num_workers=2",
                         contention=False, sample_interval_s=None)  # fmt: skip
    for _ in ev:
        pass
    ev.close()
    workers = ev.workers
    assert len(workers["real"]) == 1 and len(workers["variant"]) == 2
    assert not workers["real"] & workers["variant"]
