"""``python -m loadeval_nb run --nproc-per-node`` on a DDP script: each side launched by
torch's own launcher (2 CPU ranks over gloo), every rank's logs gathered from the files
by the parent, a slow rank named the straggler; and two local agents (``--nnodes 2``, a
c10d rendezvous on 127.0.0.1) writing to one folder, gathered by ``loadeval_nb ranks``."""

from __future__ import annotations

import glob
import socket
import subprocess
import sys

import pytest

from loadeval_nb.ranks import gather_logs
from tests.timing import retry_once

from .cli import env, fixture, fresh, leftovers, loadeval

pytestmark = pytest.mark.slow
DDP = fixture("ddp_train.py")
# a fresh child per side (the real run, then the ideal run): what these tests check;
# the default, both sides interleaved in one child, is test_run.py's own test
QUICK = ["--steps", "40", "--warmup", "5", "--cache", "5", "--sequential"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_straggler(report, slow: int) -> None:
    # the slow rank's items take 4 ms each in its main process: 32 ms more a batch
    assert report.world_size == 2 and report.straggler == slow and report.slowest == slow
    lo, hi = report.skew_ci
    assert 0.025 <= lo <= report.skew_s <= hi <= 0.045, report
    assert f"rank {slow} is a straggler" in report.text()


@retry_once
def test_two_ranks_one_slow(tmp_path):
    tmp_path = fresh(tmp_path)
    logs, html = tmp_path / "logs", tmp_path / "ranks.html"
    p = loadeval("run", *QUICK, "--nproc-per-node", "2", "--log-dir", str(logs), "-o", str(html),
                 DDP, "--slow-rank", "1")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    report = gather_logs(logs)
    check_straggler(report, 1)
    assert p.stdout == f"{report.text('cli')}\n{html}\n"  # the parent printed the ranks' report
    for which in ("real", "ideal"):
        assert len(glob.glob(str(logs / f"*-{which}-rank[01].json"))) == 2
    assert leftovers() == []


@pytest.mark.parametrize("how", ["exit", "_exit", "_exit_alone"])
def test_a_rank_that_ends_without_an_exception_is_named(how):
    # rank 1 ends at its fourth step with sys.exit(3), or os._exit(3) (no word to us):
    # rank 0's all-reduce then fails ("Connection closed by peer"), a consequence; the
    # sentence named rank 0 and its gloo error
    p = loadeval("run", *QUICK, "--nproc-per-node", "2", DDP, "--fail-rank", "1",
                 "--fail-how", how)  # fmt: skip
    assert p.returncode == 1
    last = p.stderr.splitlines()[-1]
    if how == "exit":
        assert last == (
            "loadeval_nb: ddp_train.py (rank 1) exited with code 3 after step 4 of the pass "
            "being measured (the real run)."
        )
    elif how == "_exit_alone":  # rank 0 sleeps, out of any collective, until torch's
        # launcher stops it (0.1 s after rank 1 ended): it never says a word
        assert last == (
            "loadeval_nb: ddp_train.py (rank 1) ended its process without an exception "
            "(os._exit, a crash or a signal) during the real run, before it reported its "
            "steps; the launcher then stopped the other ranks; the output is above."
        ), last
    else:
        # rank 0 says it lost its peer, or torch's launcher stopped it before it could
        # (0.1 s after rank 1 ended): rank 1 is named either way
        assert last.startswith(
            "loadeval_nb: ddp_train.py (rank 1) ended its process without an exception "
            "(os._exit, a crash or a signal) during the real run, before it reported its "
            "steps; "
        ), last
        assert "; rank 0 then lost its peer (" in last or last.endswith(
            "; the launcher then stopped the other ranks; the output is above."
        ), last
    assert leftovers() == []


def test_the_rank_that_failed_first_is_named(tmp_path):
    p = loadeval("run", *QUICK, "--nproc-per-node", "2", DDP, "--fail-rank", "1")
    assert p.returncode == 1
    assert p.stderr.splitlines()[-1] == (
        "loadeval_nb: ddp_train.py (rank 1) failed after step 4 of the pass being measured "
        "(the real run) (RuntimeError: rank 1 failed on purpose); its traceback is above."
    )  # not rank 0, whose all-reduce failed after rank 1 had gone
    assert leftovers() == []


@retry_once
def test_two_local_agents(tmp_path):
    tmp_path = fresh(tmp_path)
    port = _free_port()
    cmd = [
        sys.executable, "-m", "loadeval_nb", "run", *QUICK,
        "--nproc-per-node", "1", "--nnodes", "2",
        "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-agents",
        "--log-dir", str(tmp_path), DDP, "--slow-rank", "0",
    ]  # fmt: skip
    agents = [
        subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    try:
        outs = [a.communicate(timeout=240) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    assert [a.returncode for a in agents] == [0, 0], [e.decode()[-2000:] for _, e in outs]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"loadeval-two-agents-ddp_train-{w}-rank{r}.json" for w in ("ideal", "real") for r in (0, 1)
    ]
    p = loadeval("ranks", str(tmp_path))
    assert p.returncode == 0, p.stderr
    report = gather_logs(tmp_path)
    check_straggler(report, 0)
    assert p.stdout == f"{report.text('cli')}\n"
    assert leftovers() == []


@pytest.mark.parametrize(
    "partial", [{"RANK": "0"}, {"RANK": "3"}, {"LOCAL_RANK": "0"}, {"WORLD_SIZE": "1"}]
)
def test_a_partial_launcher_environment_is_one_process(tmp_path, partial):
    # RANK without WORLD_SIZE (some schedulers and containers export it), LOCAL_RANK or
    # WORLD_SIZE alone: no job around the process, so it is measured as one (before: the
    # child named its logs -rank0 and the parent ended on KeyError: 'real')
    logs = tmp_path / "logs"
    p = loadeval("run", "--steps", "40", "--warmup", "5", "--cache", "5", "--log-dir",
                 str(logs), fixture("plain_loop.py"), extra_env=partial)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: "), p.stdout
    names = [x.name for x in logs.glob("*.json")]
    assert len(names) == 2 and not [n for n in names if "rank" in n], names


@retry_once
def test_a_variant_under_ranks_is_reported_for_every_rank_and_the_slowest(tmp_path):
    # every rank measured the variant's blocks and wrote its log; the report had no
    # variant and said it "was not measured: ... this loader's epoch is too short for them"
    tmp_path = fresh(tmp_path)
    logs = tmp_path / "logs"
    p = loadeval("run", "--steps", "60", "--warmup", "2", "--cache", "3", "--nproc-per-node",
                 "2", "--try", "num_workers=2", "--log-dir", str(logs), DDP, "--batches", "200",
                 "--base-item-ms", "1")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "was not measured" not in p.stderr
    report = gather_logs(logs)
    assert report.tried_words() == "num_workers=2"
    for d in report.diagnoses.values():
        assert d.tried is not None and d.tried.speedup is not None
    facts = report.facts()
    assert "with num_workers=2" in facts.columns
    assert [f.key for f in facts.facts].count("tried") == 1
    assert p.stdout.startswith(report.text("cli"))
    assert leftovers() == []


@retry_once
def test_a_short_loader_under_ranks_falls_back_without_a_failed_launch(tmp_path):
    # 30 batches a rank: too short for blocks. The ranks exited 3, torch's launcher printed
    # its ChildFailedError traceback, and the script ran three times (the first launch
    # thrown away); now the first launch measures every rank's real side alone and one more
    # launch the ideal side
    tmp_path = fresh(tmp_path)
    logs = tmp_path / "logs"
    p = loadeval("run", "--warmup", "5", "--cache", "5", "--nproc-per-node", "2", "--log-dir",
                 str(logs), DDP, "--batches", "30")  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ChildFailedError" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    launches = [line for line in p.stderr.splitlines() if line.endswith(" ...")]
    assert [line.split(" (")[0] for line in launches] == [
        "loadeval_nb: the real and the ideal run, interleaved ...",
        "loadeval_nb: the ideal run",
    ], launches
    assert "ran twice" in p.stderr
    report = gather_logs(logs)
    assert report.world_size == 2 and len(report.diagnoses) == 2
    assert leftovers() == []
