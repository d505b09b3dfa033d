"""Advice from what was measured: it fits the loader it speaks of (issue 20, item 3)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from loadeval_nb import LoaderEvaluator, Run, diagnose
from loadeval_nb.core._shared import Action, said
from loadeval_nb.core.verdict.diagnosis import advice

MS = 1_000_000


def _runs(real_ms, wait_ms, ideal_ms, workers, n=60):
    rng = np.random.default_rng(0)
    step = [int((real_ms + rng.normal(0, 0.1)) * MS) for _ in range(n)]
    real = Run(
        mode="log",
        start_ns=[sum(step[:i]) for i in range(n)],
        step_ns=step,
        wait_ns=[int(wait_ms * MS)] * n,
        samples=[8] * n,
        loader_settings={"num_workers": workers},
    )
    istep = [int((ideal_ms + rng.normal(0, 0.1)) * MS) for _ in range(n)]
    ideal = Run(mode="replay", start_ns=[sum(istep[:i]) for i in range(n)], step_ns=istep)
    return real, ideal


def test_no_workers_advice_speaks_of_the_loading_in_the_training_process():
    d = diagnose(*_runs(30, 0.5, 10, workers=0))
    text = said(advice(d))
    assert "compete with training" not in text
    assert "with num_workers=0 the loading runs inside the training process" in text
    assert "2.9× as long as ideal ones" in text  # not "195% slower"
    note = next(n for n in d.notes if n.rule == "apart_from_waiting")
    assert "as long as ideal ones" in note  # the note's words too


def test_with_workers_the_contention_advice_stays():
    d = diagnose(*_runs(30, 0.5, 10, workers=2))
    assert "compete with training for CPU cores" in said(advice(d))


def test_when_no_worker_count_helps_but_the_cores_are_short_threads_come_first():
    d = diagnose(*_runs(30, 6, 10, workers=2))
    d = dataclasses.replace(d, prediction="no num_workers setting gets within 5 % of ...")
    pieces = advice(d)
    assert "the cores are short" in said(pieces) and Action("sweep", "num_threads=1,2") in pieces


def test_cached_batches_of_differing_shapes_are_said():
    src = [torch.zeros(4, n) for n in (5, 7, 9, 11)]
    real = LoaderEvaluator(src, sample_interval_s=None)
    for _ in range(5):
        for _ in real:
            pass
    ideal = LoaderEvaluator(
        src, mode="replay", num_cached_batches=2, steps=20, sample_interval_s=None
    )
    for _ in ideal:
        pass
    d = diagnose(real, ideal)
    # the cache rule's note, for the shapes: the cache holds the 2 batches asked
    settings = ideal.to_run().settings
    assert settings["cached_shapes_differ"] and settings["batches_cached"] == 2
    assert "cache" in d.noted
    same = LoaderEvaluator(
        [torch.zeros(4, 5)] * 4,
        mode="replay",
        num_cached_batches=2,
        steps=20,
        sample_interval_s=None,
    )
    for _ in same:
        pass
    assert not same.to_run().settings["cached_shapes_differ"]
    assert "cache" not in diagnose(real, same).noted


def test_one_worker_is_said_in_the_singular():
    from loadeval_nb.whatif import predict

    line = predict(0.008, 0.01, num_workers=0, cores=2, seed=1).line()
    assert "1 workers" not in line and "1 worker fits the 2 cores" in line, line


def test_computing_workers_are_never_advised_beyond_the_cores():
    from loadeval_nb.whatif import predict

    line = predict(0.08, 0.01, num_workers=0, cores=2, seed=1).line()  # loading computes
    advised = int(line.split("num_workers=")[1].split(":")[0].split(",")[0].split(" ")[0])
    assert advised <= 2, line


def test_a_variant_faster_than_the_ideal_is_no_advice():
    # the ideal loader is any setting's ceiling: a variant measured past it (a disturbed
    # pass) turned into "Set num_workers=4"; a variant within it stays the advice
    from loadeval_nb.core.verdict.diagnosis import Tried

    d = diagnose(*_runs(30, 15, 20, workers=1))
    lo, hi = d.speedup_ci
    past = Tried({"num_workers": 4}, speedup=hi * 1.5, speedup_ci=(hi * 1.3, hi * 1.7))
    text = said(advice(dataclasses.replace(d, tried=past)))
    assert "Set num_workers=4" not in text
    assert "faster than an ideal loader" in text
    within = Tried({"num_workers": 4}, speedup=d.speedup, speedup_ci=(1.2, hi))
    assert "Set num_workers=4" in said(advice(dataclasses.replace(d, tried=within)))


def test_try_advice_with_no_prediction_says_so():
    # on a busy machine the first pass could not tell (NOT ENOUGH DATA), so the simulator
    # made no prediction: "the simulator names no num_workers that would be faster" said
    # something that was never measured
    from loadeval_nb.core.explore.pair import nothing_advised

    d = diagnose(*_runs(30, 15, 20, workers=1))
    assert nothing_advised(d).rule == "nothing_advised"
    told = nothing_advised(dataclasses.replace(d, prediction="predicted: ..."))
    assert "names no num_workers" in told
    untold = nothing_advised(dataclasses.replace(d, prediction=None))
    assert "made no prediction" in untold and "names no num_workers" not in untold


def test_advice_never_asks_for_more_of_what_the_pass_measured_as_no_gain():
    # dcgan on JPEGs, 0 workers, --try num_workers=1: "num_workers=1 made no difference
    # that these steps can tell (1.14x). The loop waits for data 36% of the time: add
    # DataLoader workers."
    from loadeval_nb.core.verdict.diagnosis import Tried

    d = diagnose(*_runs(30, 12, 18, workers=0))
    assert "add DataLoader workers" in said(advice(d))  # without a variant: the advice
    unclear = Tried({"num_workers": 1}, speedup=1.14, speedup_ci=(0.9, 1.4))
    text = said(advice(dataclasses.replace(d, tried=unclear)))
    assert "add DataLoader workers" not in text, text
    assert "more workers are not the answer here: num_workers=1, measured in this pass" in text
    faster = Tried({"num_workers": 1}, speedup=1.5, speedup_ci=(1.3, 1.6))
    assert "Set num_workers=1" in said(advice(dataclasses.replace(d, tried=faster)))


def test_workers_measured_as_no_gain_are_not_advised_where_the_loop_hardly_waits():
    # 0 workers, steps far longer than ideal ones with little wait: without a variant the
    # advice is workers; after num_workers=1 measured no gain in the same pass it is not
    from loadeval_nb.core.verdict.diagnosis import Tried

    d = diagnose(*_runs(30, 0.5, 10, workers=0))
    assert "Try DataLoader workers" in said(advice(d))
    none = Tried({"num_workers": 1}, speedup=1.01, speedup_ci=(0.97, 1.05))
    text = said(advice(dataclasses.replace(d, tried=none)))
    assert "Try DataLoader workers" not in text and "add DataLoader workers" not in text
    assert "num_workers=1, measured in this pass, made them no faster" in text, text


def test_workers_that_wait_are_not_advised_more_of_them_after_more_bought_nothing():
    from loadeval_nb.core.measure.resource import WorkerResource
    from loadeval_nb.core.verdict.diagnosis import Tried

    d = diagnose(*_runs(30, 12, 18, workers=2))
    none = Tried({"num_workers": 4}, speedup=1.02, speedup_ci=(0.95, 1.08))
    for kind, left in (("waiting", "remove what they wait on"), ("storage", "faster storage")):
        r = WorkerResource(kind=kind, workers=2, worker_s=10.0, on_cpu=0.1, runq=0.0, idle=0.0)
        base = dataclasses.replace(d, worker_resource=r)
        assert "more workers" in said(advice(base)).lower()  # without a variant: the remedy
        text = said(advice(dataclasses.replace(base, tried=none)))
        assert "More workers did not shorten the wait (num_workers=4" in text, text
        assert left in text and "more workers, to overlap" not in text


def test_readings_a_few_points_apart_give_the_same_advice():
    # timm, two runs, the workers' readings within 2 points of each other across the
    # on-CPU / off-CPU line: "Try fewer workers" and "fewer workers would not buy it back"
    from loadeval_nb.core.measure.resource import WorkerResource

    d = diagnose(*_runs(30, 0.5, 10, workers=2))
    texts = set()
    for on, wait in ((0.45, 0.43), (0.43, 0.45), (0.40, 0.47), (0.47, 0.40)):
        kind = "cpu" if on >= wait else "waiting"
        r = WorkerResource(kind=kind, workers=2, worker_s=10.0, on_cpu=on, waiting=wait, idle=0.1)
        texts.add(said(advice(dataclasses.replace(d, worker_resource=r)), "cli"))
    assert len({t.split(": whether")[1] for t in texts}) == 1, texts
    text = texts.pop()
    assert "Try fewer workers" not in text and "would not buy it back" not in text
    assert "--try num_workers=1" in text, text
    # far apart, each its own advice
    cpu = WorkerResource(kind="cpu", workers=2, worker_s=10.0, on_cpu=0.8, waiting=0.1, idle=0.1)
    assert "Try fewer workers" in said(advice(dataclasses.replace(d, worker_resource=cpu)))
    off = WorkerResource(kind="waiting", workers=2, worker_s=10.0, on_cpu=0.1, waiting=0.8)
    text = said(advice(dataclasses.replace(d, worker_resource=off)))
    assert "would not buy it back" in text
