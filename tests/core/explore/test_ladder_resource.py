"""The caching ladder names the resource behind its largest stage: the reading of the
workers of that stage's rung (else the real rung's), as one of its facts."""

from __future__ import annotations

import os
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loadeval_nb.core.explore import RunSettings, run_ladder
from loadeval_nb.core.explore.ladder import LadderResult, Rung, compare_rungs
from loadeval_nb.core.measure.resource import WorkerResource
from loadeval_nb.core.record.run import Run
from tests.timing import retry_once


def reading(kind: str, on: float) -> dict:
    return WorkerResource(kind=kind, workers=2, worker_s=4.0, on_cpu=on, runq=0.02).to_dict()


def run(step_s: float, resource: dict | None = None) -> Run:
    # two blocks (epochs) of 30 steps, a little noise so that the interval is not empty
    steps = [round((step_s + (k % 3) * 1e-4) * 1e9) for k in range(60)]
    starts = [sum(steps[:k]) for k in range(60)]
    return Run(
        mode="log",
        start_ns=starts,
        step_ns=steps,
        block=[k // 30 for k in range(60)],
        warmup=2,
        worker_resource=resource,
    )


def ladder(real: Run, samples: Run) -> LadderResult:
    res = LadderResult(
        label="",
        loader_settings={},
        rungs=[
            Rung("device", skipped="no CUDA device"),
            Rung("host", run(0.010)),
            Rung("samples", samples),
            Rung("real", real),
        ],
    )
    compare_rungs(res)
    return res


def test_the_largest_stages_rung_names_its_resource():
    res = ladder(run(0.030, reading("cpu", 0.9)), run(0.011, reading("idle", 0.05)))
    assert res.largest is not None and res.largest.name == "real"
    name, r = res.resource()
    assert name == "real" and r.kind == "cpu"
    fact = next(f for f in res.facts().facts if f.key == "resource")
    assert fact.label == "the real rung's workers"
    assert fact.text == r.text()  # the reading's numbers and words
    assert "the workers are CPU-bound" in res.text()


def test_workers_and_collation_name_the_sample_rungs_workers():
    res = ladder(run(0.031, reading("cpu", 0.9)), run(0.030, reading("waiting", 0.05)))
    assert res.largest is not None and res.largest.name == "samples"
    assert res.resource()[0] == "samples"
    assert "the samples rung's workers" in res.text()


def test_no_workers_no_fact():
    res = ladder(run(0.030), run(0.011))
    assert res.resource() is None
    assert all(f.key != "resource" for f in res.facts().facts)


def test_a_stage_that_is_not_the_workers_names_the_real_rungs():
    res = ladder(run(0.0101, reading("idle", 0.05)), run(0.0100, reading("cpu", 0.9)))
    assert res.largest is None
    name, r = res.resource()
    assert name == "real" and r.kind == "idle"


class Burning(Dataset):
    def __len__(self) -> int:
        return 400

    def __getitem__(self, i: int) -> torch.Tensor:
        end = time.thread_time() + 0.015
        while time.thread_time() < end:
            pass
        return torch.zeros(3)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="reads Linux's /proc")
@retry_once
def test_a_real_ladder_says_its_cpu_burning_workers_are_cpu_bound():
    loader = DataLoader(Burning(), batch_size=2, num_workers=2)
    res = run_ladder(
        loader,
        lambda ev: [None for _ in ev],
        RunSettings(steps=30, warmup=4, num_cached_batches=4),
        rungs=("host", "real"),
    )
    assert res.ok, res.error
    name, r = res.resource()
    assert name == "real"
    assert r.kind in ("cpu", "threads"), r.text()  # the loop itself is light
    fact = next(f for f in res.facts().facts if f.key == "resource")
    assert "on CPU" in fact.text and "worker" in fact.text
