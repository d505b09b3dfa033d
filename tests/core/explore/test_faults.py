"""Pairs, sweeps, repeats and the transform split under faults: a pair that fails, a repeat
that fails, refusals before the real run, logs never overwritten, and the bad-input
catalogue's pair, settings and sweep cases.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import (
    LoaderEvaluator,
    LoadEvalError,
    Run,
    RunSettings,
    load_run,
    run_pair,
    run_sweep,
)
from loadeval_nb.explore import parse_sweep, prepare_sweep, split_transforms
from loadeval_nb.measure import AutoStop
from tests.catalogue import (
    MAX_WORKERS,
    PAIR_SETTINGS,
    Boom,
    CtrlCAt,
    InputUser,
    User,
    case_id,
    check_bad_input,
    check_more_bad_input,
    loader_state,
    log_at,
    logged,
    loop,
    no_children,
    nothing_left,
)

# the added catalogue's cases ran with these around each
pytestmark = pytest.mark.usefixtures("earlier_children", "sigint_put_back")


class Scale:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class Corrupt:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if float(x[0]) == 26:  # sample 13, scaled
            raise Boom("sample 13 is corrupt")
        return x


class Compose:
    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class Transformed(Dataset):
    def __init__(self) -> None:
        self.transform = Compose([Scale(), Corrupt()])

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(torch.full((2,), float(i)))


def never(e: LoaderEvaluator) -> None:
    raise AssertionError("the loop ran although the input should have been refused")


def pair(u: User, **settings: Any) -> None:
    run_pair(u.loader, never, RunSettings(**settings))


def fails_in(which: str, exc: BaseException) -> Callable[[LoaderEvaluator], None]:
    def run_once(ev: LoaderEvaluator) -> None:
        for k, _b in enumerate(ev):
            if ev.mode == which and k == 5:
                raise exc

    return run_once


PAIR = [
    ("real-raises", fails_in("log", Boom("real failed")), "real", Boom, 6, None),
    ("ideal-raises", fails_in("replay", Boom("ideal failed")), "ideal", Boom, 16, 6),
    ("real-interrupted", fails_in("log", KeyboardInterrupt()), "real", KeyboardInterrupt, 6, None),
    (
        "ideal-interrupted",
        fails_in("replay", KeyboardInterrupt()),
        "ideal",
        KeyboardInterrupt,
        16,
        6,
    ),
]


def never_called(ev):
    raise AssertionError("the loop ran although the request should have been refused")


def test_a_used_up_generator_gets_the_right_advice():
    gen = (torch.zeros(2) for _ in range(3))
    list(gen)
    res = run_pair(gen, lambda ev: None, RunSettings(steps=6, warmup=1, only="ideal"))
    assert isinstance(res.error, LoadEvalError)
    assert "is an iterator that is used up (it yields nothing now)" in str(res.error)


def test_split_transforms_whose_transform_raises_in_a_worker(user):
    ds = Transformed()
    pipeline, steps = ds.transform, ds.transform.transforms
    items = list(steps)
    loader = DataLoader(ds, batch_size=4, num_workers=2)
    before = loader_state(loader)
    rng = torch.get_rng_state()
    with pytest.raises(Boom) as info:
        split_transforms(loader, batches=8)
    assert str(info.value).startswith("Caught Boom in DataLoader worker process")
    assert "sample 13 is corrupt" in str(info.value)
    # the dataset's pipeline is put back: the same objects, in the same list
    assert ds.transform is pipeline and ds.transform.transforms is steps
    assert len(steps) == len(items) and all(a is b for a, b in zip(steps, items))
    assert list(vars(ds)) == ["transform"] and list(vars(pipeline)) == ["transforms"]
    assert loader_state(loader) == before and torch.equal(torch.get_rng_state(), rng)
    assert no_children() == []
    nothing_left(user.tmp, ())


@pytest.mark.filterwarnings("ignore::loadeval_nb.errors.CacheMutationWarning")
def test_a_repeat_that_fails_keeps_the_runs_so_far(user, fake_time):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    calls: list[str] = []
    raised: list[BaseException] = []

    def run_once(ev: LoaderEvaluator) -> None:
        calls.append(ev.mode)
        for k, b in enumerate(ev):
            b[0].mul_(2)  # in place: never the user's data
            if calls.count("log") == 2 and ev.mode == "log" and k == 3:
                raised.append(Boom("the second real repeat failed"))
                raise raised[0]

    settings = RunSettings(**{**PAIR_SETTINGS, "steps": 8, "repeat": 3})
    res = run_pair(loader, run_once, settings)
    assert calls == ["log", "replay", "replay", "log"]  # A B B A: it stopped there
    assert res.error is raised[0] and res.failed == "real" and res.diagnosis is None
    assert "the real run failed (Boom: the second real repeat failed)" in res.text()
    # the real run keeps its first repeat whole and the second up to the failure
    assert isinstance(res.real, Run) and res.real.n_steps == 8 + 4
    assert res.real.block == [0] * 8 + [1] * 4 and res.real.complete[-1] is False
    assert [e["status"] for e in res.real.blocks] == ["complete", "stopped"]
    assert isinstance(res.ideal, Run) and res.ideal.n_steps == 16
    logged(res.log_paths["real"], 12, "stopped")
    logged(res.log_paths["ideal"], 16, "complete")
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(os.path.basename(p) for p in res.log_paths.values()))


def test_a_failed_pair_whose_loop_holds_its_iterator_puts_sigint_back(user, fake_time):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    raised: list[BaseException] = []

    def run_once(ev: LoaderEvaluator) -> None:
        it = iter(ev)  # held, as a framework's loop holds it
        for k in range(100):
            next(it)
            if k == 3:
                raised.append(Boom("failed with its iterator held"))
                raise raised[0]

    res = run_pair(user.loader(), run_once, RunSettings(**PAIR_SETTINGS))
    assert res.error is raised[0] and res.failed == "real"
    logged(res.log_paths["real"], 4, "stopped")
    handler = signal.getsignal(signal.SIGINT)
    # what it costs: a later run's Ctrl-C in next() (see test_ctrl_c_in_next_is_a_stop)
    ev = LoaderEvaluator(DataLoader(CtrlCAt(), batch_size=4), sample_interval_s=None)
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    status = ev.to_run().blocks[0]["status"]
    assert (handler, status) == (signal.default_int_handler, "stopped")


@pytest.mark.parametrize(
    ("name", "run_once", "failed", "kind", "real_steps", "ideal_steps"),
    PAIR,
    ids=[p[0] for p in PAIR],
)
def test_a_pair_that_fails(user, name, run_once, failed, kind, real_steps, ideal_steps):
    loader = user.loader(num_workers=1)
    before, data = loader_state(loader), user.data.clone()
    # (the sides one after the other, as asked: a loader this short is otherwise paired on
    # the loop's epochs, test_a_pair_on_the_loops_epochs_that_fails below)
    res = run_pair(
        loader,
        run_once,
        RunSettings(steps=20, warmup=2, num_cached_batches=3, log_dir="logs", interleave=False),
    )
    assert isinstance(res.error, kind) and res.failed == failed
    logs = sorted(os.listdir("logs"))
    assert len(logs) == (1 if ideal_steps is None else 2)
    real_log = next(f for f in logs if "real" in f)
    logged(
        os.path.join("logs", real_log), real_steps, "stopped" if failed == "real" else "complete"
    )
    if ideal_steps is not None:
        logged(os.path.join("logs", next(f for f in logs if "ideal" in f)), ideal_steps, "stopped")
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


@pytest.mark.parametrize("kind", [Boom, KeyboardInterrupt])
def test_a_pair_on_the_loops_epochs_that_fails(user, kind):
    # a loader too short for blocks, paired on the loop's epochs: a failure in its third
    # epoch (an ideal one) keeps both sides' logs so far, names the pair, and no verdict
    loader = user.loader(num_workers=1)
    before, data = loader_state(loader), user.data.clone()
    epochs: list[int] = []

    def run_once(ev: LoaderEvaluator) -> None:
        for _ in range(8):
            epochs.append(1)
            for k, _b in enumerate(ev):
                if len(epochs) == 3 and k == 5:
                    raise kind("the third epoch failed")

    res = run_pair(loader, run_once, RunSettings(warmup=2, num_cached_batches=3, log_dir="logs"))
    assert isinstance(res.error, kind) and res.failed == "pair" and res.diagnosis is None
    assert len(epochs) == 3  # not run again after a failure
    logs = sorted(os.listdir("logs"))
    assert len(logs) == 2
    real = load_run(os.path.join("logs", next(f for f in logs if "real" in f)))
    ideal = load_run(os.path.join("logs", next(f for f in logs if "ideal" in f)))
    assert len(real.blocks) == 1 and [b["status"] for b in ideal.blocks] == ["complete", "stopped"]
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


def test_two_pairs_in_the_same_second_keep_four_logs(tmp_path):
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    s = RunSettings(
        steps=6, warmup=1, num_cached_batches=2, log_dir=str(tmp_path), sample_interval_s=None,
        interleave=False,
    )  # fmt: skip
    a = run_pair(loader, loop, s, label="same")
    b = run_pair(loader, loop, s, label="same")
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


def test_an_unwritable_log_dir_is_refused_before_the_loop(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="Cannot write run logs in .* pass a log_dir"):
        run_pair(loader, never_called, RunSettings(steps=6, warmup=1, log_dir=str(blocker / "sub")))


def test_device_cache_without_cuda_is_refused_before_the_real_run():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with pytest.raises(LoadEvalError, match="needs a CUDA device"):
        run_pair(loader, never_called, RunSettings(steps=6, warmup=1, cache_on="device"))


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


def test_dict_specs_are_read_like_string_specs():
    assert parse_sweep({"pin_memory": ["False"]}) == [{"pin_memory": False}]
    assert parse_sweep({"num_workers": "2"}) == parse_sweep("num_workers=2")
    with pytest.raises(LoadEvalError, match=r"pin_memory='yes' is not a value"):
        parse_sweep({"pin_memory": ["yes"]})
    with pytest.raises(LoadEvalError, match="num_workers must be an integer >= 0, not True"):
        parse_sweep({"num_workers": [True]})


def test_a_sweep_given_as_a_list_of_dicts_runs_the_values_it_reports():
    dl = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2, pin_memory=True)
    plan = prepare_sweep(dl, [{"pin_memory": "False"}, {"num_threads": "1"}])
    assert plan.configs == [{"pin_memory": False}, {"num_threads": 1}]
    assert plan.loaders[0].pin_memory is False  # True (the string 'False') before the fix
    with pytest.raises(LoadEvalError, match="holds dicts such as"):
        prepare_sweep(dl, ["num_workers=2"])


def test_log_names_from_long_labels_are_shortened(tmp_path):
    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    settings = RunSettings(steps=6, warmup=1, log_dir=str(tmp_path), sample_interval_s=None)
    res = run_pair(dl, lambda ev: [None for _ in ev], settings, label="L" * 400)
    assert res.ok and set(res.log_paths) == {"real", "ideal"}
    for path in res.log_paths.values():
        assert len(os.path.basename(path)) < 200 and load_run(path).n_steps == 6


def test_split_transforms_leaves_the_global_torch_rng_as_it_was():
    class T:
        def __call__(self, x):
            return x * torch.rand(1)

    class D(Dataset):
        def __init__(self) -> None:
            self.t = T()

        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> torch.Tensor:
            return self.t(torch.rand(3))

    d = D()
    dl = DataLoader(d, batch_size=4, shuffle=True)
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    split_transforms(dl, [d.t])
    assert torch.equal(torch.rand(1), expected)


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "settings-steps-zero",
        lambda u: RunSettings(steps=0),
        LoadEvalError,
        "steps must be a positive integer or 'auto', not 0.",
    ),
    (
        "settings-steps-word",
        lambda u: RunSettings(steps="many"),
        LoadEvalError,
        "steps must be a positive integer or 'auto', not 'many'.",
    ),
    (
        "settings-warmup-over-steps",
        lambda u: RunSettings(steps=10, warmup=10),
        LoadEvalError,
        "warmup (10) must be smaller than steps (10): warm-up steps are not measured.",
    ),
    (
        "settings-cache-zero",
        lambda u: RunSettings(num_cached_batches=0),
        LoadEvalError,
        "num_cached_batches must be a positive number of batches, not 0.",
    ),
    (
        "settings-cache-on",
        lambda u: RunSettings(cache_on="disk"),
        LoadEvalError,
        "cache_on must be 'host' or 'device', not 'disk'.",
    ),
    (
        "settings-only",
        lambda u: RunSettings(only="both"),
        LoadEvalError,
        "only must be None or 'real' or 'ideal', not 'both'.",
    ),
    (
        "settings-auto-stop-without-auto",
        lambda u: RunSettings(steps=50, auto_stop=AutoStop()),
        LoadEvalError,
        "auto_stop applies to steps='auto', not steps=50; pass one or the other.",
    ),
    (
        "settings-interval",
        lambda u: RunSettings(sample_interval_s=1e-9),
        LoadEvalError,
        "sample_interval_s must be a number of seconds from 0.01 to 3600, or None to turn sampling off, not 1e-09.",
    ),
    (
        "pair-not-a-loader",
        lambda u: run_pair(5, never),
        LoadEvalError,
        "The loader must be an iterable of batches such as a DataLoader, not an int.",
    ),
    (
        "pair-not-callable",
        lambda u: run_pair(u.loader, "train"),
        LoadEvalError,
        "run_once must be a function that runs the training loop over the evaluator it is given (def run_once(ev): for batch in ev: ...), not a str.",
    ),
    (
        "pair-empty-loader",
        lambda u: run_pair([], never),
        LoadEvalError,
        "The list produced no batches, so there is nothing to measure; pass a loader that yields at least one batch.",
    ),
    (
        "pair-log-dir-is-a-file",
        lambda u: pair(u, log_dir=log_at(u, "f.txt", "x")),
        LoadEvalError,
        "Cannot write run logs in '{tmp}/f.txt' ('f.txt' is a file, not a folder); pass a log_dir you can write to.",
    ),
    (
        "pair-device-cache-without-cuda",
        lambda u: pair(u, cache_on="device"),
        LoadEvalError,
        "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'.",
    ),
    (
        "sweep-unknown-setting",
        lambda u: parse_sweep("num_wrkers=0,2"),
        LoadEvalError,
        "Cannot sweep num_wrkers (did you mean 'num_workers'?); only num_workers, pin_memory, prefetch_factor, persistent_workers, num_threads can be swept.",
    ),
    (
        "sweep-not-a-number",
        lambda u: parse_sweep("num_workers=two"),
        LoadEvalError,
        "num_workers='two' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-negative-workers",
        lambda u: parse_sweep("num_workers=-1"),
        LoadEvalError,
        "num_workers must be an integer >= 0, not -1.",
    ),
    (
        "sweep-too-many-workers",
        lambda u: parse_sweep("num_workers=100000"),
        LoadEvalError,
        f"num_workers=100000 is more worker processes than this machine can run usefully (4 per CPU: at most {MAX_WORKERS}); try a number up to {MAX_WORKERS}.",
    ),
    (
        "sweep-not-a-bool",
        lambda u: parse_sweep("pin_memory=maybe"),
        LoadEvalError,
        "pin_memory='maybe' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-dict-string-bool",
        lambda u: parse_sweep({"pin_memory": ["maybe"]}),
        LoadEvalError,
        "pin_memory='maybe' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "sweep-empty",
        lambda u: parse_sweep(""),
        LoadEvalError,
        'The sweep is empty; give settings to try, like "num_workers=0,2,4; pin_memory=False,True".',
    ),
    (
        "sweep-no-values",
        lambda u: parse_sweep("num_workers="),
        LoadEvalError,
        "num_workers has no values to try; list them like num_workers=0,2,4.",
    ),
    (
        "sweep-not-a-dataloader",
        lambda u: run_sweep([1, 2], never, "num_workers=0,1"),
        LoadEvalError,
        "A sweep rebuilds the DataLoader with other settings, and the loader is a list; sweep a torch.utils.data.DataLoader.",
    ),
]


BAD: list[Any] = [
    (
        "repeat-over-20",
        lambda tmp: RunSettings(repeat=21),
        LoadEvalError,
        "repeat must be from 1 to 20, not 21.",
    ),
    (
        "split-transforms-no-pipeline",
        lambda tmp: split_transforms(DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4)),
        LoadEvalError,
        "No transform pipeline was found on the loader's dataset (a TensorDataset and the datasets it wraps have no transform, transforms or target_transform); name the callables it calls with transforms=[...].",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), BAD, ids=[case_id(c) for c in BAD])
def test_more_bad_input(user, quiet_frameworks, name, call, kind, sentence):
    check_more_bad_input(user.tmp, call, kind, sentence)
