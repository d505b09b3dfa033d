"""The dashboard's part of issue 20, item 4: the start-up step streamed apart from the
steps' line, the sweep box prefilled with what the verdict card recommends, plain text in
words."""

from __future__ import annotations

import numpy as np
import pytest

from loadeval_nb import LoaderEvaluator, Run, diagnose
from loadeval_nb.core._shared import Action
from loadeval_nb.core.explore import PairResult
from loadeval_nb.core.ranks import RankResult, RanksResult
from loadeval_nb.core.ranks.skew import ranks_result
from loadeval_nb.core.verdict import Fact, Facts
from loadeval_nb.widgets import Dashboard, RerunPanel, ranks_view
from loadeval_nb.widgets._panel import advised_sweep, sweep_default
from loadeval_nb.widgets._pusher import Pusher, startup_positions

MS = 1_000_000


def counter(step):
    t = [0]

    def clock():
        t[0] += step
        return t[0]

    return clock


# ---- the start-up step ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "n", "want"),
    [
        ((0, 0), (0, 5), 5, [0]),  # the run's first read: its first step
        ((0, 5), (0, 9), 4, []),  # the same epoch goes on
        ((0, 5), (1, 3), 7, [4]),  # epoch 0's last 4 steps, then epoch 1's first 3
        ((0, 0), (1, 2), 6, [0, 4]),  # all of epoch 0 (4 steps), epoch 1's first 2
        ((0, 7), (1, 0), 3, []),  # epoch 0 closed, epoch 1 not begun
        ((1, 0), (1, 0), 0, []),  # nothing new
    ],
)
def test_which_steps_read_since_a_cursor_open_an_epoch(before, after, n, want):
    assert startup_positions(before, after, n) == want


def test_the_pusher_streams_the_start_up_to_its_marker_not_the_line():
    dash = Dashboard(loader_name="x", steps_per_run=8, live=False)
    ev = LoaderEvaluator(list(range(8)), sample_interval_s=None, clock=counter(MS))
    it = iter(ev)
    for _ in range(4):
        next(it)
    pusher = Pusher(dash, "real", ev, "Run 1 of 2", clock=counter(1.0), stamp=counter(1))
    pusher.push()  # the first 3 steps are done (a step ends when the next one starts)
    assert dash.startup_src["real"].data["step"] == [0]
    assert dash.startup_src["real"].data["text"][0].startswith("real first step ")
    assert dash.step_src["real"].data["step"] == [1, 2]
    for _ in it:
        pass
    pusher.push()
    assert dash.step_src["real"].data["step"] == list(range(1, 8))
    assert dash.startup_src["real"].data["step"] == [0]  # once
    # the next run's first push replaces the markers the previous one left
    ev2 = LoaderEvaluator(list(range(3)), sample_interval_s=None, clock=counter(MS))
    list(ev2)
    Pusher(dash, "real", ev2, "Run 1 of 2", clock=counter(1.0), stamp=counter(1)).push()
    assert dash.startup_src["real"].data["step"] == [0]
    # a new pair clears them with the lines
    dash.pair_starting("#2")
    assert dash.startup_src["real"].data["step"] == [] and dash.step_src["real"].data["step"] == []
    dash.close()


# ---- the sweep box --------------------------------------------------------------------------


def _facts_advising(spec):
    pieces = ("Try fewer intra-op threads (", Action("sweep", spec), ").")
    return Facts(
        kind="verdict",
        title="Verdict",
        headline="x.",
        facts=(Fact.of("advice", "what to do", pieces),),
    )


def test_the_advised_sweep_comes_from_the_card_s_action_within_the_cores():
    spec = "num_workers=0,1,2; num_threads=1,2"
    assert advised_sweep(_facts_advising(spec), cores=2) == spec
    assert advised_sweep(_facts_advising(spec), cores=1) == "num_workers=0,1; num_threads=1"
    assert advised_sweep(_facts_advising("num_workers=4,8"), cores=2) == "num_workers=4"
    no_sweep = Facts(
        kind="verdict",
        title="Verdict",
        headline="x.",
        facts=(Fact.of("advice", "what to do", ("Run more steps (", Action("steps", 400), ").")),),
    )
    assert advised_sweep(no_sweep, cores=2) is None


def test_the_default_workers_sweep_never_offers_more_workers_than_cores():
    assert sweep_default(0, 2) == "0,1,2"
    assert sweep_default(2, 2) == "0,1,2"  # not 4 on 2 cores
    assert sweep_default(4, 2) == "0,2,4"  # the current setting stays: the reference
    assert sweep_default(4, 16) == "0,2,4,8"


def _threads_pair():
    """A pair whose card advises a threads sweep: num_workers=0, steps three times the
    ideal ones while the loop hardly waits."""
    rng = np.random.default_rng(0)
    n = 60
    step = [int((30 + rng.normal(0, 0.1)) * MS) for _ in range(n)]
    real = Run(
        mode="log",
        start_ns=[sum(step[:i]) for i in range(n)],
        step_ns=step,
        wait_ns=[int(0.5 * MS)] * n,
        samples=[8] * n,
        loader_settings={"num_workers": 0},
    )
    istep = [int((10 + rng.normal(0, 0.1)) * MS) for _ in range(n)]
    ideal = Run(mode="replay", start_ns=[sum(istep[:i]) for i in range(n)], step_ns=istep)
    d = diagnose(real, ideal)
    return PairResult(label="#1 as is", loader_settings={"num_workers": 0}, diagnosis=d)


def test_the_panel_s_sweep_box_offers_what_the_card_recommends():
    dash = Dashboard(loader_name="x", steps_per_run=60, live=False)
    result = _threads_pair()
    dash.pair_done(result)
    want = advised_sweep(result.diagnosis.facts())
    assert want is not None and "num_threads=1" in want  # the card's threads sweep
    panel = RerunPanel({"num_workers": 0}, 20, lambda changes, cache: None, on_sweep=print)
    assert panel.sweep_spec.value.startswith("num_workers=")  # before: the default
    dash.set_panel(panel.widget)
    assert panel.sweep_spec.value == want
    # a sweep the user typed is theirs: a later pair does not overwrite it
    panel.sweep_spec.value = "pin_memory=False,True"
    dash.pair_done(result)
    assert panel.sweep_spec.value == "pin_memory=False,True"
    dash.close()


def test_a_card_without_a_sweep_leaves_the_default_workers_sweep():
    real = Run(mode="log", start_ns=list(range(30)), step_ns=[20 * MS] * 30)
    ideal = Run(mode="replay", start_ns=list(range(30)), step_ns=[10 * MS] * 30)
    dash = Dashboard(loader_name="x", steps_per_run=30, live=False)
    dash.pair_done(PairResult(label="#1", loader_settings={}, diagnosis=diagnose(real, ideal)))
    panel = RerunPanel({"num_workers": 2}, 20, lambda changes, cache: None, on_sweep=print)
    default = panel.sweep_spec.value
    dash.set_panel(panel.widget)
    assert dash.advised_sweep is None and panel.sweep_spec.value == default
    dash.close()


# ---- plain text in words --------------------------------------------------------------------


def test_the_ranks_view_s_plain_text_is_the_report_in_words():
    real = Run(mode="log", start_ns=list(range(30)), step_ns=[20 * MS] * 30)
    ideal = Run(mode="replay", start_ns=list(range(30)), step_ns=[10 * MS] * 30)
    report: RanksResult = ranks_result(
        [RankResult(r, "h", real.to_dict(), ideal.to_dict()) for r in range(2)]
    )
    view = ranks_view(report, live=False)
    text = view._repr_mimebundle_()["text/plain"]
    assert text == report.text() and "<" not in text and "VBox" not in text


def test_the_dashboard_s_plain_text_is_words():
    dash = Dashboard(loader_name="x", steps_per_run=30, live=False)
    text = dash.mimebundle()["text/plain"]
    assert text and "<" not in text and "VBox" not in text
    dash.close()
