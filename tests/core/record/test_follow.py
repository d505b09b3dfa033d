"""Following a run log while an evaluator in this process writes it (as another process
would): the follower reads what each epoch's end wrote, the document and the journal
lines appended since, and tells when the log holds the whole run. Clocks are injected:
every step time is exact."""

from __future__ import annotations

import json
import os
import time

import pytest

from loadeval_nb import LoaderEvaluator, load_run
from loadeval_nb.core.record import journal
from loadeval_nb.core.record.follow import FolderFollower, RunFollower, looks_final, parse_log_name
from loadeval_nb.core.record.lognames import ARMS, log_name


@pytest.fixture
def journaled(monkeypatch):
    """Every epoch after the first is appended to the journal (a whole rewrite never pays
    for itself), as in a long run."""
    monkeypatch.setattr(journal, "FULL_WRITE_SHARE", 1e-15)


def epoch(ev, clock, step_ns, n):
    """One epoch of ``n`` steps, each ``step_ns`` long on the fake clock."""
    for _ in ev:
        clock.advance(step_ns)
        n -= 1
        if not n:
            break


def test_the_follower_reads_each_epoch_as_its_end_writes_it(tmp_path, clock, journaled):
    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(
        list(range(10)), metrics_file=path, clock=clock, sample_interval_s=None, warmup=1
    )
    f = RunFollower(path)
    assert f.steps_since((0, 0)) == ([], (0, 0)) and not f.exists and not f.final
    it = iter(ev)
    for _ in range(4):
        next(it)
        clock.advance(1_000)
    assert f.steps_since((0, 0)) == ([], (0, 0))  # mid-epoch: nothing written yet
    for _ in it:
        clock.advance(1_000)
    steps, cursor = f.steps_since((0, 0))
    # the first step's end is the next step's start: 10 steps of exactly 1 us
    assert steps == [1_000] * 10 and cursor == (0, 10)
    assert f.final and not os.path.exists(path + ".journal")

    epoch(ev, clock, 2_000, 10)  # appended to the journal, the document left alone
    assert os.path.exists(path + ".journal")
    doc_steps = len(json.load(open(path))["steps"]["step_ns"])
    more, cursor2 = f.steps_since(cursor)
    assert doc_steps == 10 and more == [2_000] * 10 and cursor2 == (0, 20)
    assert not f.final  # a journal beside the document: not folded yet

    epoch(ev, clock, 3_000, 10)
    more, cursor3 = f.steps_since(cursor2)
    assert more == [3_000] * 10 and cursor3 == (0, 30)
    assert f.steps_since(cursor3) == ([], cursor3)  # nothing new: nothing read

    ev.close()  # the journal folded into the document
    assert f.steps_since(cursor3) == ([], cursor3)
    assert f.final and f.to_run().step_ns == load_run(path).step_ns == ev.to_run().step_ns
    assert f.total_steps == 30


class Ticking:
    """A fake clock that moves 1 ns at every read: starting an epoch takes time."""

    def __init__(self) -> None:
        self.t = 1_000_000

    def __call__(self) -> int:
        self.t += 1
        return self.t

    def advance(self, ns: int) -> None:
        self.t += ns


def test_the_cursor_counts_the_loader_s_starts(tmp_path, journaled):
    """An epoch that began with an iter() of its own (set-up time in its record) starts
    the loader: the cursor's first number counts those, as the live chart marks them."""
    clock = Ticking()
    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(list(range(10)), metrics_file=path, clock=clock, sample_interval_s=None)
    f = RunFollower(path)
    cursors = []
    cursor = (0, 0)
    for _ in range(3):
        epoch(ev, clock, 1_000, 10)
        _, cursor = f.steps_since(cursor)
        cursors.append(cursor)
    assert cursors == [(0, 10), (1, 10), (2, 10)]
    # read in one go: the last start is where the cursor says
    assert f.steps_since((0, 0))[1] == (2, 10)
    assert f.to_run().step_ns == ev.to_run().step_ns
    ev.close()


def test_only_the_new_journal_lines_are_read(tmp_path, clock, journaled, monkeypatch):
    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(list(range(5)), metrics_file=path, clock=clock, sample_interval_s=None)
    f = RunFollower(path)
    epoch(ev, clock, 1_000, 5)
    f.refresh()
    merged: list[int] = []
    real = journal.merge_journal_lines

    def counting(doc, lines):
        merged.append(len(lines))
        return real(doc, lines)

    monkeypatch.setattr("loadeval_nb.core.record.follow.merge_journal_lines", counting)
    for _ in range(3):
        epoch(ev, clock, 1_000, 5)
        assert f.refresh()
    assert merged == [1, 1, 1]  # one line each time, never the journal again
    assert f.to_run().n_steps == 20
    ev.close()


def test_a_line_being_written_waits_for_its_end(tmp_path, clock, journaled):
    path = str(tmp_path / "run.json")
    ev = LoaderEvaluator(list(range(5)), metrics_file=path, clock=clock, sample_interval_s=None)
    epoch(ev, clock, 1_000, 5)
    epoch(ev, clock, 1_000, 5)
    jpath = path + ".journal"
    text = open(jpath).read()
    with open(jpath, "w") as fh:  # the writer is half-way through its line
        fh.write(text[: len(text) // 2])
    f = RunFollower(path)
    assert f.steps_since((0, 0))[0] == [1_000] * 5
    with open(jpath, "w") as fh:  # the same file, now whole
        fh.write(text)
    assert f.steps_since((0, 5))[0] == [1_000] * 5
    ev.close()


def test_interleaved_blocks_are_one_start_and_final_with_the_plan(tmp_path, clock):
    paths = {s: str(tmp_path / f"pair-{s}.json") for s in ("real", "ideal")}
    ev = LoaderEvaluator(
        list(range(200)),
        mode="pair",
        steps=60,
        warmup=4,
        num_cached_batches=4,
        sample_interval_s=None,
        metrics_files=paths,
        clock=clock,
    )
    real, ideal = RunFollower(paths["real"]), RunFollower(paths["ideal"])
    cursors = {"real": (0, 0), "ideal": (0, 0)}
    seen = {"real": 0, "ideal": 0}
    finals = []
    for k, _ in enumerate(ev):
        clock.advance(1_000)
        if k % 7 == 0:
            for name, f in (("real", real), ("ideal", ideal)):
                steps, cursors[name] = f.steps_since(cursors[name])
                seen[name] += len(steps)
            finals.append((real.final, ideal.final))
    ev.close()
    for name, f in (("real", real), ("ideal", ideal)):
        steps, cursors[name] = f.steps_since(cursors[name])
        seen[name] += len(steps)
        # one summary per block; the pass started the loader once
        assert cursors[name][0] == 0 and f.to_run().n_steps == seen[name]
        assert len(f.to_run().blocks) == ev.plan.blocks and f.final
    assert seen["real"] > 0 and seen["ideal"] > 0
    assert not any(a and b for a, b in finals[:-1])  # not final before the last blocks


def test_looks_final_by_what_the_log_holds():
    from loadeval_nb import Run

    def run(status="complete", blocks=1, **settings):
        return Run(
            mode="log",
            start_ns=[0],
            step_ns=[1],
            status=status,
            blocks=[{"status": status, "steps": 1, "setup_ns": 0}] * blocks,
            settings=settings,
        )

    assert looks_final(run())
    assert not looks_final(run(), journal_waiting=True)
    assert not looks_final(run(blocks=0))
    assert looks_final(run("stopped", interleaved={"blocks": 4}))
    assert not looks_final(run(blocks=3, interleaved={"blocks": 4}))
    assert looks_final(run(blocks=4, interleaved={"blocks": 4}))
    assert not looks_final(run(auto_stop={"rel": 0.05}))


def test_log_names_by_job_side_and_rank():
    a = parse_log_name("loadeval-20250101-120000-train-real-rank3.json")
    assert (a.job, a.side, a.rank, a.series) == (
        "loadeval-20250101-120000-train",
        "real",
        3,
        "real r3",
    )
    b = parse_log_name("loadeval-20250101-120000-ideal-2.json")
    assert (b.job, b.side, b.rank, b.series) == (
        "loadeval-20250101-120000-2",
        "ideal",
        None,
        "ideal",
    )
    assert parse_log_name("history.json") is None and parse_log_name("x-real.json.journal") is None
    c = parse_log_name("loadeval-20250101-120000-train-contended-rank0.json")
    assert (c.job, c.side, c.rank, c.series) == (
        "loadeval-20250101-120000-train",
        "contended",
        0,
        "contended r0",
    )
    assert parse_log_name("loadeval-20250101-120000-train-proof.json") is None


@pytest.mark.parametrize("rank", [None, 0, 3])
@pytest.mark.parametrize("arm", ARMS)
def test_one_grammar_reads_what_it_writes(arm, rank):
    # the runner writes the names and the follower, the ranks' gatherer and the watch read
    # them: every arm, with a rank or without, and a label with what a name cannot hold
    name = log_name("20250101-120000", "my run/2", arm, rank)
    assert "/" not in name and " " not in name
    got = parse_log_name(name)
    assert got is not None and (got.job, got.side, got.rank) == (
        "loadeval-20250101-120000-my_run_2",
        arm,
        rank,
    )
    again = parse_log_name(name.replace(".json", "-2.json"))  # a name already taken
    assert again is not None and again.job == got.job + "-2" and again.side == arm


def _write(path, steps=3, blocks=None):
    from loadeval_nb import Run

    Run(
        mode="log",
        start_ns=list(range(steps)),
        step_ns=[1_000] * steps,
        blocks=[{"status": "complete", "steps": steps, "setup_ns": 0}],
        settings={"interleaved": {"blocks": blocks}} if blocks else {},
    ).save(str(path))


def test_the_folder_follower_takes_the_new_job_and_leaves_the_old_alone(tmp_path):
    old = "loadeval-20250101-100000-train"
    for side in ("real", "ideal"):
        for rank in (0, 1):
            _write(tmp_path / f"{old}-{side}-rank{rank}.json")
    past = time.time() - 3600
    for p in tmp_path.iterdir():
        os.utime(p, (past, past))
    folder = FolderFollower(str(tmp_path))
    assert not folder.poll() and folder.job is None and folder.older_jobs == 1

    new = "loadeval-20250101-110000-train"
    _write(tmp_path / f"{new}-real-rank0.json", blocks=2)
    _write(tmp_path / f"{new}-real-rank1.json", blocks=2)
    assert folder.poll() and folder.job == new
    assert list(folder.followers) == ["real r0", "real r1"] and folder.ranks == [0, 1]
    assert not folder.finished()  # no ideal side yet, and one block of two
    for rank in (0, 1):
        _write(tmp_path / f"{new}-ideal-rank{rank}.json", blocks=2)
    assert folder.poll() and list(folder.followers) == [
        "real r0",
        "ideal r0",
        "real r1",
        "ideal r1",
    ]
    assert not folder.finished()
    for side in ("real", "ideal"):
        for rank in (0, 1):
            from loadeval_nb import Run

            Run(
                mode="log",
                start_ns=[0, 1],
                step_ns=[1, 1],
                block=[0, 1],
                blocks=[{"status": "complete", "steps": 1, "setup_ns": 0}] * 2,
                settings={"interleaved": {"blocks": 2}},
            ).save(str(tmp_path / f"{new}-{side}-rank{rank}.json"))
    assert not folder.poll() and folder.finished()
    # a newer job appearing later does not take the followed one's place
    _write(tmp_path / "loadeval-20250101-120000-train-real-rank0.json")
    folder.poll()
    assert folder.job == new


def test_the_contended_arm_is_followed_and_waited_for(tmp_path):
    job = "loadeval-20250101-110000-train"
    folder = FolderFollower(str(tmp_path), since_unix=time.time() - 60)
    for arm in ("real", "ideal"):
        _write(tmp_path / f"{job}-{arm}.json")
    _write(tmp_path / f"{job}-contended.json", blocks=2)  # one block of its two yet
    assert folder.poll() and list(folder.followers) == ["real", "ideal", "contended"]
    assert not folder.finished()  # every arm the pass ran holds its whole run first
    _write(tmp_path / f"{job}-contended.json")
    assert folder.finished()


def test_a_prefix_follows_one_run_whenever_it_was_written(tmp_path):
    _write(tmp_path / "loadeval-1-a-real.json")
    _write(tmp_path / "loadeval-1-b-real.json")
    past = time.time() - 3600
    for p in tmp_path.iterdir():
        os.utime(p, (past, past))
    folder = FolderFollower(str(tmp_path), prefix="loadeval-1-b-")
    assert folder.poll() and list(folder.followers) == ["real"]
    assert not folder.finished()
    _write(tmp_path / "loadeval-1-b-ideal.json")
    assert folder.poll() and folder.finished()


def test_a_folder_that_goes_away_is_no_error(tmp_path):
    folder = FolderFollower(str(tmp_path / "gone"), prefix="x")
    assert not folder.poll() and not folder.finished()
    f = RunFollower(str(tmp_path / "gone" / "x-real.json"))
    assert not f.refresh() and f.steps_since((0, 0)) == ([], (0, 0))


def test_a_job_done_before_the_watch_is_named_with_how_it_ended(tmp_path):
    # a watch over a folder whose job had already failed said "no job wrote run logs"
    from loadeval_nb import Run

    def write(job: str, side: str, status: str) -> None:
        path = tmp_path / f"loadeval-{job}-train-{side}.json"
        Run(mode="log" if side == "real" else "replay", start_ns=[0], step_ns=[1],
            status=status).save(str(path))  # fmt: skip
        past = time.time() - 3600
        os.utime(path, (past, past))

    write("20260101-100000", "real", "complete")
    write("20260101-100000", "ideal", "complete")
    write("20260101-110000", "real", "stopped")
    write("20260101-110000", "ideal", "not-started")
    f = FolderFollower(str(tmp_path))
    assert not f.poll() and f.job is None
    assert f.older_jobs == 2 and f.newest_older == "loadeval-20260101-110000-train"
    state = f.job_state(f.newest_older)
    assert state.startswith("ended before its pair was measured")
    assert "its ideal run never started" in state and "failed or was stopped" in state
    assert f.job_state("loadeval-20260101-100000-train") == "was measured"
