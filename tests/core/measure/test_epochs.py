"""The pair on the loop's own epochs (``EpochPair``): its A B B A order, the epochs a
``--steps`` asks for, and what counts as enough (issue 36)."""

from __future__ import annotations

import pytest

from loadeval_nb.core.measure.epochs import EPOCHS, MIN_EPOCHS, EpochPair, pair_epochs


class Side:
    """Stands for a side's wrapper: each ``iter()`` one epoch of ``n`` items."""

    warmup = 1

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n, self.closed = name, n, False
        self.log_settings: dict = {}

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return iter([self.name] * self.n)

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("steps", "n", "epochs"),
    [
        (200, 32, EPOCHS),  # the default: 4 a side, the pass as long as a child per side
        (300, 32, 20),  # 10 whole epochs a side hold 300 steps
        (160, 32, 10),
        (64, 32, EPOCHS),  # never fewer than 4 a side
        ("auto", 32, EPOCHS),
        (200, 0, EPOCHS),
        (True, 32, EPOCHS),  # a bool is no number of steps
    ],
)
def test_steps_ask_for_whole_epochs_a_side(steps, n, epochs):
    assert pair_epochs(steps, n) == epochs


def test_the_loops_epochs_alternate_a_b_b_a_and_each_is_whole():
    real, ideal = Side("real", 3), Side("ideal", 3)
    pair = EpochPair(real, ideal, epochs=10)  # type: ignore[arg-type]
    assert len(pair) == 3
    # each side's run log says its blocks are the loop's epochs (the verdict reads it)
    assert (
        real.log_settings
        == ideal.log_settings
        == {"epoch_pair": {"epochs": 10, "order": "ABBA"}, "method": "epochs"}
    )
    seen = []
    while not pair.last:
        epoch = list(iter(pair))
        assert len(set(epoch)) == 1 and len(epoch) == 3
        seen.append(epoch[0])
    assert seen == ["real", "ideal", "ideal", "real"] * 2 + ["real", "ideal"]
    assert pair.completed == {"real": 5, "ideal": 5} and pair.enough
    pair.close()
    assert real.closed and ideal.closed


def test_an_epoch_left_inside_the_warm_up_does_not_count():
    pair = EpochPair(Side("real", 3), Side("ideal", 3))  # type: ignore[arg-type]
    it = iter(pair)
    next(it)
    assert pair.block_now == ("real", 1)
    it.close()  # the loop broke out of its epoch within the warm-up (a glance)
    assert pair.block_now is None and pair.completed == {"real": 0, "ideal": 0}
    for _ in range(MIN_EPOCHS - 1):
        list(iter(pair))
    # 3 epochs ran whole (ideal, ideal, real): one of real's, two of ideal's: too few
    assert pair.completed == {"real": 1, "ideal": 2} and not pair.enough


def test_an_epoch_left_past_the_warm_up_is_the_loops_own_and_counts():
    # a loop with a step limit an epoch (20 of 32 batches): each epoch is its own length
    pair = EpochPair(Side("real", 5), Side("ideal", 5))  # type: ignore[arg-type]
    for _ in range(MIN_EPOCHS):
        it = iter(pair)
        next(it), next(it), next(it)  # past the warm-up of 1
        it.close()
    assert pair.completed == {"real": 2, "ideal": 2} and pair.enough


@pytest.mark.parametrize(("steps", "n", "epochs"), [(200, 32, 12), (300, 32, 30), (64, 32, 12)])
def test_with_a_variant_whole_epochs_a_side_for_three_sides(steps, n, epochs):
    assert pair_epochs(steps, n, 3) == epochs


def test_a_variant_is_a_third_side_a_b_c_c_b_a_and_closed_with_the_others():
    real, ideal, variant = Side("real", 2), Side("ideal", 2), Side("variant", 2)
    pair = EpochPair(
        real,  # type: ignore[arg-type]
        ideal,  # type: ignore[arg-type]
        epochs=12,
        variant=variant,  # type: ignore[arg-type]
        settings={"num_workers": 4},
    )
    # its run log says what it changed, and every log the order of the loop's epochs
    assert variant.log_settings == {
        "variant": {"num_workers": 4},
        "epoch_pair": {"epochs": 12, "order": "ABCCBA"},
        "method": "epochs",
    }
    assert real.log_settings == {
        "epoch_pair": {"epochs": 12, "order": "ABCCBA"},
        "method": "epochs",
    }
    seen = []
    while not pair.last:
        seen.append(list(iter(pair))[0])
    assert seen == ["real", "ideal", "variant", "variant", "ideal", "real"] * 2
    assert pair.completed == {"real": 4, "ideal": 4, "variant": 4} and pair.enough
    pair.close()
    assert real.closed and ideal.closed and variant.closed
