"""The contended arm in the plan of a pass: where it goes, what it costs, and when it is on
by default (where it is cheap) — plans only, nothing sleeps."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoaderEvaluator
from loadeval_nb.core.explore import RunSettings
from loadeval_nb.core.measure.blocks import (
    CHEAP,
    CONTENDED,
    NO_WORKERS,
    add_contention,
    plan_blocks,
    plan_pass,
)
from loadeval_nb.errors import OptionError
from loadeval_nb.integrations._script.parent.options import run_parser, script_settings


def _loader(workers: int, n: int = 100_000) -> DataLoader:
    return DataLoader(torch.arange(n), batch_size=None, num_workers=workers)


def test_a_round_is_real_contended_ideal_and_back_and_leaves_out_no_more_than_a_pair():
    pair = plan_blocks(200, 10, 8, depth=4)
    plan = add_contention(pair, None, cheap_only=True)
    assert plan.order()[:6] == ["real", CONTENDED, "ideal", "ideal", CONTENDED, "real"]
    assert plan.block == pair.block and plan.contended_block == pair.block // 2
    steps = plan.block_steps()
    # real after contended: the queue's depth; contended after real: one; else the settle
    assert [skip for _, _, skip in steps[:6]] == [10, 1, 4, 0, 4, 4]
    left_out = sum(skip for _, _, skip in steps[1:])
    assert left_out == sum(skip for _, _, skip in pair.block_steps()[1:])
    extra = plan.total_steps / pair.total_steps - 1
    assert 0 < extra <= CHEAP
    assert plan.total_steps - pair.total_steps == pair.blocks * plan.contended_block


def test_on_by_default_only_where_it_is_cheap_and_always_when_asked():
    # too few steps: blocks of 10, the arm's 8 steps a block would add more than a quarter
    small = plan_blocks(100, 10, 8, depth=4)
    assert add_contention(small, None, cheap_only=True).arms == ("real", "ideal")
    note = add_contention(small, None, cheap_only=True).no_contention
    assert note and "contention=True" in note and "more than 25%" in note
    assert CONTENDED in add_contention(small, None, cheap_only=False).arms
    # blocks short because the epoch is: more steps would not help, and it says so
    epoch = plan_blocks(200, 10, 8, depth=4, loader_len=200)
    short = add_contention(epoch, 200, cheap_only=True).no_contention
    assert short and "epoch of 200 batches" in short and "more steps" not in short
    # a short epoch: by default the pair's blocks are kept and the arm is left out...
    tight = plan_blocks(200, 10, 8, depth=4, loader_len=400)
    kept = add_contention(tight, 400, cheap_only=True)
    assert kept.arms == ("real", "ideal")
    assert "by default" in kept.no_contention and "--contention" in kept.no_contention
    # ... asked for, the pair's blocks are shortened to make room, within the epoch
    asked = add_contention(tight, 400, cheap_only=False)
    assert CONTENDED in asked.arms and asked.block < tight.block and asked.total_steps <= 400
    # an epoch with no room even so: the pair, and why
    none = add_contention(plan_blocks(200, 10, 8, 4, 200), 200, cheap_only=False)
    assert none.arms == ("real", "ideal") and "epoch of the loader has 200" in none.no_contention


@pytest.mark.parametrize(("asked", "workers", "arm"), [(None, 2, True), (None, 0, False),
                                                       (True, 0, False), (False, 2, False)])  # fmt: skip
def test_plan_pass_resolves_the_default_from_the_loader(asked, workers, arm):
    plan = plan_pass(
        _loader(workers), steps=200, warmup=10, num_cached_batches=8, contention=asked
    ).blocks
    assert (CONTENDED in plan.arms) is arm
    if workers == 0 and asked is not False:
        assert plan.no_contention == NO_WORKERS and "num_workers=0" in NO_WORKERS
    if asked is False:
        assert plan.no_contention is None


def test_the_wrapper_has_the_arm_by_default_only_through_the_settings():
    ev = LoaderEvaluator(_loader(2), mode="pair", steps=200, warmup=10, num_cached_batches=8,
                              sample_interval_s=None, contention=None)  # fmt: skip
    assert ev.sides == ("real", CONTENDED, "ideal") and ev.contention is None
    bare = LoaderEvaluator(_loader(0), mode="pair", steps=200, warmup=10, num_cached_batches=8,
                                sample_interval_s=None, contention=True)  # fmt: skip
    assert bare.sides == ("real", "ideal") and "num_workers=0" in (bare.contention or "")
    ev.close()
    bare.close()


def test_settings_and_the_command_line_spell_it_one_way():
    assert RunSettings().contention is None  # on by default where cheap (docs/verdict.md)
    assert RunSettings(contention=False).contention is False
    assert RunSettings(contention=True).contention is True
    with pytest.raises(OptionError, match="or None"):
        RunSettings(contention="yes")
    parser = run_parser()
    for words, want in (([], None), (["--contention"], True), (["--no-contention"], False)):
        args = parser.parse_args(words)
        assert script_settings(args)[0].contention is want
