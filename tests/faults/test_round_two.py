"""Reliability, round two: one case for each fault the second hostile round found, each
asserting what the user sees, that nothing of theirs is lost or changed, and that nothing
is left behind. Every case fails without its fix."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import namedtuple
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import LoaderEvaluator, Run, RunSettings, load_run, run_pair
from loadeval_nb.errors import CacheMutationWarning, LoadEvalError, RunLogError
from loadeval_nb.explore import prepare_sweep, split_transforms

from ..ipython_shell import ipython_shell

# ---- 1, 2: the data a user owns, whatever shape a batch has -----------------------------------


@dataclasses.dataclass
class Batch:
    img: torch.Tensor
    arr: np.ndarray


Pair = namedtuple("Pair", "a b")


class Holder:
    def __init__(self) -> None:
        self.t = torch.zeros(2)
        self.meta = "kept"


def _replay(src: list, steps: int, body) -> list[warnings.WarningMessage]:
    ev = LoaderEvaluator(
        src, mode="replay", num_cached_batches=3, steps=steps, sample_interval_s=None
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for b in ev:
            body(b)
    return list(seen)


def test_replay_leaves_a_dataclass_batchs_tensors_and_arrays_as_they_were():
    src = [Batch(torch.ones(2), np.ones(2)) for _ in range(5)]

    def body(b):
        b.img.add_(1)
        b.arr += 1

    seen = _replay(src, 30, body)
    assert src[0].img[0].item() == 1.0 and src[0].arr[0] == 1.0  # 11.0 before the fix
    said = [str(w.message) for w in seen if w.category is CacheMutationWarning]
    assert len(said) == 1
    assert "3 of the 3 cached tensors and 3 of the 3 cached arrays" in said[0]
    assert "cached batch 0.img" in said[0] and "your own data was not changed" in said[0]


def test_replay_copies_named_tuples_objects_and_nested_mixes():
    src = [Pair(Holder(), [np.zeros(1), {"k": torch.zeros(1)}]) for _ in range(4)]

    def body(p):
        p.a.t += 1
        p.b[1]["k"].mul_(2).add_(1)
        p.b[0] += 1

    seen = _replay(src, 12, body)
    assert src[0].a.t.sum().item() == 0.0 and src[0].a.meta == "kept"
    assert src[0].b[0][0] == 0.0 and src[0].b[1]["k"].item() == 0.0
    said = " ".join(str(w.message) for w in seen if w.category is CacheMutationWarning)
    assert "cached batch 0.a.t" in said and "cached batch 0.b[1]['k']" in said


def test_a_batch_that_contains_itself_replays():
    b: dict[str, Any] = {"x": torch.zeros(3)}
    b["self"] = b
    ev = LoaderEvaluator([b, b], mode="replay", num_cached_batches=2, sample_interval_s=None)
    assert sum(1 for _ in ev) == 2  # RecursionError ~1,000 frames deep before the fix
    cached = ev.cached_batches[0]
    assert cached["self"] is cached and ev.cache_bytes is not None


def test_a_batch_nested_past_the_depth_limit_is_one_leaf():
    deep: Any = torch.zeros(1)
    for _ in range(5000):
        deep = [deep]
    ev = LoaderEvaluator([deep] * 3, mode="replay", num_cached_batches=2, sample_interval_s=None)
    assert sum(1 for _ in ev) == 3


# ---- 3: a sweep runs exactly the values it reports --------------------------------------------


def test_a_sweep_given_as_a_list_of_dicts_runs_the_values_it_reports():
    dl = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=2, pin_memory=True)
    plan = prepare_sweep(dl, [{"pin_memory": "False"}, {"num_threads": "1"}])
    assert plan.configs == [{"pin_memory": False}, {"num_threads": 1}]
    assert plan.loaders[0].pin_memory is False  # True (the string 'False') before the fix
    with pytest.raises(LoadEvalError, match="holds dicts such as"):
        prepare_sweep(dl, ["num_workers=2"])


# ---- 4: two threads ending epochs of one evaluator --------------------------------------------


def test_two_threads_ending_epochs_write_a_loadable_log(tmp_path):
    path = tmp_path / "r.json"
    for _ in range(10):
        ev = LoaderEvaluator(list(range(40)), metrics_file=str(path), sample_interval_s=None)

        def epochs(ev: LoaderEvaluator = ev) -> None:
            for _ in range(5):
                for _ in ev:
                    pass

        threads = [threading.Thread(target=epochs) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ev.close()
        assert load_run(path).n_steps == 400
    assert sorted(os.listdir(tmp_path)) == ["r.json"]  # no temporary file left


# ---- 5: one bad journal line --------------------------------------------------------------------


def _journaled(tmp_path, n_epochs: int = 6) -> str:
    path = str(tmp_path / "r.json")
    ev = LoaderEvaluator(list(range(10)), metrics_file=path, sample_interval_s=None)
    for _ in range(n_epochs):
        for _ in ev:
            pass
    # a crash before close(): the document plus its journal is what is on disk
    assert os.path.exists(path + ".journal"), "the case needs journal lines"
    ev._writer = None  # what a killed process leaves: no final rewrite
    return path


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: {
            **line,
            "steps": {**line["steps"], "step_ns": [-5] * len(line["steps"]["step_ns"])},
        },
        lambda line: {**line, "epochs": "garbage"},
        lambda line: "not json at all",
    ],
    ids=["negative-step", "epochs-a-string", "unparsable"],
)
def test_one_bad_journal_line_is_left_out_and_the_rest_loads(tmp_path, caplog, damage):
    path = _journaled(tmp_path)
    jpath = path + ".journal"
    lines = open(jpath).read().splitlines()
    first = json.loads(lines[0])
    bad = damage(first)
    lines[0] = bad if isinstance(bad, str) else json.dumps(bad)
    open(jpath, "w").write("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        run = load_run(path)
    good_after = len(lines) - 1
    kept = json.load(open(path))["steps"]["step_ns"]
    assert run.n_steps == len(kept) + 10 * good_after  # the line's 10 steps are gone, no more
    assert all(isinstance(e, dict) for e in run.epochs)
    said = [r.getMessage() for r in caplog.records if "journal line" in r.getMessage()]
    assert len(said) == 1 and "1 damaged journal line left out" in said[0]


# ---- 7: paths as a shell reads them ------------------------------------------------------------


def test_tilde_and_variables_expand_in_path_options(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUNS_AT", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    assert RunSettings(log_dir="~/runs").log_dir == str(tmp_path / "runs")
    assert RunSettings(log_dir="$RUNS_AT/a").log_dir == str(tmp_path / "runs" / "a")
    ev = LoaderEvaluator([1, 2, 3], metrics_file="~/one.json", sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert (tmp_path / "one.json").exists() and not (tmp_path / "~").exists()
    assert load_run("~/one.json").n_steps == 3


# ---- 8: finding the loader never runs the user's code ------------------------------------------


def test_the_magic_finds_the_loader_without_calling_properties():
    calls = []

    class Model:
        @property
        def trainer(self):
            calls.append(1)
            raise RuntimeError("a Lightning module's trainer raises before a fit")

    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    with ipython_shell(train_loader=dl, model=Model()) as ip:
        ip.run_cell_magic(
            "loadeval",
            "--steps 6 --warmup 1 --quiet",
            "t = type(model).trainer\nfor b in train_loader:\n    pass\n",
        )
        assert ip.user_ns["_loadeval"].ok
    assert calls == []


# ---- 9: a history file with a mistyped row ----------------------------------------------------


def test_a_history_row_of_the_wrong_kinds_is_refused_in_one_sentence(tmp_path):
    from loadeval_nb.core._shared import load_history

    p = tmp_path / "h.json"
    rows = [{"label": "#1", "real_step_s": "abc"}]
    p.write_text(json.dumps({"kind": "loadeval_nb.history", "schema_version": 1, "rows": rows}))
    with pytest.raises(RunLogError, match="real_step_s is 'abc', not a finite number"):
        load_history(p)


# ---- 10: names too long to write ----------------------------------------------------------------


def test_a_metrics_file_name_too_long_is_refused_when_made(tmp_path):
    with pytest.raises(LoadEvalError, match="pass a shorter name"):
        LoaderEvaluator([1], metrics_file=str(tmp_path / ("x" * 250 + ".json")))


def test_log_names_from_long_labels_are_shortened(tmp_path):
    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    settings = RunSettings(steps=6, warmup=1, log_dir=str(tmp_path), sample_interval_s=None)
    res = run_pair(dl, lambda ev: [None for _ in ev], settings, label="L" * 400)
    assert res.ok and set(res.log_paths) == {"real", "ideal"}
    for path in res.log_paths.values():
        assert len(os.path.basename(path)) < 200 and load_run(path).n_steps == 6


# ---- 11: launch_ranks without bound, a hung rank, error files -----------------------------------


def test_launch_ranks_refuses_unbounded_processes_and_stops_hung_ranks():
    from loadeval_nb.integrations import launch_ranks

    with pytest.raises(LoadEvalError, match="nprocs=100000 is more worker processes"):
        launch_ranks(lambda: 1, nprocs=100000)
    before = {f for f in os.listdir("/tmp") if f.startswith("pytorch-errorfile")}
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish in 2 s"):
        launch_ranks(lambda: time.sleep(60), nprocs=2, timeout_s=2)
    assert time.monotonic() - started < 30
    with pytest.raises(RuntimeError, match="rank 1 failed first"):
        launch_ranks(_fails_on_rank_1, nprocs=2)
    after = {f for f in os.listdir("/tmp") if f.startswith("pytorch-errorfile")}
    assert after <= before  # no error file left by these launches


def _fails_on_rank_1() -> None:
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("rank 1's own error")


# ---- 12: equal ranks with workers are not called stragglers -------------------------------------


def _rank(rank: int, wait_ms: list[float], load_ms: float, workers: int):
    from loadeval_nb.ranks import RankResult

    n = len(wait_ms)
    step = [int((w + 10) * 1e6) for w in wait_ms]
    run = Run(
        mode="log",
        start_ns=[sum(step[:i]) for i in range(n)],
        step_ns=step,
        wait_ns=[int(w * 1e6) for w in wait_ms],
        samples=[8] * n,
        loader_settings={"num_workers": workers},
        worker_load_ns=[int(load_ms * 1e6)] * 200,
    )
    ideal = Run(
        mode="replay", start_ns=[i * 10_000_000 for i in range(n)], step_ns=[10_000_000] * n
    )
    return RankResult(rank, "h", run.to_dict(), ideal.to_dict())


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_a_late_phase_among_equal_loaders_is_not_a_straggler(workers):
    from loadeval_nb.core._shared import ranks_result

    rng = np.random.default_rng(workers)
    # rank 0 waits in next() for a whole run (its batch arrives later: a phase), rank 1 in
    # the all-reduce; both loaders make a batch in the same time
    late = list(12 + rng.normal(0, 0.5, 300))
    early = list(2 + rng.normal(0, 0.3, 300))
    res = ranks_result(
        [_rank(0, late, 32 * workers, workers), _rank(1, early, 32 * workers, workers)]
    )
    assert res.straggler is None and res.skew_s and res.skew_s > 0.005
    assert "a phase of the gradient all-reduce" in res.text()


def test_a_rank_whose_loader_is_slower_is_a_straggler():
    from loadeval_nb.core._shared import ranks_result

    rng = np.random.default_rng(3)
    slow = list(20 + rng.normal(0, 0.5, 300))
    fast = list(2 + rng.normal(0, 0.3, 300))
    res = ranks_result([_rank(0, fast, 32, 2), _rank(1, slow, 64, 2)])
    assert res.straggler == 1


# ---- 13: numbers out of range --------------------------------------------------------------------


@pytest.mark.parametrize("command", ["diagnose", "compare"])
def test_a_400_digit_step_time_is_refused_in_one_sentence(tmp_path, command):
    doc = Run(mode="log", start_ns=[0, 10, 20], step_ns=[10, 10, 10]).to_dict()
    doc["steps"]["step_ns"][1] = int("9" * 400)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", command, str(p), str(p)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stderr
    assert "numbers too large for a run" in out.stderr and "Traceback" not in out.stderr


# ---- degraded --------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--ladder", "--sweep 'num_workers=0,1'"])
def test_repeat_with_a_ladder_or_a_sweep_is_refused_not_ignored(flag):
    from IPython.core.error import UsageError

    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    with ipython_shell(train_loader=dl) as ip:
        with pytest.raises(UsageError, match="^--repeat does not apply to a"):
            ip.run_cell_magic(
                "loadeval",
                f"train_loader {flag} --repeat 3 --quiet",
                "for b in train_loader: pass\n",
            )


class _SlowItems(Dataset):
    def __len__(self) -> int:
        return 400

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.02)
        return torch.zeros(2)


def test_ctrl_c_while_waiting_in_next_is_a_stop_not_a_source_error(tmp_path):
    path = str(tmp_path / "r.json")
    ev = LoaderEvaluator(
        DataLoader(_SlowItems(), batch_size=4), metrics_file=path, sample_interval_s=None
    )
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    assert load_run(path).epochs[0]["status"] == "stopped"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_persistent_workers_loader_is_left_as_it_was():
    import psutil

    def children() -> set[int]:
        return {c.pid for c in psutil.Process().children() if c.is_running()}

    others = children()  # what other tests may still be reaping
    dl = DataLoader(
        TensorDataset(torch.zeros(40, 2)), batch_size=4, num_workers=2, persistent_workers=True
    )
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert dl._iterator is None and not children() - others  # none it did not have
    for _ in dl:  # the user's own workers, running
        pass
    mine = children() - others
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, sample_interval_s=None)
    ev.close()
    run = run_pair(
        dl, lambda e: [None for _ in e], RunSettings(steps=4, warmup=1, sample_interval_s=None)
    )
    assert run.ok
    assert children() - others == mine and len(mine) == 2  # not stopped, not replaced
    from loadeval_nb.core._shared import shutdown_persistent_workers

    shutdown_persistent_workers(dl)


def test_compare_says_when_a_real_run_meets_an_ideal_one_or_another_machine(tmp_path):
    from loadeval_nb import compare_runs

    step = [10_000_000] * 30
    real = Run(mode="log", start_ns=list(range(30)), step_ns=step, environment={"cpu_count": 2})
    ideal = Run(
        mode="replay", start_ns=list(range(30)), step_ns=step, environment={"cpu_count": 64}
    )
    text = compare_runs(real, ideal).text()
    assert "compares the real loader with the ideal one" in text
    assert "different machines or setups (cpu_count 2 → 64)" in text


@pytest.mark.parametrize(("value", "path"), [("0", "C"), ("", "C"), ("1", "Python")])
def test_pure_python_switch_reads_as_it_says(value, path):
    code = "from loadeval_nb.measure import step_path; print(step_path())"
    env = {**os.environ, "LOADEVAL_NB_PURE_PYTHON": value}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    from loadeval_nb.measure import step_path

    if step_path() == "Python" and path == "C":  # the extension is not built here
        pytest.skip("the C path is not built in this environment")
    assert got.stdout.strip() == path


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


def test_a_full_disk_is_said_once_not_at_every_epoch(tmp_path, caplog, monkeypatch):
    import loadeval_nb.core.record.run as run_module

    def full(*a: Any, **k: Any) -> Any:
        raise OSError(28, "No space left on device")

    ev = LoaderEvaluator(
        list(range(5)), metrics_file=str(tmp_path / "r.json"), sample_interval_s=None
    )
    monkeypatch.setattr(run_module, "save_run", full)
    monkeypatch.setattr(run_module.Run, "save", lambda self, p: full())
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for _ in range(20):
            for _ in ev:
                pass
        ev.close()
    said = [r for r in caplog.records if "could not write" in r.getMessage()]
    assert len(said) == 1 and ev.to_run().n_steps == 100


def test_accelerate_is_told_its_loader_ended():
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    dl = acc.prepare(DataLoader(TensorDataset(torch.zeros(64, 2)), batch_size=4))
    ev = LoaderEvaluator(dl, steps=3, sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert acc.gradient_state.in_dataloader is False
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, steps=3, sample_interval_s=None)
    ev.close()
    assert acc.gradient_state.in_dataloader is False
