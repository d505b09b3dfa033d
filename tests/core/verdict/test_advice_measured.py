"""Advice from what was measured (issue 36): collation and hand-over only where the
workers were read to keep their queue full; no workers → workers; workers read to be off
the CPU are never told to be fewer; a loader whose epoch is the limit is never told to
run more steps."""

from __future__ import annotations

import random

from loadeval_nb import Run, diagnose
from loadeval_nb.core.verdict import NOT_ENOUGH_DATA, PARTLY_INPUT_BOUND
from loadeval_nb.core.verdict.diagnosis import advice
from tests.core.verdict.test_trust import run_of
from tests.core.verdict.test_verdict_resource import READINGS, advice_of


def steps(mean_ms: float, n: int = 200, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [mean_ms * (1 + rng.uniform(-0.01, 0.01)) for _ in range(n)]


def run(step_ms, wait_ms=None, mode="log", **kw) -> Run:
    return run_of(step_ms, mode, wait_ms=wait_ms, **kw)


def test_no_workers_and_little_waiting_is_told_workers_not_collation():
    # mnist: 0 workers, the per-item work in the loop's own thread; the loop "waits" little
    # apart from it: the advice was "a lighter collate_fn", now workers
    real = run(steps(11.5), [0.5] * 200, loader_settings={"num_workers": 0})
    d = diagnose(real, run(steps(10, seed=2), mode="replay"))
    assert d.verdict == PARTLY_INPUT_BOUND, d
    text = advice_of(d)
    assert text.startswith("With num_workers=0 every batch is loaded in the training loop")
    assert "collate_fn" not in text


def test_workers_read_off_the_cpu_are_never_told_to_be_fewer():
    # steps 30 % longer apart from waiting, while the workers sat idle with a full queue
    # (dcgan on a busy machine was told "Try fewer workers")
    for kind in ("idle", "waiting", "storage"):
        real = run(
            steps(13.0),
            [0.1] * 200,
            loader_settings={"num_workers": 2, "len": 500},
            worker_resource=READINGS[kind](),
        )
        d = diagnose(real, run(steps(10, seed=2), mode="replay"))
        text = advice_of(d)
        assert "try fewer workers" not in text.lower(), (kind, text)
        assert "they are not what takes it from the step" in text, (kind, text)


def test_the_hand_over_is_advised_where_the_workers_keep_their_queue_full():
    real = run(
        steps(11.5),
        [0.5] * 200,
        loader_settings={"num_workers": 2, "len": 500},
        worker_resource=READINGS["idle"](),
    )
    text = advice_of(diagnose(real, run(steps(10, seed=2), mode="replay")))
    assert "collate_fn" in text or "handing" in text.lower(), text


def test_a_loader_whose_epoch_is_the_limit_is_not_told_to_run_more_steps():
    # 30 batches an epoch, 200 steps asked: the reason never says "more steps" and the
    # advice names no steps to run (imagenet's headline did, beside "more steps cannot come
    # from one pass")
    rng = random.Random(4)
    real = run(
        [10 * max(0.1, rng.gauss(1.08, 0.4)) for _ in range(30)],
        settings={"steps": 200},
        loader_settings={"num_workers": 2, "len": 30},
    )
    ideal = run([10 * max(0.1, rng.gauss(1, 0.4)) for _ in range(30)], mode="replay")
    d = diagnose(real, ideal)
    assert d.verdict == NOT_ENOUGH_DATA, d
    assert "more steps" not in d.reason
    assert "more steps cannot come from one pass" in advice_of(d)
    assert not any(getattr(p, "setting", None) == "steps" for p in advice(d))
