"""``python -m loadeval_nb run`` and ``ranks``: options, the script's words kept apart
from ours, and bad input answered in one sentence before anything starts (no child)."""

from __future__ import annotations

import pytest

from loadeval_nb.__main__ import main
from loadeval_nb.integrations import Torchrun, run_script
from loadeval_nb.integrations._script.parent.options import split_run

from .cli import fixture

PLAIN = fixture("plain_loop.py")


@pytest.mark.parametrize(
    "argv, ours, target",
    [
        (
            ["--steps", "40", "train.py", "--steps", "9"],
            ["--steps", "40"],
            ["train.py", "--steps", "9"],
        ),
        (["--interleave", "-m", "pkg.train", "-v"], ["--interleave"], ["-m", "pkg.train", "-v"]),
        (["--log-dir=x", "--", "-weird.py"], ["--log-dir=x"], ["-weird.py"]),
        (["-o", "r.html", "t.py"], ["-o", "r.html"], ["t.py"]),
        (["--cache", "4"], ["--cache", "4"], []),
    ],
)
def test_the_scripts_words_are_its_own(argv, ours, target):
    assert split_run(argv) == (ours, target)


@pytest.mark.parametrize(
    "argv, said",
    [
        (["run"], "Name the script to run: python -m loadeval_nb run [options] SCRIPT"),
        (["run", "nowhere.py"], "No script at 'nowhere.py'; pass the path of a Python script"),
        (["run", "--steps", "many", PLAIN], "--steps must be a number of steps or auto"),
        (["run", "--steps", "5", "--warmup", "5", PLAIN], "--warmup (5) must be smaller than"),
        (["run", "--cache", "0", PLAIN], "--cache must be a positive number of batches"),
        (["run", "--loader", "0", PLAIN], "--loader must be a loader's number from 1, not 0."),
        (["run", "--timeout", "0", PLAIN], "--timeout must be a number of seconds > 0"),
        (["run", "--nnodes", "2", PLAIN], "--nnodes needs --nproc-per-node"),
        (["run", "--nproc-per-node", "1", "--nnodes", "2", PLAIN], "pass --rdzv-endpoint"),
        (["run", "--nproc-per-node", "0", PLAIN], "--nproc-per-node"),
        (["run", "--steps", "auto", "--nproc-per-node", "2", PLAIN], "--steps='auto' stops each"),
        (["run", "-o", "/no/such/folder/r.html", PLAIN], "Cannot write the report to"),
        (["ranks", "/no/such/folder"], "is not a folder; pass the folder the ranks wrote"),
    ],
)
def test_bad_input_is_one_sentence(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadeval_nb: ") and said in err and "\n" not in err, err


def test_ranks_in_a_folder_without_rank_logs(tmp_path, capsys):
    assert main(["ranks", str(tmp_path)]) == 2
    assert "No per-rank run logs" in capsys.readouterr().err


def test_the_launchers_command_lines():
    from loadeval_nb.integrations._script.parent.launch import CHILD_MODULE, command

    assert command(["t.py", "-x"], "real", None)[1:] == ["-m", CHILD_MODULE, "t.py", "-x"]
    one = command(["t.py"], "real", Torchrun(2))
    assert one[1:] == [
        "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", CHILD_MODULE, "t.py",
    ]  # fmt: skip
    two = Torchrun(1, nnodes=2, rdzv_endpoint="node0:1234", rdzv_id="job")
    assert command(["-m", "pkg"], "ideal", two)[3:] == [
        "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", "node0:1235", "--rdzv-id", "job-ideal", "-m", CHILD_MODULE, "-m", "pkg",
    ]  # fmt: skip
    assert (
        Torchrun(1, nnodes=2, rdzv_endpoint="node0", rdzv_id="j").endpoint("real") == "node0:29400"
    )


def test_run_script_refuses_what_does_not_apply():
    from loadeval_nb import LoadEvalError, RunSettings

    with pytest.raises(LoadEvalError, match="repeat and only do not apply"):
        run_script([PLAIN], RunSettings(repeat=2))


def test_the_old_interleave_option_still_works_and_warns_once():
    """0.1.0's opt-in for what is now the default, in a fresh interpreter: taken, one
    FutureWarning naming what to do, and a pair as ever."""
    import subprocess
    import sys

    code = (
        "import warnings\n"
        "warnings.simplefilter('always')\n"
        "from loadeval_nb.integrations._script.parent.options import run_parser, script_settings\n"
        "args = run_parser().parse_args(['--interleave'])\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    settings, _ = script_settings(args)\n"
        "    script_settings(args)\n"
        "print(len(w), w[0].category.__name__, settings.interleave)\n"
        "print(w[0].message)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, message = out.stdout.splitlines()
    assert first == "1 FutureWarning True"
    assert message == (
        "--interleave is deprecated and goes in 0.3.0; use the default (interleaved blocks: "
        "leave the option out)"
    )
