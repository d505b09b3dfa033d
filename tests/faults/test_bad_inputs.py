"""Issue 12, item 10: each bad input gets one sentence, never a bare exception."""

from __future__ import annotations

import json
import os

import pytest
import torch
from IPython.core.error import UsageError
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import (
    LoaderEvaluator,
    LoadEvalError,
    Run,
    RunSettings,
    diagnose,
    load_run,
    run_pair,
)
from loadeval_nb.__main__ import main
from loadeval_nb.errors import RunLogError
from loadeval_nb.verdict import NOT_ENOUGH_DATA

from ..ipython_shell import ipython_shell

MS = 1_000_000


def run_of(ms, mode="log", n=20, **kw):
    step = [int(ms * MS)] * n
    return Run(mode=mode, start_ns=[i * step[0] for i in range(n)], step_ns=step, **kw)


def test_zero_duration_steps_get_a_verdict_not_an_assertion():
    d = diagnose(run_of(0), run_of(0, "replay"))
    assert d.verdict == NOT_ENOUGH_DATA and "no measurable time" in d.reason


def test_swapped_logs_are_refused():
    with pytest.raises(LoadEvalError, match="they look swapped; pass the log-mode run as real"):
        diagnose(run_of(10, "replay"), run_of(20, "log"))


def test_runs_from_different_machines_say_so():
    a = run_of(20, environment={"platform": "Linux-a", "cpu_count": 2})
    b = run_of(10, "replay", environment={"platform": "Linux-b", "cpu_count": 16})
    assert any(
        "different machines or setups (platform, cpu_count differ)" in n
        for n in diagnose(a, b).notes
    )


# ---- hostile run logs ------------------------------------------------------------------------


def test_deeply_nested_json(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RunLogError, match="nested too deeply to be a run log"):
        load_run(p)


def test_a_byte_order_mark_is_read(tmp_path):
    p = run_of(10).save(tmp_path / "r.json")
    raw = open(p, "rb").read()
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + raw)
    assert load_run(tmp_path / "bom.json").n_steps == 20


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    with pytest.raises(RunLogError, match="is not a regular file"):
        load_run(p)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda d: d["steps"].__setitem__("step_ns", [-1] * 20), "negative step or wait times"),
        (lambda d: d.__setitem__("mode", "turbo"), "its mode is 'turbo'"),
        (lambda d: d["steps"].__setitem__("complete", ["false"] * 20), '"false" is not'),
    ],
    ids=["negative", "mode", "complete-string"],
)
def test_out_of_range_fields(tmp_path, change, reason):
    doc = run_of(10).to_dict()
    change(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(RunLogError, match=f"is a damaged run log \\(.*{reason}"):
        load_run(p)


# ---- constructor arguments -------------------------------------------------------------------


@pytest.mark.parametrize("interval", [float("inf"), 1e-9, True, "0.1"])
def test_sample_intervals_that_would_crash_or_spin(interval):
    with pytest.raises(
        LoadEvalError, match="sample_interval_s must be a number of seconds from 0.01 to 3600"
    ):
        LoaderEvaluator([1, 2], sample_interval_s=interval)


def test_a_label_that_is_not_a_string():
    with pytest.raises(LoadEvalError, match="label must be a string such as 'real', not an int"):
        LoaderEvaluator([1, 2], label=3)


def test_a_huge_max_steps_on_a_source_without_len_starts_at_once():
    class NoLen:
        def __iter__(self):
            return iter(range(10))

    ev = LoaderEvaluator(
        NoLen(), mode="replay", num_cached_batches=3, steps=10**12, sample_interval_s=None
    )
    it = iter(ev)  # no trillion-entry list before the first step
    assert [next(it) for _ in range(5)] == [0, 1, 2, 0, 1]
    del it
    assert ev.to_run().n_steps == 5


# ---- loaders with nothing to give --------------------------------------------------------------


def test_a_used_up_generator_gets_the_right_advice():
    gen = (torch.zeros(2) for _ in range(3))
    list(gen)
    res = run_pair(gen, lambda ev: None, RunSettings(steps=6, warmup=1, only="ideal"))
    assert isinstance(res.error, LoadEvalError)
    assert "is an iterator that is used up (it yields nothing now)" in str(res.error)


def test_an_empty_loader_in_the_magic_is_not_blamed_on_the_cell():
    empty = DataLoader(TensorDataset(torch.zeros(0, 3)), batch_size=4)
    with ipython_shell(train_loader=empty) as ip:
        with pytest.raises(UsageError, match="^train_loader produced no batches"):
            ip.run_cell_magic(
                "loadeval", "train_loader --only real --steps 6 --warmup 1 --quiet",
                "for b in train_loader:\n    pass\n",
            )  # fmt: skip
        with pytest.raises(UsageError, match="DataLoader produced no batches"):
            ip.run_cell_magic(
                "loadeval",
                "train_loader --steps 6 --warmup 1 --quiet",
                "for b in train_loader:\n    pass\n",
            )


# ---- the command line --------------------------------------------------------------------------


def test_cli_bad_device_and_unwritable_output(tmp_path, capsys):
    assert main(["demo", "--device", "toaster", "--out", ""]) == 2
    assert "--device 'toaster' is not a device; use cpu, cuda or cuda:N." in capsys.readouterr().err
    real, ideal = (
        run_of(20).save(tmp_path / "r.json"),
        run_of(10, "replay").save(tmp_path / "i.json"),
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", real, ideal, "-o", str(blocker / "report.html")]) == 2
    assert "cannot write" in capsys.readouterr().err
