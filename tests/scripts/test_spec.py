"""The script runner's contract and its one home: what the parent tells a child (the whole
checked settings), the evaluators the child builds from them, the parent reaching none of
the child's modules, the run command's options shared by both front ends, and the
result shown as every result is. In-process, on tiny loaders: no child, no sleep."""

from __future__ import annotations

import argparse
import ast
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from IPython.lib.pretty import pretty
from torch.utils.data import DataLoader

from loadeval_nb.core._shared import Reported
from loadeval_nb.core.errors import LoadEvalError, OptionError
from loadeval_nb.core.explore import RunSettings
from loadeval_nb.core.measure import AutoStop, LoaderEvaluator
from loadeval_nb.integrations import ScriptResult
from loadeval_nb.integrations._script.child.sides import side_for
from loadeval_nb.integrations._script.parent.options import (
    option_sentence,
    run_parser,
    script_settings,
    split_run,
)
from loadeval_nb.integrations._script.parent.run import TUNABLE
from loadeval_nb.integrations._script.spec import ENV, MEASURES, ChildSpec, settings_to_dict

SCRIPT = Path(__file__).resolve().parents[2] / "loadeval_nb" / "integrations" / "_script"


def spec(settings: RunSettings, side: str = "pair") -> ChildSpec:
    return ChildSpec(side, settings, "20261126-120000", "train", "/tmp/status")


def test_a_child_gets_the_whole_checked_settings():
    """Before, the spec copied six of the settings' fields: a child measured with the
    default auto_stop, worker_timing and interleave whatever the parent was given."""
    settings = RunSettings(
        steps="auto",
        warmup=4,
        num_cached_batches=6,
        log_dir="/tmp/logs",
        sample_interval_s=None,
        auto_stop=AutoStop(rel=0.2, min_steps=40),
        worker_timing=False,
        interleave=False,
    )
    got = ChildSpec.from_env({ENV: spec(settings).to_env()})
    assert got is not None and got.settings == settings and got == spec(settings)
    assert {f.name for f in fields(RunSettings)} == set(settings_to_dict(settings))
    assert got.settings.auto_stop == AutoStop(rel=0.2, min_steps=40)
    assert got.log_dir == "/tmp/logs"
    assert ChildSpec.from_env({}) is None


def test_settings_from_the_environment_are_checked_again():
    text = spec(RunSettings(steps=40, warmup=5)).to_env().replace('"warmup": 5', '"warmup": 50')
    with pytest.raises(OptionError, match="warmup"):
        ChildSpec.from_env({ENV: text})


def test_the_child_builds_its_evaluators_from_those_settings(tmp_path):
    settings = RunSettings(
        steps="auto",
        warmup=2,
        num_cached_batches=4,
        log_dir=str(tmp_path),
        sample_interval_s=None,
        auto_stop=AutoStop(rel=0.2, min_steps=20, max_steps=100),
        worker_timing=False,
    )
    loader = DataLoader(torch.arange(400, dtype=torch.float32), batch_size=1)
    real = side_for("real", settings, "s", "train")
    ev = real.make(loader, real.claim)
    assert list(real.paths()) == ["real"] and ev.mode == "log" and not ev.worker_timing
    assert ev.auto_stop == settings.auto_stop
    pair = side_for("pair", settings, "s2", "train")
    ev = pair.make(loader, pair.claim)
    # the logs are named for the arms the pass's plan serves, made before the pass: this
    # loader has no workers, so the plan has no contended arm, and no log is named for it
    assert type(ev) is LoaderEvaluator and ev.mode == "pair"
    assert ev.plan.arms == ("real", "ideal") and "no workers" in (ev.contention or "")
    assert ev.auto_stop == settings.auto_stop and not ev.worker_timing
    assert ev.num_cached_batches == 4 and ev.warmup == 2 and ev.plan.warmup == 4  # cache fills
    assert [Path(p).name for p in pair.paths().values()] == [
        "loadeval-s2-train-real.json",
        "loadeval-s2-train-ideal.json",
    ]
    ev.close()


def test_the_child_names_the_logs_of_the_arms_its_plan_serves(tmp_path):
    """A loader with workers and the contended arm asked for: the plan has it, and the
    child names its log; with contention off it names none."""
    loader = DataLoader(torch.arange(400, dtype=torch.float32), batch_size=1, num_workers=1)
    for contention, arms in ((True, ["real", "contended", "ideal"]), (False, ["real", "ideal"])):
        settings = RunSettings(
            steps=100, log_dir=str(tmp_path), sample_interval_s=None, contention=contention
        )
        pair = side_for("pair", settings, f"c{contention}", "t")
        ev = pair.make(loader, pair.claim)
        assert list(ev.plan.arms) == arms and list(pair.paths()) == arms
        ev.close()


def _imports(path: Path) -> set[str]:
    """Every relative module ``path`` imports from, as written (``..spec``, ``.launch``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            out.add("." * node.level + (node.module or ""))
    return out


@pytest.mark.parametrize("parent", ["run", "launch", "options", "command"])
def test_the_parent_imports_none_of_the_childs_modules(parent):
    """The parent and the child meet only in the modules beside them (spec.py: an
    environment variable down, files up); the parent's check of whether the core could
    interleave, imported from the child's sides.py, was dead (the core always can) and
    went. (The child's side of it: tests/test_layering.py.)"""
    imported = _imports(SCRIPT / "parent" / f"{parent}.py")
    assert not {m for m in imported if m.startswith("..child")}, imported
    assert imported & {"..spec", "..words", "..loaders", "..procs"} or parent == "command"


def test_one_word_for_each_child_and_one_list_of_loader_settings():
    assert list(MEASURES) == ["real", "ideal", "pair"]
    assert MEASURES["pair"] == "the real and the ideal run, interleaved"
    assert TUNABLE == ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers")


def test_both_front_ends_read_one_set_of_options():
    ours, target = split_run(["--cache", "4", "--sequential", "train.py", "--cache", "9"])
    assert target == ["train.py", "--cache", "9"]
    args = run_parser("%loadeval_run").parse_args(ours)
    settings, ranks = script_settings(args)
    assert settings == RunSettings(num_cached_batches=4, interleave=False) and ranks is None
    settings, _ = script_settings(run_parser().parse_args([]))
    assert settings == RunSettings() and settings.interleave  # the pair, by default
    bad = argparse.Namespace(**{**vars(args), "cache": 0})
    with pytest.raises(LoadEvalError, match=r"^--cache must be a positive number"):
        script_settings(bad)
    e = OptionError("cache_on", " device needs a CUDA device.")
    assert option_sentence(e) == "--cache-on device needs a CUDA device."
    e = LoadEvalError("Name the script to run: python -m loadeval_nb run [options] SCRIPT.")
    assert option_sentence(e, "%loadeval_run") == (
        "Name the script to run: %loadeval_run [options] SCRIPT."
    )


def test_the_help_says_the_pair_is_interleaved_by_default():
    text = run_parser().format_help()
    assert "interleaved in blocks" in " ".join(text.split())
    assert "each in a fresh process" not in text


def test_a_script_result_is_shown_as_every_result_is():
    result = ScriptResult(["train.py"], "train", "/tmp", error="train.py failed on purpose.")
    assert isinstance(result, Reported) and not result.ok
    assert str(result) == result.text() == result.facts().text("keywords")
    assert "train.py failed on purpose." in pretty(result)
    assert "ScriptResult(" not in pretty(result)  # IPython's display: the text, not a repr
