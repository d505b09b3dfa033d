"""bench/gpu_truth: its self-tests (the arithmetic, the records, the nvidia-smi reader, the
carried wheels, the device command in docs/gpu.md) and its CPU dry run, which runs every
check's code with tiny sizes, a stand-in NVML and a stand-in nvidia-smi."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bench.gpu_truth import wheels
from bench.gpu_truth.harness import ROOT, child_env
from bench.gpu_truth.maths import (
    abba,
    expected_verdict,
    pytest_counts,
    ratio_of_medians,
    steady,
    steady_windows,
    verdict_agrees,
    window_mean,
)
from bench.gpu_truth.nocuda import NO_CUDA_LINE
from bench.gpu_truth.report import (
    SCHEMA_VERSION,
    Record,
    at_least,
    format_record,
    markdown_table,
    near,
    read_json,
    rel,
    summary_line,
    write_json,
)
from bench.gpu_truth.run import main, parse_only
from bench.gpu_truth.smi import Smi, parse_smi_line, smi_times_on_our_clock
from loadeval_nb.verdict import INPUT_BOUND, NOT_INPUT_BOUND, PARTLY_INPUT_BOUND

DOC = ROOT / "docs" / "gpu.md"
README_PIP = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "
    "--target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit;"
)

# ---- the arithmetic ----------------------------------------------------------------------------


def test_parse_smi_line():
    stamp = dt.datetime(2025, 1, 15, 10, 23, 45, 123000).timestamp()
    assert parse_smi_line("2025/01/15 10:23:45.123, 97") == (stamp, 97.0)
    assert parse_smi_line("2025/01/15 10:23:45.123, [N/A]") is None
    assert parse_smi_line("Failed to initialize NVML: Driver/library version mismatch") is None


def test_smi_stamps_move_onto_our_clock_and_a_zone_offset_is_undone():
    assert smi_times_on_our_clock([10.0], [int(5e9)], int(5e9)) == [5e9]
    assert smi_times_on_our_clock([3610.0], [int(5e9)], int(5e9)) == [5e9]  # 1 h off
    assert smi_times_on_our_clock([], [], 0) == []


def test_windows_and_means():
    assert window_mean([0, 1, 2, 3], [10, 20, None, 40], [(1, 3)]) == (30.0, 2)
    assert window_mean([0, 1], [10, 20], [(5, 6)]) == (None, 0)
    got = steady_windows([0, 10, 20, 0, 10], [10] * 5, [0, 0, 0, 1, 1], [1, 2, 4], 100, 1)
    assert got == [(111, 130), (111, 120)]


def test_order_and_ratios():
    assert "".join(abba(3)) == "ABBAAB"
    assert steady([9, 1, 2, 3], 0) == [1, 2, 3]
    assert steady([9, 8, 1], 2) == [1]
    assert ratio_of_medians([2, 4, 100], [1, 2, 3]) == 2.0
    assert ratio_of_medians([], [1]) is None


def test_the_verdict_a_hand_speedup_calls_for():
    assert [expected_verdict(s) for s in (1.3, 1.1, 1.01)] == [
        INPUT_BOUND,
        PARTLY_INPUT_BOUND,
        NOT_INPUT_BOUND,
    ]
    assert verdict_agrees(PARTLY_INPUT_BOUND, 1.27)  # within 5 % of 1.25x: either
    assert not verdict_agrees(NOT_INPUT_BOUND, 1.5)
    assert not verdict_agrees(None, 1.5)


def test_pytest_counts():
    assert pytest_counts("..\n3 passed, 1 skipped in 2.0s") == {"passed": 3, "skipped": 1}
    assert pytest_counts("1 failed, 2 errors in 1s") == {"failed": 1, "error": 2}


# ---- the records and the JSON file -------------------------------------------------------------


def test_records_say_measured_vs_truth_with_the_ratio():
    r = rel("split", "copy", 10.5, 10.0, 0.10, "ms")
    assert r.ok and r.ratio() == pytest.approx(1.05)
    assert format_record(r) == "  PASS  split: copy: 10.5 ms vs 10 ms (ratio 1.0500)  [within 10%]"
    assert not rel("split", "copy", 12.0, 10.0, 0.10).ok
    assert not rel("split", "copy", None, 10.0, 0.10).ok  # no figure is no pass
    assert near("util", "u", 93.0, 97.0, 5).ok and not near("util", "u", 90.0, 97.0, 5).ok
    assert not at_least("ideal", "u", float("nan"), 95.0).ok
    skip = Record("util", "u", None, None, None, "r")
    assert format_record(skip).startswith("  SKIP") and skip.ratio() is None


def test_summary_line_counts_what_was_held():
    recs = [
        Record("a", "x", 1, 1, True, ""),
        Record("a", "y", 1, 2, False, ""),
        Record("a", "z", 1, 1, None, ""),
    ]
    assert summary_line(recs, dry=False) == "gpu_truth: 1 of 2 checks hold"
    assert summary_line(recs, dry=True).endswith("1 of 2 checks hold; 1 need CUDA")


def test_json_file_round_trip_and_newer_schema_refused(tmp_path):
    path = tmp_path / "out" / "g.json"
    recs = [
        rel("split", "copy", 10.5, 10.0, 0.1, "ms"),
        Record("u", "nan", float("nan"), 1, None, ""),
    ]
    write_json(path, {"device": "X", "shape": (1, 2)}, recs, checks={"split": {"seconds": 1.0}})
    doc = read_json(path)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["device"] == "X"
    assert doc["shape"] == [1, 2] and (doc["held"], doc["counted"]) == (1, 1)
    assert doc["records"][0]["status"] == "PASS" and doc["records"][0]["ratio"] == pytest.approx(
        1.05
    )
    assert doc["records"][1]["measured"] is None  # NaN is not JSON
    assert not list(path.parent.glob("*.part"))
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match="update the checkout"):
        read_json(path)


def test_only_takes_checks_in_run_order_and_refuses_others_in_one_sentence():
    assert parse_only("suite,util") == ["util", "suite"]
    assert parse_only(None)[0] == "util" and parse_only(None)[-1] == "suite"
    with pytest.raises(ValueError, match=r"^--only util,nope: nope is not a check; name one"):
        parse_only("util,nope")


# ---- the nvidia-smi reader ---------------------------------------------------------------------


def test_the_smi_reader_parses_lines_onto_our_clock():
    before = time.perf_counter_ns()
    with Smi([], stand_in=True, stand_in_pct=7) as smi:
        time.sleep(0.35)
    after = time.perf_counter_ns()
    times, values = smi.series()
    assert len(values) >= 2 and set(values) == {7.0}
    # nvidia-smi's stamps have millisecond resolution; the child starts after `before`
    assert all(before - 5e6 <= t <= after for t in times), (before, times, after)
    assert smi.proc is not None and smi.proc.poll() is not None  # stopped on exit
    assert "stand-in" in smi.describe()


def test_a_missing_nvidia_smi_is_a_reason_not_a_crash(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with Smi(["0"]) as smi:
        pass
    assert smi.series() == ([], []) and "cannot start" in smi.describe()


def test_children_import_this_checkout():
    env = child_env()
    assert env["PYTHONPATH"].split(":")[0] == str(ROOT)


# ---- the carried wheels and the device command ---------------------------------------------


def test_wheels_txt_pins_the_notebook_stack_once_each():
    pins = wheels.read_pins()
    for name in ("bokeh", "jupyter-bokeh", "ipywidgets", "ipython", "ipykernel", "nbclient"):
        assert name in pins, name
    for name in ("nbformat", "jupyter-client", "pyzmq", "tornado", "traitlets"):
        assert name in pins, name
    # the image has these: carrying a second version would shadow its own
    assert not {"numpy", "torch", "psutil", "nvidia-ml-py", "pytest", "pillow"} & set(pins)


def test_a_bad_pin_is_one_sentence(tmp_path):
    (tmp_path / "w.txt").write_text("bokeh>=3\n")
    with pytest.raises(ValueError, match="pin one version"):
        wheels.read_pins(tmp_path / "w.txt")
    (tmp_path / "w.txt").write_text("bokeh==3.9.2\nBokeh==3.9.1\n")
    with pytest.raises(ValueError, match="pinned twice"):
        wheels.read_pins(tmp_path / "w.txt")


def test_wheel_names_and_what_runs_on_the_gpu_machine():
    tags = wheels.wheel_tags(
        "pyzmq-27.3.0-cp312-abi3-manylinux_2_26_x86_64.manylinux_2_28_x86_64.whl"
    )
    assert tags[:2] == ("pyzmq", "27.3.0") and wheels.runs_here(*tags[2:])
    assert wheels.runs_here(*wheels.wheel_tags("stack_data-0.6.3-py3-none-any.whl")[2:])
    assert wheels.runs_here(
        *wheels.wheel_tags("tornado-6.6.1-cp311-abi3-manylinux1_x86_64.whl")[2:]
    )
    assert not wheels.runs_here(
        *wheels.wheel_tags("rpds_py-0.30.0-cp311-cp311-manylinux_2_17_x86_64.whl")[2:]
    )
    assert not wheels.runs_here(
        *wheels.wheel_tags("rpds_py-0.30.0-cp312-cp312-macosx_11_0_arm64.whl")[2:]
    )


def test_the_folder_check_finds_each_problem(tmp_path):
    pins = {"bokeh": "3.9.2", "comm": "0.2.3", "tornado": "6.6.1"}
    for f in (
        "bokeh-3.9.2-py3-none-any.whl",
        "bokeh-3.9.1-py3-none-any.whl",
        "extra-1.0-py3-none-any.whl",
        "tornado-6.6.1-cp312-cp312-win_amd64.whl",
    ):
        (tmp_path / f).write_bytes(b"x" * 10)
    got = "\n".join(wheels.problems(tmp_path, pins, limit=30))
    assert "wheels.txt pins bokeh==3.9.2" in got and "bokeh: 2 versions" in got
    assert "extra-1.0-py3-none-any.whl: not in wheels.txt" in got
    assert "win_amd64.whl: not for CPython 3.12" in got
    assert "comm==0.2.3: missing" in got and "over 0 MiB" in got


def test_prepare_sh_ignores_the_wheels_and_downloads_for_cp312_manylinux():
    text = (ROOT / "bench" / "gpu_truth" / "prepare.sh").read_text()
    assert "/.whl/" in text and "info/exclude" in text
    assert "--no-deps" in text and "--python-version 3.12" in text and "manylinux" in text
    assert '-r "$here/wheels.txt"' in text
    subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_truth" / "prepare.sh")], check=True)


def device_command() -> str:
    m = re.search(r"<!-- device-command -->\n```text\n(.+?)\n```", DOC.read_text(), re.S)
    assert m, "docs/gpu.md: the device command's block is gone"
    return m.group(1)


def test_docs_give_the_device_command_as_typed():
    cmd = device_command()
    assert "\n" not in cmd and len(cmd) <= 2000
    assert cmd.startswith(README_PIP)  # the device README's line, verbatim
    assert "PYTHONUNBUFFERED=1" in cmd and "set -o pipefail" in cmd
    assert "-m bench.gpu_truth --quick" in cmd
    assert "--json $OUT/" in cmd and "| tee $OUT/" in cmd
    budget = float(re.search(r"--budget-s (\d+)", cmd).group(1))
    stop = float(re.search(r"timeout -k (\d+) (\d+)", cmd).group(2))
    assert budget < stop <= 300  # the quick run ends itself within 5 minutes


def test_docs_give_the_pipelines_device_command_under_eight_minutes():
    # issue 49: the seed rerun, then the image pipeline, as one call of under 8 minutes
    m = re.search(r"<!-- device-command-pipeline -->\n```text\n(.+?)\n```", DOC.read_text(), re.S)
    assert m, "docs/gpu.md: the pipeline's device command is gone"
    cmd = m.group(1)
    assert "\n" not in cmd and len(cmd) <= 2000
    assert cmd.startswith(README_PIP)
    assert "-m bench.gpu_truth --only seed,jpeg" in cmd and "--table" in cmd
    assert "--json $OUT/" in cmd and "| tee $OUT/" in cmd and "set -o pipefail" in cmd
    budget = float(re.search(r"--budget-s (\d+)", cmd).group(1))
    stop = float(re.search(r"timeout -k (\d+) (\d+)", cmd).group(2))
    assert budget < stop <= 480  # the run ends itself within 8 minutes
    assert parse_only("seed,jpeg") == ["seed", "jpeg"]


def test_the_table_is_the_docs_results_table():
    recs = [
        Record("jpeg", "4 workers: real step", 80.0, 78.0, True, "within 10%", "ms"),
        Record("jpeg", "ladder: largest stage", "a", "a", True, "same", "", "a | b"),
    ]
    lines = markdown_table(recs).splitlines()
    assert lines[0] == "| check | figure | measured | truth | ratio | result |"
    assert (
        lines[2] == "| `jpeg` | 4 workers: real step | 80 ms | 78 ms | 1.026 | PASS (within 10%) |"
    )
    assert lines[3].endswith("| — | PASS (same); a / b |")


# ---- the command ---------------------------------------------------------------------------


def run_truth(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.gpu_truth", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA measures")
def test_without_cuda_one_line_and_exit_0():
    p = run_truth("--quick")
    assert (p.returncode, p.stdout) == (0, NO_CUDA_LINE + "\n"), p.stderr[-2000:]


def test_bad_options_are_one_sentence(capsys):
    for argv, said in (
        (["--dry-run", "--only", "utl"], "--only utl: utl is not a check; name one or more of"),
        (["--dry-run", "--budget-s", "0"], "--budget-s 0: give a positive number of seconds."),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and said in capsys.readouterr().err


def dry_run(tmp_path: Path, checks: str) -> dict:
    out = tmp_path / "g.json"
    p = run_truth("--dry-run", "--only", checks, "--json", str(out))
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    assert p.stdout.strip().splitlines()[-1].startswith("gpu_truth (dry run on CPU")
    doc = json.loads(out.read_text())
    assert doc["finished"] and doc["runs"] == "dry"
    assert list(doc["checks"]) == checks.split(",")
    assert not [n for n, c in doc["checks"].items() if c["raised"]]
    return doc


@pytest.mark.slow
def test_dry_run_of_the_measuring_checks(tmp_path):
    doc = dry_run(tmp_path, "util,ideal,split,observer,seed")
    recs = doc["records"]
    by = {(r["check"], r["what"]): r for r in recs}
    assert {r["check"] for r in recs} == {"util", "ideal", "split", "observer", "seed"}
    util = [r for r in recs if r["check"] == "util"]
    # the tool's series (stand-in NVML) against the stand-in nvidia-smi, both at 42 %
    assert len(util) == 2 and all(r["measured"] == r["truth"] == 42.0 for r in util), util
    assert all(r["status"] == "SKIP" for r in util)  # a figure only CUDA has
    # the ideal's readings cut to its steady steps (the run's stamps on the sampler's clock)
    ideal = next(r for r in recs if r["what"].startswith("device-cached ideal: GPU"))
    assert ideal["measured"] == 42.0, ideal
    assert by[("split", "the pair ran interleaved")]["status"] == "PASS"
    assert any(r["check"] == "observer" and "synchronize calls" in r["what"] for r in recs)
    assert doc["packages"]["bokeh"] != "missing"


@pytest.mark.slow
def test_dry_run_of_the_jpeg_pipeline(tmp_path):
    # issue 49: the real image pipeline runs every line at a small size on CPU, so that the
    # device call cannot fail on a typo: JPEGs made and decoded, each worker count's pair
    # with its contended arm and variant, the ladder, the simulator
    doc = dry_run(tmp_path, "jpeg")
    whats = [r["what"] for r in doc["records"]]
    for w, other in ((1, 2), (2, 1)):
        for figure in ("real step", "ideal step", "speedup with an ideal loader", "verdict",
                       "waiting for data (contended arm)", f"--try num_workers={other}"):  # fmt: skip
            assert f"{w} workers: {figure}" in whats, whats
    assert {"pipeline", "ladder: largest stage", "ladder: costliest transform step"} <= set(whats)
    assert "simulator from 1 workers: real step with 2" in whats
    assert next(r for r in doc["records"] if r["what"] == "pipeline")["measured"].startswith(
        "48 JPEGs"
    )


@pytest.mark.slow
def test_dry_run_of_the_suite(tmp_path):
    doc = dry_run(tmp_path, "suite")
    by = {r["what"].split(" (")[0]: r for r in doc["records"]}
    tests = next(r for w, r in by.items() if w.startswith("pytest -m gpu"))
    assert tests["status"] == "PASS" and "skipped" in tests["measured"]  # all skip on CPU
    assert by["demo on cpu: verdict"]["status"] == "PASS"
    ladder = next(r for w, r in by.items() if w.startswith("%%loadeval --ladder in a kernel"))
    assert ladder["status"] == "PASS" and ladder["measured"] == "host, samples, real"
