"""The interleaved pass's text summary says what the real side's workers spent their time
on (``Workers:``), in the words a real run's summary uses, where that was read; nothing
where it was not (a loader without workers, or the utilisation sampler off)."""

from __future__ import annotations

import io

from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator
from loadeval_nb.core.measure.resource import resource_text
from tests.workloads import SleepyItems, take


def _summary(num_workers: int, sample_interval_s) -> tuple[str, LoaderEvaluator]:
    loader = DataLoader(SleepyItems(400, 0.004), batch_size=2, num_workers=num_workers)
    ev = LoaderEvaluator(
        loader,
        mode="pair",
        steps=40,
        warmup=2,
        num_cached_batches=4,
        sample_interval_s=sample_interval_s,
    )
    for _ in ev:
        take(0.002)
    ev.close()
    out = io.StringIO()
    ev.print_summary(file=out)
    return out.getvalue(), ev


def test_the_pass_summary_names_the_real_side_s_workers_resource():
    text, ev = _summary(num_workers=2, sample_interval_s=0.02)
    said = resource_text(ev.to_run("real").worker_resource)
    assert said, "no reading of the workers"
    assert f"\n  Workers: {said}\n" in text, text
    assert text.count("Workers:") == 1, text  # the real side's, once


def test_no_workers_line_without_workers_or_without_a_reading():
    for num_workers, interval in ((0, 0.02), (2, None)):
        text, ev = _summary(num_workers=num_workers, sample_interval_s=interval)
        assert ev.to_run("real").worker_resource is None
        assert "  real: " in text and "Workers:" not in text, text
