"""``python -m loadeval_nb run --prove-straggler`` inside the user's launcher: under the
real ``torchrun`` (2 CPU ranks over gloo), the pair and then the straggler proof in one
pass of the script's own loop; rank 0's report carries the proof, its file is beside
the run logs, and ``gather_logs`` reads it back. A slow rank is proven, equal ranks are
not named; what the option cannot do is one sentence."""

from __future__ import annotations

import sys

import pytest

from loadeval_nb.__main__ import main
from loadeval_nb.ranks import gather_logs
from tests.integrations.test_launchers import ALONE, LAUNCHED, _launch, _ranks
from tests.scripts.cli import fixture, fresh, leftovers
from tests.timing import retry_once

DDP = fixture("ddp_train.py")
QUICK = ["--steps", "60", "--warmup", "5", "--cache", "5"]
BATCHES = ["--batches", "400"]  # the pair's ~130 steps and the proof's ~170 in one epoch


def _torchrun(tmp_path, *script_args: str, ours: tuple[str, ...] = ()):
    tmp_path = fresh(tmp_path)
    logs = tmp_path / "logs"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "-m", "loadeval_nb", "run", *QUICK, "--prove-straggler", *ours, "--log-dir", str(logs),
        DDP, *script_args,
    ]  # fmt: skip
    return _launch(cmd, tmp_path), logs


def _check_job(p, logs):
    assert p.returncode == 0, p.stderr[-3000:]
    report = gather_logs(logs)
    assert report.proof is not None, p.stderr[-3000:]
    (proof_file,) = logs.glob("loadeval-*-proof.json")
    assert report.text("cli") in p.stdout and p.stdout.count("2 ranks:") == 1, p.stdout
    assert "run logs: " in p.stderr and str(proof_file) in p.stderr
    assert leftovers() == []
    return report, report.proof


@pytest.mark.slow
@retry_once  # two ranks on a shared machine, one sleeping loader: a busy one excuses a failure
def test_a_slow_rank_is_proven_under_torchrun(tmp_path):
    p, logs = _torchrun(tmp_path, *BATCHES, "--slow-rank", "1")
    report, proof = _check_job(p, logs)
    assert proof.suspect == 1 and proof.control == 0 and proof.proven, report.text()
    # rank 1's items sleep 4 ms each in its main process: 32 ms a batch of 8 is the gain
    assert 0.020 <= proof.gain_s <= 0.050, report.text()
    assert proof.gain_ci[0] > 0 and proof.excess_ci[0] > 0, report.text()
    for steps in proof.rank_step_s.values():  # every rank's step falls, not only rank 1's
        assert steps["free"] < steps["real"] - 0.015 and steps["control"] > steps["free"]
    assert report.headline().startswith(
        "rank 1 is a straggler, proven: with rank 1's loader free, every rank's step"
    )
    assert "rank 1 free  rank 0 free" in p.stdout


@pytest.mark.slow
@retry_once
def test_equal_ranks_are_not_named_under_torchrun(tmp_path):
    # both ranks load alike (1 ms an item: 8 ms a batch): the rank that waits most is put
    # to the proof and cleared
    p, logs = _torchrun(tmp_path, *BATCHES, "--base-item-ms", "1")
    report, proof = _check_job(p, logs)
    assert proof.suspect in (0, 1) and not proof.proven, report.text()
    assert report.straggler is None
    assert f"rank {proof.suspect} is not a straggler" in report.headline()


@pytest.mark.slow
def test_a_pass_too_short_for_both_is_one_sentence(tmp_path):
    p, _ = _torchrun(tmp_path, "--batches", "150", "--slow-rank", "1")
    assert p.returncode != 0
    assert (
        "loadeval_nb: Cannot measure the pair and prove a straggler in one pass: an epoch of "
        "the loader has 150 batches: the pair's"
    ) in p.stderr, p.stderr[-3000:]
    assert "pass fewer --steps or --cache." in p.stderr
    assert leftovers() == []


@pytest.mark.slow
def test_a_script_without_a_process_group_is_one_sentence(tmp_path):
    script = tmp_path / "alone.py"
    script.write_text(ALONE)
    logs = tmp_path / "logs"
    out = _ranks([*QUICK, "--prove-straggler", "--log-dir", str(logs), str(script)])
    for rc, _, err in out:
        assert rc == 1, err[-2000:]  # a refusal: 1, as the docs' table says (it was 3)
        assert "--prove-straggler needs the script's process group" in err, err[-2000:]


@pytest.mark.parametrize(
    "args,extra,said",
    [
        ([], {}, "--prove-straggler needs ranks: run the command under your launcher"),
        (["--nproc-per-node", "1"], {}, "--prove-straggler needs two ranks or more"),
        (["--nproc-per-node", "2", "--sequential"], {}, "leave out --sequential"),
        ([], {"RANK": "0", "WORLD_SIZE": "1"}, "needs two ranks or more to tell a straggler"),
    ],
)
def test_what_prove_straggler_refuses(monkeypatch, capsys, args, extra, said):
    for k in [k for k in __import__("os").environ if k.startswith(LAUNCHED)]:
        monkeypatch.delenv(k)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in extra.items():
        monkeypatch.setenv(k, v)
    assert main(["run", "--prove-straggler", *args, DDP]) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert len(err.strip().splitlines()) == 1, err
