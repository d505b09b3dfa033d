"""CUDA and NVML: device cache, pinned host cache, queued GPU work, real GPU readings.

Marked ``gpu``: skipped cleanly on machines without CUDA (CI has none).
"""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import LoaderEvaluator, diagnose
from loadeval_nb.errors import CacheBudgetError

pytestmark = pytest.mark.gpu


def loader(n=512, **kw):
    return DataLoader(
        TensorDataset(torch.randn(n, 3, 32, 32), torch.arange(n)), batch_size=32, **kw
    )


def test_device_cache_moves_batches_once():
    ev = LoaderEvaluator(loader(), mode="replay", num_cached_batches=4, cache_on="device")
    assert all(x.is_cuda and y.is_cuda for x, y in ev.cached_batches)
    seen = [x for x, _ in ev]
    assert all(x.is_cuda for x in seen) and seen[0] is ev.cached_batches[0][0]
    assert ev.to_run().settings["cache_on"] == "device"
    assert ev.cache_bytes == 4 * (32 * 3 * 32 * 32 * 4 + 32 * 8)


def test_device_cache_budget_is_checked():
    with pytest.raises(CacheBudgetError, match="raise cache_budget_bytes"):
        LoaderEvaluator(loader(), mode="replay", cache_on="device", cache_budget_bytes=1000)


def test_host_cache_keeps_pinned_memory_pinned():
    ev = LoaderEvaluator(loader(pin_memory=True), mode="replay", num_cached_batches=3)
    assert all(x.is_pinned() and y.is_pinned() for x, y in ev.cached_batches)


def test_queued_gpu_work_is_counted_without_per_step_sync():
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    src = [torch.zeros(1)] * 30
    ev = LoaderEvaluator(src, sample_interval_s=None)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in ev:
        for _ in range(4):
            a = torch.tanh(a @ a)  # queued, not waited for
    end.record()
    end.synchronize()
    gpu_ms = start.elapsed_time(end)
    run = ev.to_run()
    assert run.blocks[0]["sync_ns"] > 0
    assert sum(run.step_ns) / 1e6 >= 0.9 * gpu_ms


def test_nvml_reports_real_utilisation():
    a = torch.randn(8192, 8192, device="cuda")
    ev = LoaderEvaluator([0] * 40, sample_interval_s=0.05)
    for _ in ev:
        a = torch.tanh(a @ a)
        torch.cuda.synchronize()
        time.sleep(0.005)
    util = ev.to_run().util["gpu"]
    assert util["available"] and util["devices"][0]["name"]
    readings = [v for dev in util["util_pct"] for v in dev if v is not None]
    assert readings and max(readings) > 10
    assert all(v is not None for v in util["mem_used_bytes"][0])


def test_demo_on_cuda(tmp_path):
    from loadeval_nb.demo import run_demo

    d = run_demo(
        steps=20, warmup=3, device="cuda", out=str(tmp_path / "demo.html"), echo=lambda s: None
    )
    assert d.real_gpu_util_pct is not None and d.ideal_gpu_util_pct is not None
    assert (tmp_path / "demo.html").exists()


def test_pair_on_gpu_diagnoses():
    dev = torch.device("cuda")
    model = torch.nn.Conv2d(3, 64, 3).to(dev)
    dl = loader(n=32 * 40, pin_memory=True, num_workers=2)
    runs = []
    for mode in ("log", "replay"):
        ev = LoaderEvaluator(dl, mode=mode, num_cached_batches=5, warmup=3)
        for x, _ in ev:
            model(x.to(dev, non_blocking=True)).sum().backward()
        runs.append(ev)
    d = diagnose(*runs)
    assert d.real_step_s > 0 and d.ideal_step_s > 0 and d.real_gpu_util_pct is not None


# ---- the caching ladder's device rung ---------------------------------------------------------


def test_ladder_device_rung_isolates_the_host_to_device_copy():
    """Big pageable host batches (32 x 3 x 256 x 256 float32 = 25 MiB), a tiny GPU step: the
    copy dominates, so the host rung is clearly slower than the device rung."""
    from loadeval_nb.core.explore import RunSettings, run_ladder

    dl = DataLoader(
        TensorDataset(torch.randn(64 * 32, 3, 256, 256), torch.arange(64 * 32)), batch_size=32
    )
    w = torch.randn(3, device="cuda")

    def run_once(ev):
        for x, _ in ev:
            x = x.to("cuda", non_blocking=True)
            (x.mean(dim=(0, 2, 3)) * w).sum().item()

    res = run_ladder(
        dl, run_once, RunSettings(steps=30, warmup=3, num_cached_batches=4, sample_interval_s=0.05)
    )
    assert res.ok, res.error
    device, host = res.rung("device"), res.rung("host")
    assert device.skipped is None and device.run.settings["cache_on"] == "device"
    assert host.stats()["mean_s"] > 1.5 * device.stats()["mean_s"], res.text()
    stages = {s.name: s for s in res.stages}
    assert stages["host"].what == "host-to-device copy" and stages["host"].significant
    assert res.rung("device").run.util["gpu"]["available"]
    print(res.text())


def test_magic_ladder_on_cuda():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from loadeval_nb.magic import stop_all

    cfg = Config()
    cfg.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=cfg)
    ip.run_line_magic("load_ext", "loadeval_nb")
    ip.user_ns["dl"] = loader()
    try:
        ip.run_cell_magic(
            "loadeval",
            "dl --ladder --steps 12 --warmup 2 --cache 3 --quiet",
            "for x, y in dl:\n    x = x.cuda(non_blocking=True)\n    (x * 2).sum().item()\n",
        )
    finally:
        stop_all()
    res = ip.user_ns["_loadeval"]
    assert [r.name for r in res.rungs if r.run is not None] == ["device", "host", "samples", "real"]


def test_the_real_step_is_split_into_wait_copies_and_compute(monkeypatch):
    # host-to-device copies are timed with CUDA events and read once, at the epoch's end
    torch.zeros(1, device="cuda")  # CUDA in use before the epoch opens
    big = [torch.randn(64, 3, 224, 224).pin_memory() for _ in range(4)]
    syncs = []
    real_sync = torch.cuda.synchronize
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: (syncs.append(1), real_sync(*a)))
    ev = LoaderEvaluator(big * 10, sample_interval_s=None, warmup=2)
    w = torch.randn(224, 224, device="cuda")
    to_before = torch.Tensor.to
    for batch in ev:
        x = batch.to("cuda", non_blocking=True)
        for _ in range(3):
            x = x @ w
    assert torch.Tensor.to is to_before
    run = ev.to_run()
    # where the steady steps begin (the warm-up's queued work) and the epoch's closing one,
    # never one a step
    assert len(syncs) == 2
    assert run.h2d_ns is not None and all(v > 0 for v in run.h2d_ns)
    replay = LoaderEvaluator(big, mode="replay", steps=40, sample_interval_s=None)
    for batch in replay:
        x = batch.to("cuda", non_blocking=True)
        for _ in range(3):
            x = x @ w
    d = diagnose(run, replay.to_run())
    assert d.real_h2d_s > 0 and "host-to-device copies" in str(d)
