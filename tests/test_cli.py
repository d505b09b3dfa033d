"""python -m loadeval_nb: demo, diagnose, report."""

from __future__ import annotations

import pytest

from loadeval_nb import Run
from loadeval_nb.__main__ import main

MS = 1_000_000


@pytest.fixture
def logs(tmp_path):
    def mk(ms, mode):
        step = [ms * MS] * 20
        return Run(mode=mode, start_ns=[i * ms * MS for i in range(20)], step_ns=step).save(
            tmp_path / f"{mode}.json"
        )

    return mk(20, "log"), mk(10, "replay")


def test_diagnose_and_report(logs, tmp_path, capsys):
    assert main(["diagnose", *logs]) == 0
    assert "Verdict: INPUT-BOUND" in capsys.readouterr().out
    out = tmp_path / "r.html"
    assert main(["report", *logs, "-o", str(out)]) == 0 and out.exists()


def test_bad_path_is_one_line(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "x.json"), str(tmp_path / "y.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadeval_nb: No run log at") and "\n" not in err


def test_demo_rejects_bad_numbers(capsys):
    assert main(["demo", "--steps", "0"]) == 2
    assert "--steps must be a positive integer or 'auto', not 0." in capsys.readouterr().err


@pytest.mark.slow
def test_demo_runs_and_writes_report(tmp_path, capsys):
    out = tmp_path / "demo.html"
    assert (
        main(
            [
                "demo",
                "--steps",
                "15",
                "--warmup",
                "2",
                "--out",
                str(out),
                "--log-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "Verdict:" in text and "real step" in text
    assert out.exists()
    assert len(list(tmp_path.glob("*-real.json"))) == len(list(tmp_path.glob("*-ideal.json"))) == 1
    assert "real run log:" in text


def _noisy_run(tmp_path, name, ms, n=200, seed=0):
    import random

    rng = random.Random(seed)
    step = [int((ms + rng.gauss(0, 0.3)) * MS) for _ in range(n)]
    start = [sum(step[:i]) for i in range(n)]
    return Run(mode="log", start_ns=start, step_ns=step, samples=[8] * n).save(tmp_path / name)


def test_compare_fails_a_significant_regression_over_the_limit(tmp_path, capsys):
    before = _noisy_run(tmp_path, "before.json", 20.0)
    slower = _noisy_run(tmp_path, "slower.json", 22.0, seed=1)  # +10 %
    assert main(["compare", before, slower, "--max-slowdown", "5%"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: steps are 10" in out and "95% CI +" in out and "samples/s" in out
    assert main(["compare", before, slower, "--max-slowdown", "15%"]) == 0


def test_compare_passes_noise_and_speedups(tmp_path, capsys):
    before = _noisy_run(tmp_path, "before.json", 20.0)
    same = _noisy_run(tmp_path, "same.json", 20.0, seed=2)
    faster = _noisy_run(tmp_path, "faster.json", 15.0, seed=3)
    assert main(["compare", before, same, "--max-slowdown", "0%"]) == 0
    assert main(["compare", before, faster]) == 0
    assert "OK: steps are 25" in capsys.readouterr().out


def test_compare_refuses_a_bad_limit_in_one_sentence(tmp_path, capsys):
    before = _noisy_run(tmp_path, "before.json", 20.0)
    assert main(["compare", before, before, "--max-slowdown", "lots"]) == 2
    assert "write it like 5% or 0.05" in capsys.readouterr().err


def test_compare_refuses_what_it_cannot_judge(tmp_path, capsys):
    before = _noisy_run(tmp_path, "before.json", 20.0)
    assert main(["compare", before, before, "--max-slowdown", "5"]) == 2  # 5 means 500 %?
    assert "write it like 5% or 0.05" in capsys.readouterr().err
    short = _noisy_run(tmp_path, "short.json", 20.0, n=5)
    assert main(["compare", before, short]) == 2  # too few steps: the gate does not pass
    assert "not enough steady steps" in capsys.readouterr().out


def test_advice_is_spelled_as_the_commands_options(tmp_path, capsys):
    # 8 steps a run: too few steady steps for a verdict, and the advice names --steps
    def mk(ms, mode):
        step = [ms * MS] * 8
        return Run(mode=mode, start_ns=[i * ms * MS for i in range(8)], step_ns=step).save(
            tmp_path / f"few-{mode}.json"
        )

    assert main(["diagnose", mk(20, "log"), mk(10, "replay")]) == 0
    out = capsys.readouterr().out
    assert "Verdict: NOT ENOUGH DATA" in out
    assert "(--steps 400, or --steps auto)" in out
    assert "steps=" not in out  # a script's keyword, not this command's option


def _waiting_run(tmp_path, name, wait_ms, compute_ms, seed, n=200):
    import random

    rng = random.Random(seed)
    wait = [int((wait_ms + rng.gauss(0, 0.2)) * MS) for _ in range(n)]
    step = [w + int((compute_ms + rng.gauss(0, 0.3)) * MS) for w in wait]
    start = [sum(step[:i]) for i in range(n)]
    return Run(mode="log", start_ns=start, step_ns=step, wait_ns=wait, samples=[8] * n).save(
        tmp_path / name
    )


def test_compare_names_the_stage_that_changed_and_gates_on_one(tmp_path, capsys):
    before = _waiting_run(tmp_path, "before.json", 2.0, 10.0, seed=1)
    after = _waiting_run(tmp_path, "after.json", 6.0, 10.0, seed=2)  # waiting +4 ms a step
    assert main(["compare", before, after]) == 1
    out = capsys.readouterr().out
    assert "the change is in wait (+4.0 ms a step)" in out
    assert "changed: wait (waiting for the next batch) +4.0 ms a step (95% CI +" in out
    assert "changed: compute" not in out
    assert main(["compare", before, after, "--stage", "compute"]) == 0  # the step's own work
    assert "OK: compute " in capsys.readouterr().out
    assert main(["compare", before, after, "--stage", "wait"]) == 1
    assert "REGRESSION: wait is 4.0 ms a step slower" in capsys.readouterr().out


def test_compare_refuses_a_stage_it_has_not_and_two_kinds_in_one_sentence(tmp_path, capsys):
    before = _waiting_run(tmp_path, "before.json", 2.0, 10.0, seed=1)
    assert main(["compare", before, before, "--stage", "collate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "loadeval_nb: --stage 'collate' is not a stage both runs measured; name one of "
        "wait, compute."
    )
    split = tmp_path / "split.json"
    split.write_text(
        '{"kind": "loadeval_nb.transform_split", "schema_version": 1, "samples": 4, '
        '"parts": [{"name": "Crop", "calls": 4, "seconds": 0.01, "sum_sq_s2": 3e-5}]}'
    )
    assert main(["compare", before, str(split)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("loadeval_nb: before is a run log and after a transform split; ")
    assert "\n" not in err
