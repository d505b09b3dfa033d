"""``python -m loadeval_nb run`` on real scripts: sleep-based ground truths (the script's
own stopwatch on the same steps, retried once, excused when the run is disturbed), the
validation loader left alone, the child stopped cleanly, and failures in one sentence."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from loadeval_nb import diagnose
from loadeval_nb.verdict import INPUT_BOUND, NOT_INPUT_BOUND
from tests.timing import excused_if_busy, retry_once

from .cli import env, fixture, fresh, leftovers, loadeval, runs

pytestmark = pytest.mark.slow
PLAIN = fixture("plain_loop.py")
# a fresh child per side (the real run, then the ideal run): what these tests check;
# the default, both sides interleaved in one child, is test_run.py's own test
QUICK = ["--steps", "40", "--warmup", "5", "--cache", "5", "--sequential"]


def stopwatch_mean_s(path, warmup):
    """Mean step of each run the script timed itself (batch to batch), warm-up left out."""
    out = []
    for line in path.read_text().splitlines():
        stamps = json.loads(line)
        steps = [b - a for a, b in zip(stamps, stamps[1:])][warmup:]
        out.append(sum(steps) / len(steps))
    return out


@retry_once
def test_an_input_bound_plain_loop(tmp_path):
    tmp_path = fresh(tmp_path)
    # 8 items x 5 ms = 40 ms a batch per worker, 2 workers: a batch every 20 ms; the step 10 ms
    watch, marker, html = tmp_path / "stopwatch.jsonl", tmp_path / "marker", tmp_path / "r.html"
    p = loadeval(
        "run", *QUICK, "--log-dir", str(tmp_path), "-o", str(html), PLAIN,
        "--item-ms", "5", "--step-ms", "10", "--workers", "2", "--epochs", "2",
        "--stopwatch", str(watch), "--marker", str(marker),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    real, ideal = runs(tmp_path)
    d = diagnose(real, ideal)
    # the verdict as python -m loadeval_nb diagnose prints it, then the report's path
    assert p.stdout == f"{d.text('cli')}\n{html}\n" and html.stat().st_size > 100_000
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 0.0175 <= d.real_step_s <= 0.026, d
        assert 0.0095 <= d.ideal_step_s <= 0.0125, d
        assert 1.5 <= d.speedup <= 2.4, d
        # the script's own stopwatch on the very same steps agrees with the tool
        sw_real, sw_ideal = stopwatch_mean_s(watch, warmup=5)
        assert 0.95 <= d.real_step_s / sw_real <= 1.05, (sw_real, d)
        assert 0.95 <= d.ideal_step_s / sw_ideal <= 1.05, (sw_ideal, d)
    # the training loader (100 batches of 8), never the validation loader (8 batches)
    for run in (real, ideal):
        assert run.loader_settings["len"] == 100 and run.n_steps == 40
    # stopped once measured: finally and atexit ran, the rest of training did not
    assert marker.read_text().split("\n") == ["finally", "atexit"] * 2 + [""]
    assert "Traceback" not in p.stderr
    assert leftovers() == []


@retry_once
def test_a_compute_bound_plain_loop(tmp_path):
    tmp_path = fresh(tmp_path)
    # 8 items x 1 ms = 8 ms a batch per worker, 2 workers: 4 ms a batch; the step 80 ms
    p = loadeval(
        "run", "--steps", "40", "--warmup", "5", "--cache", "5", "--log-dir", str(tmp_path),
        PLAIN, "--item-ms", "1", "--step-ms", "80", "--workers", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    d = diagnose(*runs(tmp_path))
    with excused_if_busy(d):
        assert d.verdict == NOT_INPUT_BOUND, d
        assert 0.079 <= d.real_step_s <= 0.088, d
        assert d.speedup < 1.05, d


@retry_once
def test_both_sides_interleaved_in_one_child_by_default(tmp_path):
    tmp_path = fresh(tmp_path)
    marker = tmp_path / "marker"
    p = loadeval(
        "run", "--steps", "80", "--warmup", "5", "--cache", "5", "--log-dir", str(tmp_path), PLAIN,
        "--item-ms", "5", "--step-ms", "10", "--workers", "2", "--marker", str(marker),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stderr.count("loadeval_nb: the real and the ideal run, interleaved") == 1
    d = diagnose(*runs(tmp_path))
    assert p.stdout == f"{d.text('cli')}\n"
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 1.5 <= d.speedup <= 2.4, d
    assert marker.read_text() == "finally\natexit\n"  # one child ran the script, once
    assert leftovers() == []


def test_a_script_that_fails_gets_its_traceback_and_one_sentence(tmp_path):
    p = loadeval("run", *QUICK, PLAIN, "--fail-at", "3")
    assert p.returncode == 1 and p.stdout == ""
    tb = p.stderr[p.stderr.index("Traceback") :]
    assert tb.splitlines()[1].startswith(f'  File "{PLAIN}"')  # the script's frames, not ours
    assert "ValueError: step 3 failed on purpose" in tb and "runpy" not in tb
    assert p.stderr.splitlines()[-1] == (
        "loadeval_nb: plain_loop.py failed after step 4 of the pass being measured (the real "
        "run) (ValueError: step 3 failed on purpose); its traceback is above."
    )
    assert leftovers() == []


def test_a_script_without_a_dataloader_is_told_so():
    p = loadeval("run", *QUICK, fixture("nothing_to_load.py"))
    assert p.returncode == 1 and "trained without a DataLoader" in p.stdout
    assert p.stderr.splitlines()[-1] == (
        "loadeval_nb: nothing_to_load.py ended without iterating a DataLoader, so there was "
        "nothing to measure: loadeval_nb measures the torch DataLoader a script trains on."
    )


def test_a_script_whose_passes_all_end_within_the_warmup_is_told_which_they_were():
    p = loadeval("run", "--steps", "40", "--warmup", "30", PLAIN, "--batches", "20")
    assert p.returncode == 1
    last = p.stderr.splitlines()[-1]
    assert "ended before any DataLoader pass with gradients on drew more than the 30" in last
    assert "DataLoader #1 (batch_size 8, 8 batches, Items), pass 1 under no_grad" in last
    assert "DataLoader #2 (batch_size 8, 20 batches, Items), pass 1 ended after 20" in last
    assert "--loader K" in last


def test_a_hung_script_is_stopped_at_the_time_limit_with_its_workers(tmp_path):
    marker = tmp_path / "marker"
    p = loadeval(
        "run", *QUICK, "--timeout", "8", PLAIN,
        "--workers", "1", "--hang-at", "2", "--marker", str(marker),
    )  # fmt: skip
    assert p.returncode == 1 and "hanging" in marker.read_text()
    assert p.stderr.splitlines()[-1] == (
        "loadeval_nb: plain_loop.py did not get through the steps of the real run within 8 s "
        "and was stopped; pass --timeout with more seconds if it needs longer."
    )
    assert leftovers() == []


def test_ctrl_c_stops_the_script_and_its_workers(tmp_path):
    marker = tmp_path / "marker"
    cmd = [sys.executable, "-m", "loadeval_nb", "run", *QUICK, PLAIN]
    cmd += ["--workers", "1", "--hang-at", "2", "--marker", str(marker)]
    parent = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and "hanging" in marker.read_text()):
            assert time.monotonic() < deadline and parent.poll() is None
            time.sleep(0.1)
        parent.send_signal(signal.SIGINT)
        _, err = parent.communicate(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 130
    assert err.decode().splitlines()[-1] == (
        "loadeval_nb: stopped (Ctrl-C); the script's processes were stopped and no run log "
        "was kept (pass --log-dir DIR to keep the logs a stopped run has written)."
    )
    assert leftovers() == []


def test_a_module_runs_as_python_dash_m_runs_it(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(open(PLAIN).read())
    p = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "run", "--steps", "20", "--warmup", "2",
         "-m", "pkg.train", "--step-ms", "1", "--batches", "200"],
        capture_output=True, text=True, timeout=120, env=env(), cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: ")


def test_the_verdicts_advice_is_spelled_as_runs_options(tmp_path):
    # 7 steady steps a side: too few for a verdict, whatever the machine does
    p = loadeval(
        "run", "--steps", "12", "--warmup", "5", "--cache", "5", "--log-dir", str(tmp_path),
        PLAIN, "--step-ms", "1", "--batches", "30",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    d = diagnose(*runs(tmp_path))
    assert p.stdout == f"{d.text('cli')}\n"
    assert "Verdict: NOT ENOUGH DATA" in p.stdout
    # the child found the pass too short for blocks (the core's rule, its reason) and the
    # parent only reported it: the pair's child first, whose one real epoch is the real
    # run, then a child for the ideal side alone (the script runs twice, not three times)
    said = [line for line in p.stderr.splitlines() if line.endswith(" ...")]
    assert [line.split(" (")[0] for line in said] == [
        "loadeval_nb: the real and the ideal run, interleaved ...",
        "loadeval_nb: the ideal run",
    ], said
    notes = [line for line in p.stderr.splitlines() if "note:" in line]
    assert any(
        "an epoch of the loader has 30 batches and interleaved blocks need" in n
        and "measured the real run, and a second run measured the ideal run" in n
        and "ran twice" in n
        for n in notes
    ), notes
    assert "(--steps 400, or --steps auto)" in p.stdout  # run's own option
    assert "steps=" not in p.stdout  # never a script's keyword
    assert leftovers() == []
