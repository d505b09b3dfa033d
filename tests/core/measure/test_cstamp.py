"""The optional C per-step path (loadeval_nb/core/_cstamp.c): its parts, and the same
epochs as the pure-Python iterators it stands in for."""

from __future__ import annotations

import copy
import importlib
import pickle
import time

import pytest

from loadeval_nb import LoaderEvaluator
from loadeval_nb.core.measure import step_path

timing = importlib.import_module("loadeval_nb.core.measure.timing")
C = timing.C_PATH
pytestmark = pytest.mark.skipif(C is None, reason="the C extension is not built here")


def test_the_c_clock_is_perf_counter_ns():
    for _ in range(100):
        a, t, b = time.perf_counter_ns(), C.now(), time.perf_counter_ns()
        assert a <= t <= b
    assert step_path() == "C"


def test_stamps_read_like_a_list_of_ints():
    s = C.Stamps()
    assert len(s) == 0 and s[:] == [] and s.tolist() == []
    for v in (5, 7, 11):
        s.append(v)
    assert len(s) == 3 and s[0] == 5 and s[-1] == 11 and s[1:] == [7, 11] and s[::2] == [5, 11]
    assert list(s) == [5, 7, 11] and s.tolist() == [5, 7, 11]
    with pytest.raises(IndexError):
        s[3]
    with pytest.raises(TypeError, match="integers or slices"):
        s["a"]
    with pytest.raises(TypeError):
        s.append("x")
    assert repr(s) == "<Stamps: 3>"
    for copied in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert type(copied) is C.Stamps and copied.tolist() == [5, 7, 11]


def test_log_iter_stamps_around_each_next_and_ends_once():
    starts, ready, ended = C.Stamps(), C.Stamps(), []
    it = C.log_iter([1, 2, 3], starts, ready, lambda: ended.append(1), lambda b: b * 10)
    assert list(it) == [10, 2, 3]
    assert len(starts) == 4 and len(ready) == 3 and ended == [1]
    assert all(starts[i] <= ready[i] <= starts[i + 1] for i in range(3))
    assert list(it) == [] and len(starts) == 4 and ended == [1]  # exhausted for good


def test_log_iter_passes_a_source_error_on_without_a_ready_stamp():
    def source():
        yield 1
        raise ValueError("bad batch")

    starts, ready, ended = C.Stamps(), C.Stamps(), []
    it = C.log_iter(source(), starts, ready, lambda: ended.append(1))
    assert next(it) == 1
    with pytest.raises(ValueError, match="bad batch"):
        next(it)
    assert (len(starts), len(ready), ended) == (2, 1, [])


def test_replay_iter_holds_one_more_stamp_than_batches():
    starts = C.Stamps()
    assert list(C.replay_iter(["a", "b"], starts)) == ["a", "b"] and len(starts) == 3


def _epochs(pure: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    if pure:
        monkeypatch.setattr(timing, "C_PATH", None)
    out = []
    src = list(range(12))

    def failing():
        yield from range(3)
        raise RuntimeError("loader broke")

    for kwargs, loop in (
        ({}, lambda ev: list(ev)),
        ({}, lambda ev: next(x for x in ev if x == 4)),  # break after 5 batches
        ({"steps": 7}, lambda ev: list(ev)),
        ({"mode": "replay", "num_cached_batches": 3}, lambda ev: list(ev)),
        ({"mode": "replay", "num_cached_batches": 3}, lambda ev: next(x for x in ev if x == 2)),
    ):
        with LoaderEvaluator(src, sample_interval_s=None, **kwargs) as ev:
            loop(ev)
            loop(ev)
        run = ev.to_run()
        out.append((run.mode, [(e["status"], e["steps"]) for e in run.blocks], len(run.step_ns)))
    ev = LoaderEvaluator(failing(), steps=10, sample_interval_s=None)
    with pytest.raises(RuntimeError):
        list(ev)
    ev.close()
    out.append(("gen", [(e["status"], e["steps"]) for e in ev.to_run().blocks], 0))
    return out


def test_the_c_path_measures_the_same_epochs_as_the_python_one(monkeypatch):
    c = _epochs(False, monkeypatch)
    py = _epochs(True, monkeypatch)
    assert c == py
    assert c[0][1] == [("complete", 12), ("complete", 12)]
    assert c[1][1][0] == ("stopped", 5)
