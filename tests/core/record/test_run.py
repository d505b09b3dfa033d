"""A run as its log keeps it."""

from __future__ import annotations

from loadeval_nb import Run


def test_a_run_says_its_method_from_one_place_old_logs_too():
    """``Run.method``: the log's ``settings.method``, or, in a log written before it, the
    plan kept there (issue 47: the verdict reads the method from one place)."""
    from loadeval_nb.core.record.run import METHODS

    def run(**settings):
        return Run(mode="log", start_ns=[0, 1], step_ns=[1, 1], settings=settings)

    assert run(method="epochs").method == "epochs"
    assert run(interleaved={"blocks": 8}).method == "blocks"  # an older log
    assert run(epoch_pair={"epochs": 8, "order": "ABBA"}).method == "epochs"
    assert run().method == "runs" and run(method="nonsense").method == "runs"
    assert run(interleaved={"blocks": 8}).plan == {"blocks": 8} and run().plan is None
    assert set(METHODS) == {"blocks", "epochs", "runs"}
