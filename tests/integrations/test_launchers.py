"""``python -m loadeval_nb run`` inside the user's own launcher: under the real
``torchrun`` and ``accelerate launch`` (2 CPU ranks over gloo on 127.0.0.1), and started
once per rank with ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT``
set, as ``srun`` or a Kubernetes PyTorchJob start it. Each rank's child joins the job's
process group as the script would, every rank's logs carry one job id, rank 0 prints the
ranks' report, the other ranks say where their logs are, and each rank exits with the
script's own status."""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from loadeval_nb import LoadEvalError
from loadeval_nb.__main__ import main
from loadeval_nb.integrations._script.parent.launch import job_id, launcher_rank
from loadeval_nb.ranks import gather_logs
from tests.scripts.cli import env, fixture, fresh, leftovers
from tests.scripts.test_ranks import check_straggler
from tests.timing import retry_once

DDP = fixture("ddp_train.py")
QUICK = ["--steps", "60", "--warmup", "5", "--cache", "5"]
SCRIPT_ARGS = ["--batches", "80"]
LAUNCHED = ("TORCHELASTIC_", "SLURM_", "KUBERNETES_", "PET_")
"""What an outer launcher may have left in the test's own environment (the suite run
inside a SLURM job or a pod): taken out, so that each test sets its own."""


def _env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in env().items() if not k.startswith(LAUNCHED)}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        out.pop(k, None)
    return {**out, **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(cmd: list[str], tmp: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=240, env=_env(TMPDIR=str(tmp), **extra)
    )


def _one_job(logs: Path) -> str:
    """Every rank's logs name one job: its id."""
    names = sorted(p.name for p in logs.glob("loadeval-*.json"))
    assert len(names) == 4, names
    jobs = {n.rsplit("-", 2)[0] for n in names}  # loadeval-JOB-ddp_train
    assert len(jobs) == 1, names
    (job,) = jobs
    assert sorted(n.rsplit("-", 2)[1:] for n in names) == [
        [w, f"rank{r}.json"] for w in ("ideal", "real") for r in (0, 1)
    ]
    assert sorted(p.name for p in logs.glob("*.ended")) == [f"{job}-rank{r}.ended" for r in (0, 1)]
    return job


def _check_report(p: subprocess.CompletedProcess[str], logs: Path, slow: Optional[int]) -> None:
    assert p.returncode == 0, p.stderr[-3000:]
    report = gather_logs(logs)
    assert report.world_size == 2
    if slow is None:
        assert report.straggler is None, report.text()
    else:
        check_straggler(report, slow)
    assert report.text("cli") in p.stdout  # rank 0 printed the ranks' report, once
    assert p.stdout.count("2 ranks:") == 1, p.stdout
    line = f"loadeval_nb: rank 1 measured its pair; its run logs are in {logs}, and rank 0"
    assert line in p.stderr, p.stderr[-3000:]
    assert "rank 0 measured" not in p.stderr
    assert leftovers() == []


# ---- under the launchers --------------------------------------------------------------------


@pytest.mark.slow
@retry_once  # two ranks, one sleeping loader: a busy machine excuses a failure
@pytest.mark.parametrize("slow", [1, None], ids=["straggler", "equal"])
def test_under_torchrun(tmp_path, slow):
    tmp_path = fresh(tmp_path)
    logs = tmp_path / "logs"
    extra = ["--slow-rank", str(slow)] if slow is not None else []
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "-m", "loadeval_nb", "run", *QUICK, "--log-dir", str(logs), DDP, *SCRIPT_ARGS, *extra,
    ]  # fmt: skip
    p = _launch(cmd, tmp_path)
    _check_report(p, logs, slow)
    # the job id is torchrun's run id (a fresh uuid on one node): no clash with other jobs
    assert len(_one_job(logs).split("-")) > 5


@pytest.mark.slow
def test_under_torchrun_a_loader_too_short_to_interleave_is_one_sentence(tmp_path):
    """19 batches a rank with 2 workers: too few for blocks, and each rank runs the script
    once. Every rank says why in its own sentence (none is told it was 'stopped' with
    'no run log was kept' where its own answer was known), the exit is the ranks' 1, and
    nothing is left in TMPDIR: the job's folder held no run log (before: an unnamed
    loadeval-run-* was left)."""
    tmp_path = fresh(tmp_path)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "-m", "loadeval_nb", "run", *QUICK, DDP, "--batches", "19", "--workers", "2",
    ]  # fmt: skip
    p = _launch(cmd, tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    lines = [line for line in p.stderr.splitlines() if line.startswith("loadeval_nb: ")]
    said = [line for line in lines if "Cannot interleave" in line]
    assert said and all("--nproc-per-node instead of your launcher" in line for line in said)
    assert not any("no run log was kept" in line for line in lines), lines
    ours = [n for n in os.listdir(tmp_path) if n.startswith("loadeval")]  # (torchelastic_*
    assert ours == [], ours  # and torchinductor_* are torch's own)
    assert leftovers() == []


@pytest.mark.slow
@retry_once
@pytest.mark.parametrize("slow", [0, None], ids=["straggler", "equal"])
def test_under_accelerate_launch(tmp_path, slow):
    """``accelerate launch -m loadeval_nb run ...``: accelerate runs a module with ``-m``
    (its ``--module``); on two CPU processes it starts torchrun with run id ``none``, so
    the job id is torchrun's agent folder. With --log-dir (the straggler) the logs are
    read back; without it (equal ranks), the job's folder in TMPDIR is gone once rank 0
    has read it (before: a loadeval-run-* folder was left)."""
    pytest.importorskip("accelerate")
    tmp_path = fresh(tmp_path)
    extra = ["--slow-rank", str(slow)] if slow is not None else []
    logs = tmp_path / "logs"
    where = ["--log-dir", str(logs)] if slow is not None else []
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no",
        "--main_process_port", str(_free_port()),
        "-m", "loadeval_nb", "run", *QUICK, *where, DDP, *SCRIPT_ARGS, *extra,
    ]  # fmt: skip
    p = _launch(cmd, tmp_path, HF_HOME=str(tmp_path / "hf"))
    if slow is not None:
        _check_report(p, logs, slow)
        assert _one_job(logs).startswith("loadeval-none_")
        return
    assert p.returncode == 0, p.stderr[-3000:]
    assert glob.glob(str(tmp_path / "loadeval-run-*")) == []
    assert p.stdout.count("2 ranks:") == 1, p.stdout
    line = "loadeval_nb: rank 1 measured its pair; rank 0 prints the ranks' report (--log-dir"
    assert line in p.stderr, p.stderr[-3000:]
    assert leftovers() == []


# ---- started once per rank (srun, a PyTorchJob) ---------------------------------------------


def _ranks(
    args: list[str], ranks: tuple[int, ...] = (0, 1), **extra: str
) -> list[tuple[int, str, str]]:
    """``python -m loadeval_nb run ARGS`` once per rank, as srun starts the tasks of a job
    step: each with its RANK and the job's WORLD_SIZE, MASTER_ADDR and MASTER_PORT."""
    port = str(_free_port())
    procs = []
    for r in ranks:
        rank_env = _env(
            RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port, **extra,
        )  # fmt: skip
        cmd = [sys.executable, "-m", "loadeval_nb", "run", *args]
        procs.append(
            subprocess.Popen(
                cmd, env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


@pytest.mark.slow
@retry_once
def test_started_once_per_rank_like_srun(tmp_path):
    """Each rank's child hosts or joins the job's store at MASTER_PORT as the script
    would (rank 0 hosts it); the logs carry SLURM's job and step."""
    logs = fresh(tmp_path)
    (rc0, out0, err0), (rc1, out1, err1) = _ranks(
        [*QUICK, "--log-dir", str(logs), DDP, *SCRIPT_ARGS, "--slow-rank", "1"],
        SLURM_JOB_ID="4242",
        SLURM_STEP_ID="0",
    )
    assert (rc0, rc1) == (0, 0), (err0[-2000:], err1[-2000:])
    assert _one_job(logs) == "loadeval-4242.0-ddp_train"
    report = gather_logs(logs)
    check_straggler(report, 1)
    assert out0 == f"{report.text('cli')}\n" and out1 == ""
    assert err1.strip().splitlines()[-1] == (
        f"loadeval_nb: rank 1 measured its pair; its run logs are in {logs}, and rank 0 "
        "prints the ranks' report."
    )
    assert leftovers() == []


ALONE = """\
import os, sys, time
import torch
from torch.utils.data import DataLoader

code = int(os.environ.get("EXIT_RANK" + os.environ["RANK"], "0"))
if code:
    sys.exit(code)  # before any step: nothing measured on this rank
for x in DataLoader(torch.arange(400.0).view(-1, 1), batch_size=2):
    time.sleep(0.002)
"""
"""A script whose ranks never meet (no process group): a rank can end on its own."""


@pytest.mark.slow
def test_each_rank_exits_with_the_scripts_status(tmp_path):
    script = tmp_path / "alone.py"
    script.write_text(ALONE)
    logs = tmp_path / "logs"
    (rc0, _, err0), (rc1, _, err1) = _ranks(
        [*QUICK, "--log-dir", str(logs), str(script)], EXIT_RANK1="7"
    )
    assert rc1 == 7, err1[-2000:]  # the script's own sys.exit(7)
    assert "loadeval_nb: alone.py (rank 1) exited with code 7" in err1
    assert rc0 == 1, err0[-2000:]  # measured, but no report without rank 1's logs
    assert (
        err0.strip()
        .splitlines()[-1]
        .startswith(
            "loadeval_nb: No ranks' report, since rank 1 measured nothing: alone.py (rank 1) "
            "exited with code 7"
        )
    )
    # the job id without a launcher's own: MASTER_ADDR-MASTER_PORT
    assert glob.glob(str(logs / "loadeval-127.0.0.1-*-alone-real-rank0.json"))
    assert leftovers() == []


@pytest.mark.slow
def test_rank_0_names_the_ranks_that_never_came(tmp_path):
    script = tmp_path / "alone.py"
    script.write_text(ALONE)
    logs = tmp_path / "logs"
    ((rc0, out0, err0),) = _ranks(
        [*QUICK, "--timeout", "5", "--log-dir", str(logs), str(script)], ranks=(0,)
    )
    assert rc0 == 1 and out0 == ""
    assert err0.strip().splitlines()[-1] == (
        f"loadeval_nb: Rank 1 of 2 had not written its run logs to {logs} 5 s after rank 0 had "
        "written its own, so there is no ranks' report (ranks on other machines need a "
        f"--log-dir they share; python -m loadeval_nb ranks {logs} gathers the logs that are "
        "there)."
    )
    assert len(glob.glob(str(logs / "*-rank0.json"))) == 2  # rank 0's own are kept


# ---- what a rank of a launcher is, and what it refuses ---------------------------------------


def test_a_rank_of_a_launcher_is_told_from_our_own_ranks():
    assert launcher_rank({}) is None
    assert launcher_rank({"RANK": "1", "WORLD_SIZE": "2", "LOADEVAL_NB_CHILD": "{}"}) is None
    one = launcher_rank({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"})
    assert one is not None and (one.rank, one.world_size, one.own_folders) == (1, 2, False)
    for several in (
        {"LOCAL_WORLD_SIZE": "1"},
        {"GROUP_WORLD_SIZE": "2"},
        {"SLURM_NNODES": "2"},
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},  # a pod per rank
    ):
        r = launcher_rank({"RANK": "0", "WORLD_SIZE": "2", **several})
        assert r is not None and r.own_folders, several
    with pytest.raises(LoadEvalError, match="RANK='2' and WORLD_SIZE='2' name no rank"):
        launcher_rank({"RANK": "2", "WORLD_SIZE": "2"})


def test_the_job_id_is_the_launchers_own():
    master = {"MASTER_ADDR": "node0", "MASTER_PORT": "29500", "WORLD_SIZE": "4"}
    agent = "/tmp/torchelastic_x/none_k2j3/attempt_0/1/error.json"
    assert job_id({**master, "TORCHELASTIC_RUN_ID": "job42"}) == "job42"
    assert job_id({**master, "SLURM_JOB_ID": "99", "SLURM_STEP_ID": "3"}) == "99.3"
    assert job_id({**master, "SLURM_JOB_ID": "99"}) == "99"
    one_node = {**master, "LOCAL_WORLD_SIZE": "4", "TORCHELASTIC_ERROR_FILE": agent}
    assert job_id({**one_node, "TORCHELASTIC_RUN_ID": "none"}) == "none_k2j3"
    several = {**one_node, "LOCAL_WORLD_SIZE": "2"}  # each node's agent has its own folder
    assert job_id({**several, "TORCHELASTIC_RUN_ID": "none"}) == "node0-29500"
    assert job_id({"MASTER_ADDR": "a b/c", "MASTER_PORT": "1"}) == "a_b_c-1"
    assert job_id({}) == "job"


@pytest.mark.parametrize(
    "args,extra,said",
    [
        (["--nproc-per-node", "2"], {}, "leave out --nproc-per-node and --nnodes"),
        (["--sequential"], {}, "leave out --sequential"),
        (["--steps", "auto"], {}, "--steps='auto' stops each rank on its own"),
        ([], {"SLURM_NNODES": "2"}, "pass --log-dir a folder every rank can write to"),
    ],
)
def test_what_a_rank_of_a_launcher_refuses(monkeypatch, capsys, args, extra, said):
    for k in [k for k in os.environ if k.startswith(LAUNCHED)]:
        monkeypatch.delenv(k)
    for k, v in {"RANK": "1", "WORLD_SIZE": "2", **extra}.items():
        monkeypatch.setenv(k, v)
    assert main(["run", *args, DDP]) == 2
    err = capsys.readouterr().err
    assert said in err, err
    if "--steps" not in args:
        assert "This is rank 1 of the 2 your launcher started" in err


def test_bad_rank_variables_are_one_sentence(monkeypatch, capsys):
    monkeypatch.setenv("RANK", "x")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["run", DDP]) == 2
    assert "RANK='x' and WORLD_SIZE='2' name no rank of a job" in capsys.readouterr().err


WAITS = """\
import os, sys, time
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

if os.environ["RANK"] == "1":
    sys.exit(0)  # this rank's script has no DataLoader: nothing to measure, said at once
dist.init_process_group("gloo")  # rank 0 waits here for a rank that never comes
for x in DataLoader(torch.arange(400.0).view(-1, 1), batch_size=2):
    time.sleep(0.002)
"""


@pytest.mark.slow
def test_a_rank_that_measured_nothing_stops_the_others_waiting(tmp_path):
    # rank 0 waited its whole --timeout for rank 1, which had said at once that its
    # script iterated no DataLoader: it stops within a second or two of that now
    script = tmp_path / "waits.py"
    script.write_text(WAITS)
    logs = tmp_path / "logs"
    (rc0, _, err0), (rc1, _, err1) = _ranks(
        [*QUICK, "--timeout", "200", "--log-dir", str(logs), str(script)]
    )
    assert rc1 == 1 and "waits.py (rank 1) ended without iterating a DataLoader" in err1
    assert rc0 == 1, err0[-2000:]
    last = err0.strip().splitlines()[-1]
    assert last.startswith(
        "loadeval_nb: No ranks' report, since rank 1 measured nothing: waits.py (rank 1) "
        "ended without iterating a DataLoader"
    ), last
    assert last.endswith("; this rank stopped its own run then, during the interleaved runs.")
    assert leftovers() == []
