"""The command line under faults: bad options, unwritable outputs, ``compare`` on damaged
logs, and the bad-input catalogue's command-line cases.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from loadeval_nb import (
    LoadEvalError,
    Run,
)
from loadeval_nb.__main__ import main
from loadeval_nb.explore import parse_sweep
from tests.catalogue import (
    MAX_WORKERS,
    InputUser,
    Refused,
    case_id,
    check_bad_input,
    check_more_bad_input,
    log_at,
    nothing_left,
    run_of,
)

# the added catalogue's cases ran with these around each
pytestmark = pytest.mark.usefixtures("earlier_children", "sigint_put_back")


def compare_cli(*args: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "compare", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in out.stderr + out.stdout
    said = out.stderr.strip() or out.stdout.splitlines()[0]
    raise Refused(f"exit {out.returncode}: {said}")


def steps_log(tmp: str, name: str, n: int) -> str:
    p = os.path.join(tmp, name)
    Run(
        mode="log",
        start_ns=[i * 10_000_000 for i in range(n)],
        step_ns=[10_000_000] * n,
        wait_ns=[1_000] * n,
    ).save(p)
    return p


CUT_AT = '"step_ns":[10000000,10000000'


def cut_log(tmp: str) -> str:
    """A 40-step log cut off in the middle of its steps (a copy killed mid-write)."""
    p = steps_log(tmp, "cut.json", 40)
    with open(p) as f:
        text = f.read()
    with open(p, "w") as f:
        f.write(text[: text.index(CUT_AT) + len(CUT_AT)])
    return p


def run_cli(*args: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse
            code = e.code
    raise Refused(f"exit {code}: {err.getvalue().strip()}")


def test_cli_bad_device_and_unwritable_output(tmp_path, capsys):
    assert main(["demo", "--device", "toaster", "--out", ""]) == 2
    assert "--device 'toaster' is not a device; use cpu, cuda or cuda:N." in capsys.readouterr().err
    real, ideal = (
        run_of(20).save(tmp_path / "r.json"),
        run_of(10, "replay").save(tmp_path / "i.json"),
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["report", real, ideal, "-o", str(blocker / "report.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_compare_of_a_log_with_itself_says_no_change(user):
    a = steps_log(user.tmp, "a.json", 40)
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "compare", a, a],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stderr == ""
    headline = out.stdout.splitlines()[0]
    assert headline == "Compare: OK: steps take the same time."
    nothing_left(user.tmp, ("a.json",))


def test_worker_counts_a_machine_cannot_take_are_refused(capsys):
    with pytest.raises(LoadEvalError, match=r"num_workers=100000 is more worker processes"):
        parse_sweep("num_workers=100000")
    assert main(["demo", "--workers", "100000", "--out", ""]) == 2
    assert "--workers=100000 is more worker processes" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["diagnose", "compare"])
def test_a_400_digit_step_time_is_refused_in_one_sentence(tmp_path, command):
    doc = Run(mode="log", start_ns=[0, 10, 20], step_ns=[10, 10, 10]).to_dict()
    doc["steps"]["step_ns"][1] = int("9" * 400)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", command, str(p), str(p)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stderr
    assert "numbers too large for a run" in out.stderr and "Traceback" not in out.stderr


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "cli-diagnose-missing",
        lambda u: run_cli("diagnose", "a.json", "b.json"),
        Refused,
        "exit 2: loadeval_nb: No run log at 'a.json'; check the path or record the run first.",
    ),
    (
        "cli-diagnose-foreign",
        lambda u: run_cli("diagnose", log_at(u, "f.json", "{}"), log_at(u, "g.json", "{}")),
        Refused,
        'exit 2: loadeval_nb: \'{tmp}/f.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "cli-report-unwritable",
        lambda u: run_cli(
            "report", log_at(u, "r.json"), log_at(u, "i.json", mode="replay"), "-o", u.tmp
        ),
        Refused,
        "exit 2: loadeval_nb: cannot write '{tmp}' (it is a folder); pass a path you can write to.",
    ),
    (
        "cli-compare-bad-share",
        lambda u: run_cli(
            "compare", log_at(u, "a.json"), log_at(u, "b.json"), "--max-slowdown", "lots"
        ),
        Refused,
        "exit 2: loadeval_nb: 'lots' is not a share; write it like 5% or 0.05.",
    ),
    (
        "cli-demo-device",
        lambda u: run_cli("demo", "--device", "tpu"),
        Refused,
        "exit 2: loadeval_nb: --device 'tpu' is not a device; use cpu, cuda or cuda:N.",
    ),
    (
        "cli-demo-workers",
        lambda u: run_cli("demo", "--workers", "100000"),
        Refused,
        f"exit 2: loadeval_nb: --workers=100000 is more worker processes than this machine can run usefully (4 per CPU: at most {MAX_WORKERS}); try a number up to {MAX_WORKERS}.",
    ),
    (
        "cli-demo-steps",
        lambda u: run_cli("demo", "--steps", "0"),
        Refused,
        "exit 2: loadeval_nb: --steps must be a positive integer or 'auto', not 0.",
    ),
]


BAD: list[Any] = [
    (
        "cli-compare-truncated-log",
        lambda tmp: compare_cli(cut_log(tmp), steps_log(tmp, "b.json", 40)),
        Refused,
        "exit 2: loadeval_nb: '{tmp}/cut.json' is not valid JSON (Expecting ',' delimiter: line 1, column {cut}); it may be truncated: record the run again.",
    ),
    (
        "cli-compare-a-directory",
        lambda tmp: compare_cli(steps_log(tmp, "a.json", 40), tmp),
        Refused,
        "exit 2: loadeval_nb: '{tmp}' is a directory; pass the path of a .json run log.",
    ),
    (
        "cli-compare-too-few-steps",
        lambda tmp: compare_cli(steps_log(tmp, "a.json", 3), steps_log(tmp, "b.json", 40)),
        Refused,
        "exit 2: Compare: not enough steady steps to compare (at least 10 in each run).",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), BAD, ids=[case_id(c) for c in BAD])
def test_more_bad_input(user, quiet_frameworks, name, call, kind, sentence):
    check_more_bad_input(user.tmp, call, kind, sentence)


def test_a_failure_after_the_measured_steps_is_not_called_before_them():
    # a script that raised once its pass had handed out every batch (106 steps measured)
    # was said to have failed "before the steps ... were measured"
    from loadeval_nb.core.explore import RunSettings
    from loadeval_nb.integrations._script.parent.run import side_sentence
    from loadeval_nb.integrations._script.spec import ChildStatus

    def said(**kw):
        st = ChildStatus("script-failed", error="RuntimeError: loss is nan", **kw)
        return side_sentence("train.py", "the interleaved runs", st, RunSettings())

    assert said(steps=106) == (
        "train.py failed after the 106 steps of the interleaved runs were measured "
        "(RuntimeError: loss is nan); its traceback is above."
    )
    assert "failed before the steps of the interleaved runs were measured" in said()
    assert "after step 20 of the pass being measured (the real side, block 1)" in said(
        steps=20, failed_step=20, failed_block="the real side, block 1"
    )
    # in the contended arm's block, the arm is ours, and --no-contention leaves it out
    contended = said(steps=30, failed_step=30, failed_block="the contended side, block 1")
    assert "the contended arm draws the loader's batches from a thread of its own" in contended
    assert "--no-contention leaves it out; its traceback is above." in contended


def test_a_ranks_exit_code_is_one_the_docs_list():
    # under the user's launcher a rank's --timeout exited 143 (the child's SIGTERM) where
    # one process exits 1, and a refusal 3: every failure is 1, but a script's own
    # sys.exit(n), which the launcher's summary then shows
    from loadeval_nb.integrations._script.parent.launch import Ended
    from loadeval_nb.integrations._script.parent.run import rank_exit_code as _exit_code
    from loadeval_nb.integrations._script.spec import ChildStatus

    exited = {"1": ChildStatus("script-exited", exit_code=3)}
    assert _exit_code(Ended(-15, timed_out=True), {}) == 1
    assert _exit_code(Ended(3), {"0": ChildStatus("refused", message="x")}) == 1
    assert _exit_code(Ended(-11), {}) == 1  # a crash: the sentence names the signal
    assert _exit_code(Ended(1), {"0": ChildStatus("script-failed", error="E: x")}) == 1
    assert _exit_code(Ended(3), exited) == 3
