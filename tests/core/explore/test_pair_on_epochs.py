"""``run_pair`` (the notebook's ``%%loadeval`` and the library) over a loader whose epoch
is too short for blocks: the pair is measured on the loop's own epochs, whole epochs a
side in A B B A order, as ``python -m loadeval_nb run`` measures it — never the 8 real
epochs of one run paired with the 8 ideal epochs of a second as if they had alternated
(issue 47)."""

from __future__ import annotations

import time

from torch.utils.data import DataLoader, Dataset

from loadeval_nb import RunSettings, run_pair

BATCHES = 32


class Items(Dataset):
    def __len__(self) -> int:
        return 4 * BATCHES

    def __getitem__(self, i: int) -> float:
        time.sleep(0.0005)
        return float(i)


def _loader() -> DataLoader:
    return DataLoader(Items(), batch_size=4, num_workers=0)


SETTINGS = RunSettings(warmup=4, num_cached_batches=4, sample_interval_s=0.05)


def _pair(epochs_a_call: int):
    calls: list[int] = []
    seen: list[int] = []

    def run_once(ev):
        calls.append(1)
        for _ in range(epochs_a_call):
            n = 0
            for _batch in ev:
                time.sleep(0.001)
                n += 1
            seen.append(n)

    return run_pair(_loader(), run_once, SETTINGS), calls, seen


def _on_epochs(result) -> None:
    d = result.diagnosis
    assert d is not None, result.error
    assert d.on_epochs, d.notes
    # 4 whole epochs a side, in A B B A order, every one the loader's length
    assert len(result.real.blocks) == 4 and len(result.ideal.blocks) == 4
    order = result.real.settings["epoch_pair"]["order"]
    assert order == "ABBA"
    assert "on_epochs" in d.noted and "sequential" not in d.noted
    (note,) = [n for n in d.notes if n.rule == "on_epochs"]
    assert "measured on the loop's own epochs" in note


def test_a_loop_of_several_epochs_of_a_short_loader_is_paired_on_its_epochs():
    result, calls, seen = _pair(8)
    _on_epochs(result)
    assert len(calls) == 1  # the loop's own 8 epochs hold the schedule: one run
    assert seen == [BATCHES] * 8  # each epoch the loop's whole epoch


def test_a_loop_over_one_epoch_is_run_again_so_that_its_sides_alternate():
    result, calls, seen = _pair(1)
    _on_epochs(result)
    assert len(calls) == 8 and seen == [BATCHES] * 8


def test_a_loop_of_three_epochs_runs_until_the_schedule_is_done():
    result, calls, seen = _pair(3)
    d = result.diagnosis
    assert d is not None and d.on_epochs, result.error
    assert len(calls) == 3 and len(seen) == 9  # 8 epochs asked, the third run's last extra
    assert len(result.real.blocks) + len(result.ideal.blocks) == 9


def test_a_pair_that_asked_for_whole_runs_still_gets_them():
    result = run_pair(
        _loader(), lambda ev: [None for _ in ev], RunSettings(warmup=4, interleave=False)
    )
    d = result.diagnosis
    assert d is not None and not d.on_epochs


def test_a_variant_is_a_third_side_on_the_loops_epochs_as_the_script_runner_has_it():
    """``--try`` on a loader too short for blocks: the variant is measured on the loop's
    epochs beside the pair (the script runner did; the notebook said it was not
    measured), its loader built once, the user's loader left as it was."""
    loader = _loader()
    calls: list[int] = []

    def run_once(ev):
        calls.append(1)
        for _batch in ev:
            time.sleep(0.001)

    settings = RunSettings(
        warmup=4, num_cached_batches=4, sample_interval_s=0.05, variants="num_workers=1"
    )
    result = run_pair(loader, run_once, settings)
    d = result.diagnosis
    assert d is not None and d.on_epochs, result.error
    assert result.variant is not None and d.tried is not None, d.notes
    assert d.tried.settings == {"num_workers": 1}
    assert len(result.variant.blocks) == 4 and len(result.real.blocks) == 4
    assert not any(n.rule == "variant_not_served" for n in d.notes)
    assert loader.num_workers == 0  # the user's loader: as it was
