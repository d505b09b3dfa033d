"""The verdict names the resource of the real run's workers: a reading (the resource
rule's, on ticks whose numbers are known) reaches the Diagnosis, its facts, its text and
its dict (the card: tests/viz/test_resource_card.py), and the advice follows it where the
pair is input-bound; a run without workers, or an older log without the reading, names
nothing."""

from __future__ import annotations

import json
import random

import pytest

from loadeval_nb import Run, diagnose
from loadeval_nb.core.measure.resource import KINDS, REMEDIES, WorkerResource, worker_resource
from loadeval_nb.core.record.runlog import load_run
from loadeval_nb.core.verdict import INPUT_BOUND, NOT_INPUT_BOUND, Diagnosis
from tests.core.measure.test_resource import busy, util

MS = 1_000_000


def reading(u: dict, load: list[int] | None = None) -> dict:
    """The run log's ``worker_resource`` of the ticks ``u``, by the resource rule."""
    r = worker_resource(u, num_workers=2, worker_load_ns=load, cpu_count=2)
    assert r is not None
    return r.to_dict()


READINGS = {
    "cpu": lambda: reading(util(on=0.92, runq=0.03), busy(0.97)),
    "threads": lambda: reading(util(on=0.5, runq=0.45, main_pct=150.0), busy(0.97)),
    "storage": lambda: reading(util(on=0.1, d=12, read_bytes=80 << 20), busy(0.95)),
    "waiting": lambda: reading(util(on=0.03, runq=0.01), busy(0.99)),
    "idle": lambda: reading(util(on=0.04, runq=0.01), busy(0.05)),
}


def steps(mean_ms: float, n: int = 120, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [mean_ms * (1 + rng.uniform(-0.03, 0.03)) for _ in range(n)]


def pair(
    real_ms: float, wait_ms: float, resource: dict | None, workers: int = 2
) -> tuple[Run, Run]:
    """A real run of ``real_ms`` steps that wait ``wait_ms`` for data, with the reading
    ``resource``, and an ideal run of ``real_ms - wait_ms`` steps."""

    def run(step_ms: list[float], wait: list[float] | None, mode: str, **kw) -> Run:
        ns = [round(s * MS) for s in step_ms]
        return Run(
            mode=mode,
            start_ns=[sum(ns[:k]) for k in range(len(ns))],
            step_ns=ns,
            wait_ns=None if wait is None else [round(w * MS) for w in wait],
            samples=[8] * len(ns),
            **kw,
        )

    real = run(
        steps(real_ms),
        steps(wait_ms, seed=2) if wait_ms else [0.0] * 120,
        "log",
        loader_settings={"num_workers": workers, "len": 500},
        worker_resource=resource,
    )
    return real, run(steps(real_ms - wait_ms, seed=3), None, "replay")


def advice_of(d: Diagnosis) -> str:
    return next(f.text for f in d.facts().facts if f.key == "advice")


@pytest.mark.parametrize("kind", sorted(READINGS))
def test_the_verdict_names_the_workers_resource_with_its_numbers(kind):
    resource = READINGS[kind]()
    assert resource["kind"] == kind  # the rule names what the ticks were built to say
    d = diagnose(*pair(30.0, 20.0, resource))
    assert d.verdict == INPUT_BOUND
    assert d.worker_resource == WorkerResource.from_dict(resource) and d.resource == kind
    fact = next(f for f in d.facts().facts if f.key == "resource")
    assert fact.label == "the real run's workers"
    # the ladder's words, its numbers, and what the machine did not expose (delay accounting)
    assert fact.text == WorkerResource.from_dict(resource).text()
    assert KINDS[kind] in fact.text and "2 workers: " in fact.text
    assert "I/O wait not exposed: delay accounting off" in fact.text
    assert f"the real run's workers: {fact.text}" in d.text()
    # serialised where the Diagnosis is: as the run log keeps it
    doc = json.loads(json.dumps(d.to_dict()))
    assert doc["worker_resource"] == resource


def test_the_advice_follows_the_resource_when_the_loop_waits():
    advice = {k: advice_of(diagnose(*pair(30.0, 20.0, make()))) for k, make in READINGS.items()}
    none = advice_of(diagnose(*pair(30.0, 20.0, None)))
    assert "The loop waits for data" in none and "add DataLoader workers" in none
    # CPU-bound: more workers, then cheaper per-sample work, as without a reading
    assert "the workers are CPU-bound: 92% of their time on a CPU" in advice["cpu"]
    assert "Add DataLoader workers" in advice["cpu"] and "per-sample work" in advice["cpu"]
    # storage: faster storage or caching the files, not cheaper transforms
    assert (
        "the workers wait on storage: an estimated 50% of their time blocked on I/O"
        in (advice["storage"])
    )
    assert REMEDIES["storage"] in advice["storage"]
    assert "Cheaper transforms will not help" in advice["storage"]
    assert "add DataLoader workers" not in advice["storage"]
    # fighting the intra-op threads: fewer workers or threads, never more workers
    assert "More workers would make it worse" in advice["threads"]
    assert "torch.set_num_threads" in advice["threads"] and "num_threads=1,2" in advice["threads"]
    assert "add DataLoader workers" not in advice["threads"]
    # waiting on neither: more workers overlap the waits
    assert REMEDIES["waiting"] in advice["waiting"]
    # idle with a full queue: the workers are not the limit
    assert "The workers are not the limit" in advice["idle"]
    assert "add DataLoader workers" not in advice["idle"].lower()


def test_cpu_bound_behind_other_processes_asks_for_the_cores_not_more_workers():
    behind = reading(util(on=0.5, runq=0.45, main_pct=8.0, other_pct=110.0), busy(0.97))
    d = diagnose(*pair(30.0, 20.0, behind))
    assert d.resource == "cpu" and d.worker_resource.contended()
    advice = advice_of(d)
    assert "wait for a CPU behind other processes (110% CPU)" in advice
    assert "More workers will not help while other processes hold the cores" in advice


@pytest.mark.parametrize("kind", sorted(READINGS))
def test_not_input_bound_the_resource_is_information_not_advice(kind):
    d = diagnose(*pair(20.0, 0.0, READINGS[kind]()))
    bare = diagnose(*pair(20.0, 0.0, None))
    assert d.verdict == NOT_INPUT_BOUND and d.resource == kind
    assert any(f.key == "resource" for f in d.facts().facts)
    assert advice_of(d) == advice_of(bare)
    assert advice_of(d).startswith("The loader is not what holds training back")


def test_the_split_advice_names_the_loaders_remedy_by_its_resource():
    real, ideal = pair(30.0, 20.0, READINGS["storage"]())
    d = diagnose(real, ideal)
    # a split that is all waiting (as the contended arm gives it, set by hand here)
    d.waiting_s, d.contention_s = 0.020, 0.0
    d.waiting_ci, d.contention_ci = (0.018, 0.022), (-0.001, 0.001)
    assert d.headroom_split == "waiting"
    assert "loader (faster storage, reading ahead, caching the files) buys it" in advice_of(d)


def test_no_workers_name_nothing():
    d = diagnose(*pair(30.0, 20.0, None, workers=0))
    assert d.worker_resource is None and d.resource is None
    assert all(f.key != "resource" for f in d.facts().facts)
    assert "the real run's workers" not in d.text()
    assert d.to_dict()["worker_resource"] is None


def test_an_unknown_reading_is_said_but_gives_no_advice():
    short = reading(util(ticks=2, on=0.9))  # 0.4 worker-seconds: too short
    d = diagnose(*pair(30.0, 20.0, short))
    assert d.worker_resource is not None and d.resource is None
    assert "too little of the workers' time was read" in d.text()
    assert advice_of(d) == advice_of(diagnose(*pair(30.0, 20.0, None)))


def test_an_old_run_log_without_the_reading_still_loads(tmp_path):
    real, ideal = pair(30.0, 20.0, READINGS["cpu"]())
    paths = {}
    for name, run in (("real", real), ("ideal", ideal)):
        doc = run.to_dict()
        doc.pop("worker_resource", None)  # written before the field
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    assert load_run(paths["real"]).worker_resource is None
    d = diagnose(str(paths["real"]), str(paths["ideal"]))
    assert d.verdict == INPUT_BOUND and d.worker_resource is None
    assert all(f.key != "resource" for f in d.facts().facts)
    # a reading this version cannot read is left out, never an error
    real.worker_resource = {"kind": "cpu"}  # no shares: a log's broken field
    assert diagnose(real, ideal).worker_resource is None
