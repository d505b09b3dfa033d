"""What stops ``python -m loadeval_nb run`` from outside: SIGTERM, SIGHUP and SIGINT (a
scheduler's kill, a closed terminal, Ctrl-C) stop every process of the script, keep the
logs written to --log-dir, print one sentence and exit 128+n; a parent killed with
SIGKILL takes its child along (the child's guard), which keeps the temporary log folder
only for logs it names; a hung script is stopped by its child at --timeout when the
parent cannot act. Each run has a TMPDIR of its own, left as a run that ends normally
leaves it."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest

from loadeval_nb import load_run
from loadeval_nb.integrations._script.parent.launch import Signalled, run_side, stop_on_signals

from .cli import env, fixture, fresh

HANGS = fixture("hangs.py")
PLAIN = fixture("plain_loop.py")
QUICK = ["--steps", "40", "--warmup", "5", "--cache", "5"]
SEQUENTIAL = [*QUICK, "--sequential"]  # a child per side: the script hangs in the real run
LATE = ["--hang-at", "30"]
"""Both sides interleaved, the script hanging once blocks of both are measured: the real
run's log is written by then."""
TOKEN = "LOADEVAL_NB_TEST_SIGNALS"
"""Each run's processes carry a token of their own (cli.MARK is the session's): an orphan
of this run is found, and only this run's are stopped after a failed test."""
NORMAL = ("torchinductor_", "torchelastic_")
"""What a run that ends normally leaves in TMPDIR too: torch's compile cache, torchrun's
own log folder (the run logs' lock folder goes with the last lock)."""


def left_in(tmpdir: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmpdir) if not n.startswith(NORMAL))


def ours(token: str, but: int = -1) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if (
                p.pid != but
                and p.status() != psutil.STATUS_ZOMBIE
                and p.environ().get(TOKEN) == token
            ):
                out.append(p)
    return out


@contextlib.contextmanager
def hanging(tmp_path: Path, *args: str, script: Sequence[str] = (), ranks: int = 1):
    """``run`` started on HANGS with a TMPDIR of its own, once the script hangs (on every
    rank): ``(parent, token, tmpdir)``. Whatever is left of it is stopped on the way out."""
    folder = fresh(tmp_path)
    tmpdir, marker = folder / "tmp", folder / "marker"
    tmpdir.mkdir()
    token = uuid.uuid4().hex
    cmd = [sys.executable, "-m", "loadeval_nb", "run", *args]
    cmd += [HANGS, "--workers", "1", "--marker", str(marker), *script]
    parent = subprocess.Popen(
        cmd,
        env={**env(), "TMPDIR": str(tmpdir), TOKEN: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text().count("hanging") == ranks):
            if parent.poll() is not None:
                pytest.fail(f"the run ended before the script hung: {parent.communicate()[1]}")
            assert time.monotonic() < deadline, "the script never hung"
            time.sleep(0.1)
        yield parent, token, tmpdir
    finally:
        with contextlib.suppress(OSError):
            os.kill(parent.pid, signal.SIGCONT)
        if parent.poll() is None:
            parent.kill()
        for p in ours(token):  # an orphan holds the parent's pipes open: first
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            parent.communicate(timeout=30)


def gone_within(token: str, seconds: float, but: int = -1) -> list[psutil.Process]:
    """This run's processes (``but`` one) still running after ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := ours(token, but)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.parametrize(
    ("sig", "keep"),
    [
        (signal.SIGTERM, False),
        (signal.SIGHUP, True),
        (signal.SIGINT, False),
    ],
    ids=["SIGTERM", "SIGHUP-log-dir", "SIGINT"],
)
def test_a_stop_signal_stops_every_process_and_leaves_nothing(tmp_path, sig, keep):
    logs = tmp_path / f"logs-{sig}"
    logs.mkdir()
    args = [*QUICK, "--log-dir", str(logs)] if keep else SEQUENTIAL
    with hanging(tmp_path, *args, script=LATE if keep else ()) as (parent, token, tmp):
        parent.send_signal(sig)
        code = parent.wait(timeout=30)
        assert ours(token) == []  # the child and its DataLoader worker: stopped, waited for
        _, err = parent.communicate(timeout=30)
        assert code == 128 + sig, err[-3000:]
        assert left_in(tmp) == []  # the run's folders and the killed worker's pymp-* socket
    lines = err.splitlines()
    said = f"loadeval_nb: stopped ({'Ctrl-C' if sig == signal.SIGINT else sig.name}); "
    said += "the script's processes were stopped"
    assert [line for line in lines if line.startswith("loadeval_nb: stopped")] == [lines[-1]]
    assert "Traceback" not in err
    if not keep:
        assert lines[-1] == (
            f"{said} and no run log was kept (pass --log-dir DIR to keep the logs a stopped "
            "run has written)."
        )
        return
    written = glob.glob(str(logs / "loadeval-*.json"))
    assert written  # the real run's blocks so far
    for path in written:  # kept, and they read
        load_run(path)
    if len(written) == 1:
        assert lines[-1] == f"{said}; the run log written so far is in {logs}."
    else:
        assert lines[-1] == f"{said}; the {len(written)} run logs written so far are in {logs}."


def test_a_parent_killed_with_sigkill_takes_its_child_along(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    with hanging(tmp_path, *QUICK, "--log-dir", str(logs), script=LATE) as (parent, token, tmp):
        parent.kill()  # no handler runs: only the child can notice
        parent.wait(timeout=30)
        assert gone_within(token, 20) == []
        _, err = parent.communicate(timeout=30)
        # the child removed the status folder and its worker's socket; the logs are the
        # user's, in --log-dir
        assert left_in(tmp) == []
    assert glob.glob(f"{logs}/loadeval-*-real.json")
    assert err.splitlines()[-1] == (
        f"loadeval_nb: the process that started hangs.py (pid {parent.pid}) is gone, so "
        f"hangs.py was stopped with every process it started; the run logs written so far "
        f"are in {logs}."
    )


@pytest.mark.parametrize(
    "script",
    [
        pytest.param((), id="before-any-log"),
        pytest.param(LATE, id="after-logs"),
    ],
)
def test_a_parent_killed_with_sigkill_leaves_in_tmpdir_only_the_folder_it_names(tmp_path, script):
    # without --log-dir the run logs go to a temporary folder the parent made: once the
    # parent is gone the child keeps it only for logs it has written, and names it
    with hanging(tmp_path, *QUICK, script=script) as (parent, token, tmp):
        parent.kill()
        parent.wait(timeout=30)
        assert gone_within(token, 20) == []
        _, err = parent.communicate(timeout=30)
        left = left_in(tmp)
    said = (
        f"loadeval_nb: the process that started hangs.py (pid {parent.pid}) is gone, so "
        "hangs.py was stopped with every process it started"
    )
    if not script:  # hung at step 8, before a block of either side was logged
        assert left == [], err[-3000:]
        assert err.splitlines()[-1] == f"{said}; no run log had been written yet."
        return
    (folder,) = left
    assert folder.startswith("loadeval-run-")
    assert err.splitlines()[-1] == f"{said}; the run logs written so far are in {tmp / folder}."
    written = glob.glob(str(tmp / folder / "loadeval-*-real.json"))
    assert written
    for path in written:
        load_run(path)


@pytest.mark.parametrize("fails", [False, True], ids=["measured", "failed-in-the-pass"])
def test_a_run_that_ends_leaves_in_tmpdir_only_the_folder_its_sentence_names(tmp_path, fails):
    tmp = fresh(tmp_path) / "tmp"
    tmp.mkdir()
    cmd = [sys.executable, "-m", "loadeval_nb", "run", *QUICK, PLAIN, "--step-ms", "1"]
    cmd += ["--fail-at", "20"] if fails else []
    p = subprocess.run(
        cmd, env={**env(), "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=300
    )
    if not fails:
        assert p.returncode == 0, p.stderr[-3000:]
        assert left_in(tmp) == []
        return
    assert p.returncode == 1, p.stderr[-3000:]
    (folder,) = left_in(tmp)  # the failure's partial logs, named
    last = p.stderr.splitlines()[-1]
    assert f"; the partial run logs: {tmp / folder}{os.sep}loadeval-" in last, last


@pytest.mark.slow
def test_a_hung_script_is_stopped_by_its_child_when_the_parent_cannot_act(tmp_path):
    with hanging(tmp_path, *SEQUENTIAL, "--timeout", "12") as (parent, token, tmp):
        parent.send_signal(signal.SIGSTOP)  # alive, and stopped: its own time limit waits
        left = gone_within(token, 40, but=parent.pid)
        parent.send_signal(signal.SIGCONT)
        assert left == []
        code = parent.wait(timeout=30)
        _, err = parent.communicate(timeout=30)
        assert code == 1, err[-3000:]
        assert left_in(tmp) == []
    # the parent reads the child's end as a time-out and says what the child said
    lines = err.splitlines()
    assert lines[-1].startswith(
        "loadeval_nb: hangs.py did not get through the steps of the real run within 12 s"
    )
    assert lines.count(lines[-1]) == 2, err[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_under_torchrun_every_rank_and_the_launcher_stop(tmp_path, sig):
    with hanging(tmp_path, *SEQUENTIAL, "--nproc-per-node", "2", ranks=2) as (parent, token, tmp):
        parent.send_signal(sig)
        parent.wait(timeout=30)
        assert gone_within(token, 20) == []
        _, err = parent.communicate(timeout=30)
        if sig == signal.SIGKILL:  # one sentence for the node's ranks; hung before a log
            # was written, so the temporary log folder was removed with the rest
            assert err.count(" is gone, so hangs.py was stopped") == 1, err[-3000:]
            assert err.splitlines()[-1].endswith("; no run log had been written yet.")
            assert left_in(tmp) == []
            return
        assert parent.returncode == 128 + sig
        assert left_in(tmp) == []
    assert err.splitlines()[-1].startswith("loadeval_nb: stopped (SIGTERM); ")


def test_a_recorded_signal_stops_before_the_next_side_starts():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, not fatal
        time.sleep(0.01)
        assert stop.signum == signal.SIGTERM and stop.exit_code == 143
        with pytest.raises(Signalled):
            run_side(["nonexistent-command"], {}, timeout_s=None, measured=lambda: False)
    assert signal.getsignal(signal.SIGTERM) == before  # put back


def test_a_killed_commands_status_folder_is_swept(tmp_path):
    # a rank's command killed with SIGKILL left an empty loadeval-status-* in TMPDIR; the
    # next run removes those whose command is gone, and leaves a live one's
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmpdir / f"loadeval-status-{dead.pid}-x1").mkdir()
    (tmpdir / f"loadeval-status-{os.getpid()}-x2").mkdir()  # alive: this test's process
    p = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "run", *QUICK, PLAIN],
        env={**env(), "TMPDIR": str(tmpdir)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert left_in(tmpdir) == [f"loadeval-status-{os.getpid()}-x2"], left_in(tmpdir)


FAKE_LAUNCHER = """
import os, signal, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(%s)" % s],
                         env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2"})
        for r, s in enumerate(sys.argv[1:])]
while all(k.poll() is None for k in kids):
    time.sleep(0.1)  # torchrun's --monitor-interval
for k in kids:
    if k.poll() is None:
        k.send_signal(signal.SIGKILL)  # stopped before it could say anything
        k.wait()
sys.exit(1)
"""


@pytest.mark.parametrize(("sleeps", "first"), [(("30", "0.5"), "1"), (("0.5", "30"), "0")])
def test_the_rank_that_ended_first_is_recorded_where_the_launcher_stops_the_rest(sleeps, first):
    # under torch's launcher a rank that ends by os._exit is followed, 0.1 s later, by the
    # launcher's SIGTERM to the others, which may end before they write a word: the order
    # in which the ranks ended is the only evidence left of which one ended first
    ended = run_side(
        [sys.executable, "-c", FAKE_LAUNCHER, *sleeps],
        dict(os.environ),
        timeout_s=60,
        measured=lambda: False,
        ranks=True,
    )
    assert ended.returncode == 1
    assert ended.first_gone == first
    # without ranks nothing is looked for
    plain = run_side(
        [sys.executable, "-c", FAKE_LAUNCHER, "0.2", "30"],
        dict(os.environ),
        timeout_s=60,
        measured=lambda: False,
    )
    assert plain.first_gone is None
