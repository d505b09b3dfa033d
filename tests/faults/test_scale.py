"""Scale: what grew with the number of steps beyond reason (issue 12, item 1)."""

from __future__ import annotations

import numpy as np
import pytest

from loadeval_nb import Run, diagnose
from loadeval_nb.core._stats import _block_means
from loadeval_nb.verdict import INPUT_BOUND


def run_of(n, mean_ms, mode, seed):
    rng = np.random.default_rng(seed)
    step = (rng.gamma(4, mean_ms / 4, n) * 1e6).astype(np.int64).tolist()
    start = np.concatenate(([0], np.cumsum(step)[:-1])).tolist()
    wait = [s // 3 for s in step] if mode == "log" else None
    return Run(mode=mode, start_ns=start, step_ns=step, wait_ns=wait, warmup=10)


@pytest.mark.slow
def test_a_million_step_pair_is_diagnosed():
    # the bootstrap used to hold 2,000 x steps resample indices: MemoryError (14.9 GiB)
    d = diagnose(run_of(1_000_000, 20.0, "log", 1), run_of(1_000_000, 12.0, "replay", 2))
    assert d.verdict == INPUT_BOUND and d.real_steady_steps == 999_990
    lo, hi = d.speedup_ci
    assert lo < d.speedup < hi and hi - lo < 0.02


def test_block_means_never_hold_a_resample_of_indices(monkeypatch):
    # the draws go in chunks whose size does not grow with the resamples
    import loadeval_nb.core._stats as stats

    class Spy:
        def __init__(self):
            self.rng, self.sizes = np.random.default_rng(0), []

        def integers(self, lo, hi, size):
            self.sizes.append(int(np.prod(size)))
            return self.rng.integers(lo, hi, size=size)

    monkeypatch.setattr(stats, "_CHUNK", 10_000)
    spy = Spy()
    means = _block_means(np.arange(100_000, dtype=float), 2000, spy)
    assert means.shape == (2000,) and max(spy.sizes) <= 10_000 and len(spy.sizes) > 1
    assert abs(means.mean() - 49_999.5) < 500


# ---- metrics_file: writing grows with what is new (item 11) ---------------------------------


def epochs_of(ev, n_epochs, steps):
    for _ in range(n_epochs):
        for _batch in ev:
            pass


def test_metrics_file_appends_new_epochs_only(tmp_path):
    import json
    import os

    from loadeval_nb import LoaderEvaluator, load_run

    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(list(range(200)), mode="log", metrics_file=path, sample_interval_s=None)
    epochs_of(ev, 60, 200)
    journal = path + ".journal"
    assert os.path.exists(journal), "tiny epochs should not rewrite the whole log each time"
    with open(journal) as f:
        lines = [json.loads(x) for x in f]
    # every line holds the epochs since the last write: one epoch, 200 steps, never the run
    assert lines and all(len(x["steps"]["step_ns"]) == 200 for x in lines)
    assert len(json.load(open(path))["steps"]["step_ns"]) + 200 * len(lines) == 60 * 200
    live = ev.to_run()
    read = load_run(path)  # the document and its journal, as one run
    assert read.step_ns == live.step_ns and read.epoch == live.epoch and read.n_steps == 12_000
    assert read.epochs == live.epochs and read.status == "complete"
    ev.close()  # one document again, no journal left
    assert not os.path.exists(journal)
    assert json.load(open(path))["total_batches"] == 12_000
    assert load_run(path).step_ns == live.step_ns


def test_a_journal_cut_short_by_a_crash_keeps_the_whole_lines(tmp_path):
    from loadeval_nb import LoaderEvaluator, load_run

    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(list(range(100)), mode="log", metrics_file=path, sample_interval_s=None)
    epochs_of(ev, 30, 100)
    whole = ev.to_run()
    journal = path + ".journal"
    with open(journal) as f:
        text = f.read()
    n_lines = text.count("\n")
    assert n_lines >= 2
    with open(journal, "w") as f:  # the process died half-way through its last append
        f.write(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
    read = load_run(path)
    assert read.n_steps == whole.n_steps - 100 and read.step_ns == whole.step_ns[:-100]
    ev.close()
