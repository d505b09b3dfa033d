"""``python -m loadeval_nb run`` on a GPU: a script that trains on CUDA, its batches
cached on the device for the ideal run, and one nccl rank under ``--nproc-per-node 1``.

Marked ``gpu``: skipped cleanly on machines without CUDA (CI has none)."""

from __future__ import annotations

import pytest

from loadeval_nb import diagnose
from loadeval_nb.ranks import gather_logs
from loadeval_nb.verdict import INPUT_BOUND
from tests.timing import excused_if_busy, retry_once

from .cli import fixture, fresh, leftovers, loadeval, runs

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
QUICK = ["--steps", "40", "--warmup", "5", "--cache", "5"]


@retry_once
def test_a_cuda_script_with_its_batches_cached_on_the_device(tmp_path):
    tmp_path = fresh(tmp_path)
    p = loadeval(
        "run", *QUICK, "--cache-on", "device", "--log-dir", str(tmp_path),
        fixture("plain_loop.py"), "--device", "cuda",
        "--item-ms", "5", "--step-ms", "10", "--workers", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    real, ideal = runs(tmp_path)
    assert ideal.settings["cache_on"] == "device" and real.environment["cuda_available"]
    d = diagnose(real, ideal)
    print(d)
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 0.0175 <= d.real_step_s <= 0.026, d
        assert 0.0095 <= d.ideal_step_s <= 0.0125, d
    assert leftovers() == []


@retry_once
def test_one_nccl_rank(tmp_path):
    tmp_path = fresh(tmp_path)
    p = loadeval(
        "run", *QUICK, "--nproc-per-node", "1", "--log-dir", str(tmp_path),
        fixture("ddp_train.py"), "--device", "cuda", "--slow-rank", "0",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    report = gather_logs(tmp_path)
    print(report)
    assert report.world_size == 1 and p.stdout == f"{report.text('cli')}\n"
    d = report.diagnosis()
    with excused_if_busy(d):  # 8 items x 4 ms in the main process: 32 ms a batch, a 10 ms step
        assert d.verdict == INPUT_BOUND, d
        assert 0.040 <= d.real_step_s <= 0.055, d
    assert leftovers() == []
