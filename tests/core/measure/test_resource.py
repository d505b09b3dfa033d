"""The resource rule on readings whose numbers are known (no workers, no sleeping): each
resource named from its shares, what the machine does not expose said, the reading
kept in the run log as an optional field, and the sampler's series cut with the ticks."""

from __future__ import annotations

import json
import re

import pytest

from loadeval_nb.core.measure.readers import PROC_KEYS, ProcReader
from loadeval_nb.core.measure.resource import WorkerResource, resource_text, worker_resource
from loadeval_nb.core.measure.sampler import ticks_within
from loadeval_nb.core.record.run import Run

S = 1_000_000_000  # one second in ns


def util(
    ticks: int = 10,
    *,
    on: float = 0.0,
    runq: float | None = 0.0,
    blkio: float | None = None,
    d: int = 0,
    read_bytes: int | None = 0,
    main_pct: float = 5.0,
    other_pct: float = 0.0,
    delayacct: bool = False,
    workers: int = 2,
) -> dict:
    """``ticks`` ticks of 0.1 s for ``workers`` workers, each share of their time as given,
    ``d`` of the workers' state samples in disk sleep (the rest sleeping)."""
    dt = S // 10

    def each(share: float | None) -> list:
        return [None if share is None else round(share * dt * workers)] * ticks

    os_ = {
        "alive_ns": [dt * workers] * ticks,
        "on_cpu_ns": each(on),
        "runq_ns": each(runq),
        "blkio_ns": each(blkio),
        "read_bytes": [None if read_bytes is None else read_bytes // ticks] * ticks,
        "rchar": [None if read_bytes is None else read_bytes // ticks] * ticks,
        "majflt": [0] * ticks,
        "minflt": [5] * ticks,
        "threads": [2] * ticks,
        "in_r": [0] * ticks,
        "in_d": [d // ticks] * ticks,
        "in_s": [workers - d // ticks] * ticks,
        "main_threads": [9] * ticks,
        "exposed": {
            "proc": True,
            "schedstat": runq is not None,
            "io": read_bytes is not None,
            "delayacct": delayacct,
        },
    }
    return {
        "interval_s": 0.1,
        "t_ns": [k * dt for k in range(1, ticks + 1)],
        "cpu": {
            "process_pct": [main_pct] * ticks,
            "workers_pct": [on * 100 * workers] * ticks,
            "workers": [workers] * ticks,
            "other_pct": [other_pct] * ticks,
        },
        "workers_os": os_,
    }


def busy(share: float, ticks: int = 10, workers: int = 2) -> list[int]:
    """Per-batch times inside the workers adding up to ``share`` of their time."""
    return [round(share * S / 10 * workers)] * ticks


def reading(u: dict, load: list[int] | None = None, **kw) -> WorkerResource:
    r = worker_resource(u, num_workers=2, worker_load_ns=load, cpu_count=2, **kw)
    assert r is not None
    return r


def test_cpu_bound():
    r = reading(util(on=0.92, runq=0.03), busy(0.97))
    assert r.kind == "cpu"
    assert r.on_cpu == pytest.approx(0.92) and r.runq == pytest.approx(0.03)
    # making batches 97% of the time, waiting for a CPU 3%: never idle
    assert r.idle == pytest.approx(0.0, abs=1e-9) and r.worker_s == pytest.approx(2.0)
    assert r.numbers().startswith("2 workers: 92% on CPU, 3% waiting for a CPU")
    assert "0 B read from storage" in r.numbers()
    assert r.text().split(" (I/O wait")[0].endswith("the workers are CPU-bound.")


def test_shares_never_add_up_to_more_than_the_workers_time():
    # a tick straddling two arms' blocks can charge more CPU and run-queue wait than the
    # run's own alive time (read once: 22 % on CPU and 89 % waiting for a CPU)
    r = reading(util(on=0.22, runq=0.89), busy(0.97))
    assert r.on_cpu + r.runq == pytest.approx(1.0)
    assert r.on_cpu == pytest.approx(0.22 / 1.11) and r.runq == pytest.approx(0.89 / 1.11)
    assert r.idle == pytest.approx(0.0, abs=1e-9) and r.waiting == pytest.approx(0.0, abs=1e-9)
    shown = [int(x) for x in re.findall(r"(\d+)% ", r.numbers())]
    assert sum(shown) <= 101, r.numbers()  # (each share rounded)
    # within the workers' time, nothing changes
    assert reading(util(on=0.5, runq=0.45), busy(0.97)).on_cpu == pytest.approx(0.5)


def test_cpu_bound_behind_other_processes_is_not_the_training_threads():
    r = reading(util(on=0.5, runq=0.45, main_pct=8.0, other_pct=110.0), busy(0.97))
    assert r.kind == "cpu" and r.contended()
    assert "wait for a CPU behind other processes (110% CPU)" in r.headline()


def test_fighting_the_training_threads():
    r = reading(util(on=0.5, runq=0.45, main_pct=150.0), busy(0.97))
    assert r.kind == "threads"
    assert "the training process used 150% CPU with 9 threads on 2 cores" in r.text()
    # a light wait for a CPU is no fight, whatever the training process uses
    assert reading(util(on=0.9, runq=0.05, main_pct=150.0), busy(0.97)).kind == "cpu"


def test_sleeping_workers_wait_not_on_storage():
    r = reading(util(on=0.03, runq=0.01), busy(0.99))
    assert r.kind == "waiting"
    assert r.waiting == pytest.approx(0.96)
    assert "neither on a CPU nor on storage" in r.text()


def test_storage_from_delay_accounting():
    r = reading(util(on=0.1, runq=0.02, blkio=0.8, delayacct=True, read_bytes=80 << 20))
    assert r.kind == "storage" and r.io_from == "delayacct"
    assert r.blocked_io == pytest.approx(0.8)
    assert "80.0 MiB read from storage" in r.text()
    assert "I/O wait not exposed" not in r.text()


def test_storage_estimated_from_disk_sleep_when_delay_accounting_is_off():
    # 10 ticks x 2 workers: 12 of the 20 state samples in disk sleep
    r = reading(util(on=0.1, d=12, read_bytes=80 << 20), busy(0.95))
    assert r.kind == "storage" and r.io_from == "d-state"
    assert r.blocked_io == pytest.approx(0.5)  # 1 of 2 workers at each tick (12 // 10)
    assert "blocked on I/O (est.)" in r.text()
    assert "I/O wait not exposed: delay accounting off" in r.text()


def test_storage_inferred_from_bytes_read_while_waiting():
    # no tick caught the workers in disk sleep, yet they read 40 MiB while waiting 1.8 s
    r = reading(util(on=0.1, read_bytes=40 << 20), busy(0.99))
    assert r.kind == "storage"
    # the same wait with nothing read from storage is a wait on something else
    assert reading(util(on=0.1, read_bytes=0), busy(0.99)).kind == "waiting"


def test_idle_with_a_full_queue():
    r = reading(util(on=0.04, runq=0.01), busy(0.05))
    assert r.kind == "idle" and r.idle == pytest.approx(0.94)  # 1 - 0.05 made - 0.01 run queue
    assert "sit idle with a full queue" in r.text()


def test_a_wait_for_a_cpu_outside_making_a_batch_is_not_idling():
    # sleeping workers on a machine whose other processes hold the cores (a reading taken
    # so): making batches 37% of the time, waiting for a CPU 54%, much of it after each
    # wake-up, before a batch is started: outside the timing, yet no idling
    r = reading(util(on=0.08, runq=0.54, other_pct=170.0), busy(0.37))
    assert r.idle == pytest.approx(0.09)
    assert r.kind == "waiting" and r.waiting == pytest.approx(0.29)
    # the same workers on a quiet machine, behind a slow loop: idle
    assert reading(util(on=0.08, runq=0.01), busy(0.10)).kind == "idle"


def test_idle_without_timing_inside_the_workers_reads_the_loop():
    u = util(on=0.04)
    kept_up = reading(u, None, wait_ns=[1] * 10, step_ns=[100] * 10)
    assert kept_up.kind == "idle" and kept_up.idle is None
    starved = reading(u, None, wait_ns=[90] * 10, step_ns=[100] * 10)
    assert starved.kind == "waiting" and starved.loop_wait_share == pytest.approx(0.9)


def test_what_the_machine_does_not_expose_is_said():
    r = reading(util(on=0.9, runq=None, read_bytes=None), busy(0.97))
    assert r.runq is None and r.read_bytes is None
    text = r.text()
    assert "run-queue wait not exposed" in text
    assert "bytes read not exposed" in text
    assert "I/O wait not exposed: delay accounting off (sysctl kernel.task_delayacct=1" in text
    assert "waiting for a CPU" not in r.numbers() and "read from storage" not in r.numbers()
    no_proc = util(on=0.9)
    no_proc["workers_os"]["exposed"]["proc"] = False
    assert "no /proc here" in reading(no_proc).text()


def test_no_reading_without_workers_or_time():
    assert worker_resource(util(on=0.9), num_workers=0) is None
    assert worker_resource(None, num_workers=2) is None
    assert worker_resource({"t_ns": []}, num_workers=2) is None
    short = reading(util(ticks=2, on=0.9))
    assert short.kind == "unknown" and "too little" in short.text()


def test_reading_round_trips_through_the_run_log(tmp_path):
    r = reading(util(on=0.92, runq=0.03), busy(0.97))
    run = Run(mode="log", start_ns=[0, 1], step_ns=[1, 1], worker_resource=r.to_dict())
    doc = json.loads(json.dumps(run.to_dict()))
    assert doc["schema_version"] == 4 and doc["worker_resource"]["kind"] == "cpu"
    back = Run.from_dict(doc)
    assert WorkerResource.from_dict(back.worker_resource) == r
    assert resource_text(back.worker_resource) == r.text()
    # a log written before the field, or a run without workers: no key, None on reading
    del doc["worker_resource"]
    assert Run.from_dict(doc).worker_resource is None
    assert "worker_resource" not in Run(mode="log", start_ns=[0], step_ns=[1]).to_dict()
    assert resource_text(None) is None
    # a newer log's extra keys are ignored
    assert WorkerResource.from_dict({**r.to_dict(), "later": 1}) == r


def test_ticks_within_cuts_the_workers_series():
    u = util(on=0.5)
    u["workers_os"]["on_cpu_ns"] = list(range(10))
    t = u["t_ns"]
    cut = ticks_within(u, [(t[2], t[4])], 0)
    assert cut["workers_os"]["on_cpu_ns"] == [2, 3, 4]
    assert cut["workers_os"]["exposed"] == u["workers_os"]["exposed"]


def test_proc_reader_primes_then_gives_deltas_and_forgets_gone_pids():
    ticks = iter(range(0, 10 * S, S // 10))
    reader = ProcReader(lambda: next(ticks))
    first = reader.read([999_999_999])  # no such process: nothing read, no error
    assert set(first) == set(PROC_KEYS) and first["alive_ns"] == 0
    import os

    me = os.getpid()
    reader.read([me])
    second = reader.read([me])
    assert second["alive_ns"] == S // 10
    assert second["threads"] >= 1 and second["in_r"] + second["in_s"] + second["in_d"] == 1
    reader.read([])
    assert reader._procs == {}  # its files closed
    reader.close()
