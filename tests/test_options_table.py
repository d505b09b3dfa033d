"""One option table (``integrations/_options.py``) builds both front ends' parsers, the
options that take a value, the names sentences use and the settings (issue 47, item 4):
an option added there reaches every one of them; one added beside it fails here."""

from __future__ import annotations

import dataclasses

import pytest

from loadeval_nb import RunSettings
from loadeval_nb.integrations._options import CELL, OPTIONS, RUN, flags, settings_from, valued
from loadeval_nb.integrations._script.parent.options import RUN_VALUED, run_parser, split_run


def _options(parser):
    # (argparse keeps its actions in _actions: read here to hold the parser to the table)
    return {s for a in parser._actions for s in a.option_strings}


def test_the_run_parser_is_the_tables_and_splits_by_it():
    sub = run_parser()  # (the run command's own parser)
    have = {s for s in _options(sub) if s not in ("-h", "--help")}
    table = {f for o in OPTIONS if RUN in o.fronts for f in o.flags}
    table |= {"--no-contention"}  # (argparse's BooleanOptionalAction adds it)
    assert have == table
    takes = {s for a in sub._actions for s in a.option_strings if a.nargs != 0}
    assert takes == set(RUN_VALUED) == set(valued(RUN))
    # every valued option keeps its value from the script's words
    for flag in sorted(RUN_VALUED):
        assert split_run([flag, "4", "train.py", "4"]) == ([flag, "4"], ["train.py", "4"])


def test_the_cells_parser_is_the_tables_and_its_own_view_options():
    from loadeval_nb.magic._magic import LoadEvalMagics

    parser = LoadEvalMagics.loadeval.parser
    have = {s for s in _options(parser) if s not in ("-h", "--help")}
    table = {f for o in OPTIONS if CELL in o.fronts for f in o.flags} | {"--no-contention"}
    assert table <= have
    assert have - table == {"--no-live", "--view", "--quiet", "--ladder", "--sweep"}


@pytest.mark.parametrize("front", [CELL, RUN])
def test_every_setting_a_front_end_sets_is_named_by_its_option(front):
    fields = {f.name for f in dataclasses.fields(RunSettings)}
    names = flags(front)
    for o in OPTIONS:
        if front in o.fronts and o.setting is not None:
            assert o.name in fields, o.name  # a setting the table sets is RunSettings'
            assert names[o.name] == o.flags[-1]
    assert names["num_cached_batches"] == "--cache" and names["variants"] == "--try"
    assert names["interleave"] == "--sequential"


def test_the_settings_from_either_front_end_are_the_same():
    line = ["--steps", "auto", "--cache", "4", "--no-contention", "--try", "num_workers=2"]
    run = run_parser().parse_args(line)
    assert settings_from(run, RUN) == RunSettings(
        steps="auto", num_cached_batches=4, contention=False, variants="num_workers=2"
    )
    from loadeval_nb.magic._magic import LoadEvalMagics

    cell = LoadEvalMagics.loadeval.parser.parse_argstring(
        "train_loader --steps auto --cache 4 --no-contention --try 'num_workers=2'"
    )
    assert settings_from(cell, CELL, lambda s: s.strip("'\"")) == settings_from(run, RUN)
    sequential = run_parser().parse_args(["--sequential"])
    assert settings_from(sequential, RUN).interleave is False


def test_runsettings_has_one_init_the_dataclasses():
    # the dataclass's own (made from the fields, so a field is one edit), not a second
    # hand-written one repeating every field and default
    assert RunSettings.__init__.__code__.co_filename == "<string>"
    s = RunSettings(log_to="wandb", log_dir="~/runs", variants="num_workers=2")
    assert s.log_to == ("wandb",) and not s.log_dir.startswith("~")
    assert dataclasses.replace(s, num_cached_batches=40).variants == s.variants
