"""Many ranks: 2 CPU ranks over gloo on 127.0.0.1 under the real torchrun, one node or two.

The script (``ddp_script.py``) trains a DDP model for a pair on every rank and gathers
the ranks' results with ``all_gather_object``; rank 0 writes ``report.json``.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ..timing import retry_once

SCRIPT = str(Path(__file__).with_name("ddp_script.py"))
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _standalone(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [*TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, str(out)]
    return subprocess.run(cmd, env=_env(**env), capture_output=True, text=True, timeout=180)


TEARDOWN_ABORT = "terminate called without an active exception"


def _ran_through(p: subprocess.CompletedProcess[str], out: Path) -> None:
    """The job ran to its end: exit 0, or torch's gloo teardown aborted the ranks as their
    interpreters exited (``std::terminate`` in a thread of the process group's: once in
    four fresh-machine runs, both ranks at once) after every rank had written both of its
    run logs whole — what the test checks was measured; anything else fails."""
    if p.returncode == 0:
        return
    logs = glob.glob(str(out / "*-real-rank[01].json")) + glob.glob(
        str(out / "*-ideal-rank[01].json")
    )
    assert TEARDOWN_ABORT in p.stderr and len(logs) == 4, p.stderr[-3000:]
    for path in logs:
        assert json.loads(Path(path).read_text())["status"] == "complete", path


@retry_once  # two ranks, sleeping loaders: a busy machine excuses a failure
def test_a_slow_rank_is_named_the_straggler(tmp_path):
    # rank 1 makes each batch in its own process: 8 items x 4 ms = 32 ms; the step is 10 ms
    tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # each attempt its own folder: a retry
    p = _standalone(tmp_path, SLOW_RANK="1")  # counted the first attempt's logs too
    _ran_through(p, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["world_size"] == 2 and report["straggler"] == 1 and report["slowest"] == 1
    lo, hi = report["skew_ci"]
    assert 0.025 <= lo <= report["skew_s"] <= hi <= 0.045, report  # ~32 ms more wait a step
    # DDP keeps the ranks in step: both steps are as long as the slow rank's
    r0, r1 = report["real_step_s"]["0"], report["real_step_s"]["1"]
    assert abs(r0 - r1) < 0.1 * r1 and 0.040 <= r1 <= 0.060, report
    assert report["real_wait_s"]["0"] < 0.005 < 0.028 < report["real_wait_s"]["1"]
    assert "rank 1 is a straggler" in p.stdout
    # every rank wrote its own run logs
    for which in ("real", "ideal"):
        assert len(glob.glob(str(tmp_path / f"*-{which}-rank[01].json"))) == 2


@retry_once
def test_no_straggler_when_ranks_load_alike(tmp_path):
    p = _standalone(tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["straggler"] is None, report


@pytest.mark.parametrize("workers", ["1,2", "2,0"])
def test_ranks_whose_loaders_differ_hold_one_plan(tmp_path, workers):
    """Before, each rank planned its blocks from its own queue depth, ran another number of
    steps, and rank 0 waited in gather_pair while rank 1 was in DDP's all-reduce, for
    ever (the subprocess timeout is the hang check)."""
    p = _standalone(tmp_path, WORKERS=workers)
    _ran_through(p, tmp_path)
    plans = [
        json.loads(Path(path).read_text())["settings"]["interleaved"]
        for path in sorted(glob.glob(str(tmp_path / "*-real-rank[01].json")))
    ]
    assert len(plans) == 2 and plans[0] == plans[1] and plans[0]["ranks"] == 2, plans


def test_a_failing_rank_stops_every_rank(tmp_path):
    p = _standalone(tmp_path, FAIL_RANK="1")  # the timeout is the hang check
    assert p.returncode != 0
    assert "rank 1 failed on purpose" in p.stderr
    assert "loadeval_nb: rank 1 stops: its real run failed (RuntimeError" in p.stderr
    assert not (tmp_path / "report.json").exists()


@retry_once
def test_two_nodes_each_with_its_own_agent(tmp_path):
    port = _free_port()
    cmd = [
        *TORCHRUN,
        "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-nodes",
        SCRIPT, str(tmp_path),
    ]  # fmt: skip
    agents = [
        subprocess.Popen(
            cmd, env=_env(SLOW_RANK="0"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    try:
        outs = [a.communicate(timeout=180) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    assert [a.returncode for a in agents] == [0, 0], [e.decode()[-2000:] for _, e in outs]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["world_size"] == 2 and report["straggler"] == 0, report
