"""Run logs and the history file under faults: a folder removed, a full disk, a failed write, a
process killed after many epochs, two threads, hostile files (nested, a byte order mark, a
pipe, out-of-range fields, a damaged journal line), and the bad-input catalogue's log and
history cases.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any, Optional

import pytest

from loadeval_nb import (
    LoaderEvaluator,
    LoadEvalError,
    RunSettings,
    load_run,
)
from loadeval_nb.core._shared import HistoryRow, load_history, save_history
from loadeval_nb.errors import RunLogError
from tests.catalogue import (
    Boom,
    InputUser,
    User,
    case_id,
    check_bad_input,
    check_more_bad_input,
    log_at,
    logged,
    nothing_left,
    run_of,
)

# the added catalogue's cases ran with these around each
pytestmark = pytest.mark.usefixtures("earlier_children", "sigint_put_back")

KILLED_MID_EPOCH = textwrap.dedent(
    """
    import sys, time
    from loadeval_nb import LoaderEvaluator
    ev = LoaderEvaluator(list(range(50)), metrics_file=sys.argv[1], sample_interval_s=None)
    for epoch in range(1000):
        for k, _ in enumerate(ev):
            if epoch == 120 and k == 20:
                print("in epoch 120", flush=True)
                time.sleep(60)  # killed here, 20 steps into an epoch
    """
)


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)``: a tmpfs of ``size`` ("16k") mounted in a folder of the case's own;
    all are unmounted afterwards. Skips the case where no tmpfs can be mounted."""
    mounted: list[str] = []

    def mount(size: str) -> str:
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as e:
            pytest.skip(f"cannot mount a tmpfs here ({e}); the full-disk cases need one")
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
            pytest.skip(f"cannot mount a tmpfs here ({why}): it needs root and CAP_SYS_ADMIN")
        mounted.append(str(folder))
        return str(folder)

    try:
        yield mount
    finally:
        for folder in mounted:
            if subprocess.run(["umount", folder], capture_output=True, timeout=30).returncode:
                subprocess.run(["umount", "-l", folder], capture_output=True, timeout=30)


@pytest.fixture
def tiny_disk(tmpfs):
    """A full disk soon: a tmpfs of 16 KiB."""
    return tmpfs("16k")


def fill_but_one_page(folder: str) -> str:
    """Fill the disk with a file of zeros, then free one page (4 KiB) of it."""
    ballast = os.path.join(folder, "ballast")
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
    size = 0
    try:
        while True:
            os.write(fd, bytes(4096))
            size += 4096
    except OSError:
        pass  # full
    finally:
        os.ftruncate(fd, max(size - 4096, 0))
        os.close(fd)
    return ballast


def history_at(tmp: str, name: str, doc: Any = None, text: Optional[str] = None) -> str:
    p = os.path.join(tmp, name)
    with open(p, "w", encoding="utf-8") as f:
        f.write(text if text is not None else json.dumps(doc))
    return p


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def a_history(tmp: str, name: str = "h.json") -> str:
    rows = [HistoryRow(label="#1", num_workers=2, real_step_s=0.012, verdict="input-bound")]
    return save_history(rows, os.path.join(tmp, name))


HISTORY = {"kind": "loadeval_nb.history", "schema_version": 1}


def log_bytes(u: User, name: str, data: bytes) -> str:
    p = os.path.join(u.tmp, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


KILLED = textwrap.dedent(
    """
    import sys, time
    from loadeval_nb import LoaderEvaluator
    ev = LoaderEvaluator(list(range(50)), metrics_file=sys.argv[1], sample_interval_s=None)
    for epoch in range(1000):
        for _ in ev:
            pass
        print(epoch, flush=True)
        if epoch == 40:
            time.sleep(60)  # killed here
    """
)


def _journaled(tmp_path, n_epochs: int = 6) -> str:
    path = str(tmp_path / "r.json")
    ev = LoaderEvaluator(list(range(10)), metrics_file=path, sample_interval_s=None)
    for _ in range(n_epochs):
        for _ in ev:
            pass
    # a crash before close(): the document plus its journal is what is on disk
    assert os.path.exists(path + ".journal"), "the case needs journal lines"
    ev._writer = None  # what a killed process leaves: no final rewrite
    return path


def epochs_of(ev, n_epochs, steps):
    for _ in range(n_epochs):
        for _batch in ev:
            pass


def test_deeply_nested_json(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RunLogError, match="nested too deeply to be a run log"):
        load_run(p)


def test_a_byte_order_mark_is_read(tmp_path):
    p = run_of(10).save(tmp_path / "r.json")
    raw = open(p, "rb").read()
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + raw)
    assert load_run(tmp_path / "bom.json").n_steps == 20


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    with pytest.raises(RunLogError, match="is not a regular file"):
        load_run(p)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda d: d["steps"].__setitem__("step_ns", [-1] * 20), "negative step or wait times"),
        (lambda d: d.__setitem__("mode", "turbo"), "its mode is 'turbo'"),
        (lambda d: d["steps"].__setitem__("complete", ["false"] * 20), '"false" is not'),
    ],
    ids=["negative", "mode", "complete-string"],
)
def test_out_of_range_fields(tmp_path, change, reason):
    doc = run_of(10).to_dict()
    change(doc)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(RunLogError, match=f"is a damaged run log \\(.*{reason}"):
        load_run(p)


@pytest.mark.slow
def test_a_process_killed_mid_epoch_keeps_every_finished_epoch(user):
    path = os.path.join(user.tmp, "run.json")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MID_EPOCH, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "in epoch 120"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    # the epochs since the last whole rewrite are in the journal (which epoch's end rewrote
    # the log last depends on the machine's speed: not asserted)
    run = load_run(path)  # the document and its journal, as one run
    assert run.n_steps == 120 * 50 and run.block == [e for e in range(120) for _ in range(50)]
    assert all(run.complete) and [e["status"] for e in run.blocks] == ["complete"] * 120
    nothing_left(user.tmp, ("run.json", "run.json.journal"))


def test_two_evaluators_on_two_threads_one_failing_both_logs_load(user, clock):
    errors: dict[str, BaseException] = {}

    def train(name: str, fail: bool) -> None:
        ev = LoaderEvaluator(
            list(range(40)), metrics_file=f"{name}.json", sample_interval_s=None, clock=clock
        )
        try:
            for epoch in range(5):
                for k, _ in enumerate(ev):
                    if fail and epoch == 2 and k == 3:
                        raise Boom(f"{name} failed")
        except Boom as e:
            errors[name] = e
        finally:
            ev.close()

    threads = [threading.Thread(target=train, args=a) for a in (("a", False), ("b", True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert {k: str(v) for k, v in errors.items()} == {"b": "b failed"}
    a = logged("a.json", 200, "complete")
    b = logged("b.json", 2 * 40 + 4, "stopped")
    assert [e["status"] for e in a.blocks] == ["complete"] * 5
    assert [e["status"] for e in b.blocks] == ["complete", "complete", "stopped"]
    nothing_left(user.tmp, ("a.json", "b.json"))


def test_a_metrics_folder_removed_in_the_first_epoch_is_made_again(user, caplog):
    folder = os.path.join(user.tmp, "gone")
    os.makedirs(folder)
    ev = LoaderEvaluator(
        user.loader(), metrics_file=os.path.join(folder, "run.json"), sample_interval_s=None
    )
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for epoch in range(3):
            for k, _ in enumerate(ev):
                if epoch == 0 and k == 2:
                    os.rmdir(folder)
        ev.close()
    assert [r.getMessage() for r in caplog.records] == []  # nothing to say: nothing lost
    logged(os.path.join(folder, "run.json"), 3 * 16, "complete")
    nothing_left(folder, ("run.json",))


def test_a_working_folder_removed_during_the_run_is_said_once(user, caplog):
    # a relative metrics_file in a working folder that is removed: no write can succeed
    work = os.path.join(user.tmp, "work")
    os.makedirs(work)
    os.chdir(work)
    ev = LoaderEvaluator(user.loader(), metrics_file="run.json", sample_interval_s=None)
    try:
        with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
            for epoch in range(5):
                for k, _ in enumerate(ev):
                    if epoch == 0 and k == 2:
                        os.rmdir(work)
            ev.close()
    finally:
        os.chdir(user.tmp)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said  # once, not once per epoch
    assert said[0].startswith("loadeval_nb: could not write run.json (")
    assert said[0].endswith(
        "the run goes on and is kept in memory (to_run(), save_metrics() elsewhere)."
    )
    assert ev.to_run().n_steps == 5 * 16  # kept in memory
    elsewhere = os.path.join(user.tmp, "elsewhere.json")
    assert ev.save_metrics(elsewhere, quiet=True) == elsewhere
    logged(elsewhere, 5 * 16, "complete")
    nothing_left(user.tmp, ("elsewhere.json",))


def test_a_run_log_on_a_full_disk_is_said_once_and_kept_in_memory(user, tiny_disk, caplog):
    path = os.path.join(tiny_disk, "run.json")
    ev = LoaderEvaluator(list(range(2000)), metrics_file=path, sample_interval_s=None)
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for _ in ev:
            pass
        ev.close()  # the epoch's end and close() both fail to write: said once
    assert [r.getMessage() for r in caplog.records] == [
        f"loadeval_nb: could not write {path} ([Errno 28] No space left on device); the run "
        "goes on and is kept in memory (to_run(), save_metrics() elsewhere)."
    ]
    assert ev.to_run().n_steps == 2000
    nothing_left(tiny_disk, ())  # no temporary file, no half-written log
    elsewhere = os.path.join(user.tmp, "elsewhere.json")
    ev.save_metrics(elsewhere, quiet=True)
    logged(elsewhere, 2000, "complete")


def test_a_disk_that_fills_over_many_epochs_keeps_a_loadable_log(user, tiny_disk, caplog):
    path = os.path.join(tiny_disk, "run.json")
    ev = LoaderEvaluator(list(range(100)), metrics_file=path, sample_interval_s=None)
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for _ in range(20):
            for _ in ev:
                pass
        ev.close()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "No space left on device" in said[0], said
    assert ev.to_run().n_steps == 2000
    # what reached the disk (the log and its journal, a last line cut short) loads: the
    # first epochs, whole
    run = load_run(path)
    assert 100 <= run.n_steps < 2000 and run.n_steps % 100 == 0 and all(run.complete)
    assert not [f for f in os.listdir(tiny_disk) if f not in ("run.json", "run.json.journal")]


def test_a_disk_full_for_a_moment_loses_no_journaled_epoch(user, tmpfs, caplog):
    disk = tmpfs("2m")
    path = os.path.join(disk, "run.json")
    batches = list(range(20_000))
    ev = LoaderEvaluator(batches, metrics_file=path, sample_interval_s=None)
    try:
        for _ in ev:  # a long first epoch: its log is written whole, and takes a while
            pass
        del batches[200:]  # then short epochs: appended to the journal
        ballast = fill_but_one_page(disk)
        with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
            for _ in ev:  # its journal line is 6 KiB: cut short at 4 KiB
                pass
        if os.path.getsize(path + ".journal") != 4096:  # pragma: no cover - timing
            pytest.skip("the writer rewrote the whole log instead of appending")
        assert [
            r.getMessage()
            for r in caplog.records
            if "could not write" in r.getMessage() or "could not append" in r.getMessage()
        ]
        os.remove(ballast)  # room again
        for _ in ev:
            pass
        if not os.path.exists(path + ".journal"):  # pragma: no cover - timing
            pytest.skip("the writer rewrote the whole log instead of appending")
        # what a crash now would leave: the log and its journal
        assert load_run(path).n_steps == 20_000 + 200 + 200
    finally:
        ev.close()
    logged(path, 20_400, "complete")


def test_a_log_folder_removed_during_the_run_is_said_and_the_run_goes_on(user, caplog):
    folder = os.path.join(user.tmp, "gone")
    os.makedirs(folder)
    ev = LoaderEvaluator(user.loader(), metrics_file=os.path.join(folder, "run.json"))
    for k, _ in enumerate(ev):
        if k == 2:
            os.rmdir(folder)
            open(folder, "w").close()  # a file where the folder was: the write must fail
    ev.close()
    assert ev.to_run().n_steps == 16  # kept in memory
    assert any("could not write" in r.getMessage() for r in caplog.records)
    os.remove(folder)
    nothing_left(user.tmp, ())


def test_a_failed_write_keeps_the_previous_log(user, monkeypatch, caplog):
    path = os.path.join(user.tmp, "run.json")
    first = LoaderEvaluator(user.loader(), metrics_file=path)
    list(first)
    first.close()
    before = load_run(path).step_ns

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    second = LoaderEvaluator(user.loader(), metrics_file=path)
    monkeypatch.setattr(os, "replace", disk_full)
    list(second)  # its write fails half-way: said, and the previous log stays whole
    second.close()
    monkeypatch.undo()
    assert load_run(path).step_ns == before
    assert any("No space left on device" in r.getMessage() for r in caplog.records)
    nothing_left(user.tmp, ("run.json",))
    second.save_metrics(quiet=True)  # the run was kept in memory: written once there is room
    assert load_run(path).step_ns == second.to_run().step_ns != before


@pytest.mark.slow
def test_a_process_killed_after_many_epochs_keeps_them(user):
    path = os.path.join(user.tmp, "run.json")
    proc = subprocess.Popen([sys.executable, "-c", KILLED, path], stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.strip() == "40":
                break
        proc.kill()
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
    run = load_run(path)  # the document and its journal
    assert run.n_steps == 41 * 50 and max(run.block) == 40
    leftovers = set(os.listdir(user.tmp)) - {"run.json", "run.json.journal"}
    assert not leftovers


def test_a_metrics_file_that_is_a_directory_is_refused_at_construction(tmp_path):
    with pytest.raises(LoadEvalError, match="is a directory; pass a file path"):
        LoaderEvaluator([1, 2], metrics_file=str(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left


def test_a_write_that_fails_half_way_keeps_the_old_file(tmp_path):
    from loadeval_nb.core._files import atomic_open

    target = tmp_path / "log.json"
    target.write_text("old")
    with pytest.raises(OSError):
        with atomic_open(target) as f:
            f.write("half of the new")
            raise OSError("disk full")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["log.json"]


def test_two_threads_ending_epochs_write_a_loadable_log(tmp_path):
    path = tmp_path / "r.json"
    for _ in range(10):
        ev = LoaderEvaluator(list(range(40)), metrics_file=str(path), sample_interval_s=None)

        def epochs(ev: LoaderEvaluator = ev) -> None:
            for _ in range(5):
                for _ in ev:
                    pass

        threads = [threading.Thread(target=epochs) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ev.close()
        assert load_run(path).n_steps == 400
    assert sorted(os.listdir(tmp_path)) == ["r.json"]  # no temporary file left


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: {
            **line,
            "steps": {**line["steps"], "step_ns": [-5] * len(line["steps"]["step_ns"])},
        },
        lambda line: {**line, "blocks": "garbage"},
        lambda line: "not json at all",
    ],
    ids=["negative-step", "epochs-a-string", "unparsable"],
)
def test_one_bad_journal_line_is_left_out_and_the_rest_loads(tmp_path, caplog, damage):
    path = _journaled(tmp_path)
    jpath = path + ".journal"
    lines = open(jpath).read().splitlines()
    first = json.loads(lines[0])
    bad = damage(first)
    lines[0] = bad if isinstance(bad, str) else json.dumps(bad)
    open(jpath, "w").write("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        run = load_run(path)
    good_after = len(lines) - 1
    kept = json.load(open(path))["steps"]["step_ns"]
    assert run.n_steps == len(kept) + 10 * good_after  # the line's 10 steps are gone, no more
    assert all(isinstance(e, dict) for e in run.blocks)
    said = [r.getMessage() for r in caplog.records if "journal line" in r.getMessage()]
    assert len(said) == 1 and "1 damaged journal line left out" in said[0]


def test_tilde_and_variables_expand_in_path_options(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RUNS_AT", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    assert RunSettings(log_dir="~/runs").log_dir == str(tmp_path / "runs")
    assert RunSettings(log_dir="$RUNS_AT/a").log_dir == str(tmp_path / "runs" / "a")
    ev = LoaderEvaluator([1, 2, 3], metrics_file="~/one.json", sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert (tmp_path / "one.json").exists() and not (tmp_path / "~").exists()
    assert load_run("~/one.json").n_steps == 3


def test_a_history_row_of_the_wrong_kinds_is_refused_in_one_sentence(tmp_path):
    from loadeval_nb.core._shared import load_history

    p = tmp_path / "h.json"
    rows = [{"label": "#1", "real_step_s": "abc"}]
    p.write_text(json.dumps({"kind": "loadeval_nb.history", "schema_version": 1, "rows": rows}))
    with pytest.raises(RunLogError, match="real_step_s is 'abc', not a finite number"):
        load_history(p)


def test_a_metrics_file_name_too_long_is_refused_when_made(tmp_path):
    with pytest.raises(LoadEvalError, match="pass a shorter name"):
        LoaderEvaluator([1], metrics_file=str(tmp_path / ("x" * 250 + ".json")))


def test_a_full_disk_is_said_once_not_at_every_epoch(tmp_path, caplog, monkeypatch):
    import loadeval_nb.core.record.run as run_module

    def full(*a: Any, **k: Any) -> Any:
        raise OSError(28, "No space left on device")

    ev = LoaderEvaluator(
        list(range(5)), metrics_file=str(tmp_path / "r.json"), sample_interval_s=None
    )
    monkeypatch.setattr(run_module, "save_run", full)
    monkeypatch.setattr(run_module.Run, "save", lambda self, p: full())
    with caplog.at_level(logging.WARNING, logger="loadeval_nb"):
        for _ in range(20):
            for _ in ev:
                pass
        ev.close()
    said = [r for r in caplog.records if "could not write" in r.getMessage()]
    assert len(said) == 1 and ev.to_run().n_steps == 100


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
    assert read.step_ns == live.step_ns and read.block == live.block and read.n_steps == 12_000
    assert read.blocks == live.blocks and read.status == "complete"
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


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "log-missing",
        lambda u: load_run("nowhere.json"),
        RunLogError,
        "No run log at 'nowhere.json'; check the path or record the run first.",
    ),
    (
        "log-directory",
        lambda u: load_run(u.tmp),
        RunLogError,
        "'{tmp}' is a directory; pass the path of a .json run log.",
    ),
    (
        "log-binary",
        lambda u: load_run(log_bytes(u, "b.json", b"\xff\xfe\x00garbage")),
        RunLogError,
        "'{tmp}/b.json' is not a text file; pass a .json run log written by loadeval_nb.",
    ),
    (
        "log-truncated",
        lambda u: load_run(log_at(u, "t.json", '{"kind": "loadeval_nb.run", "sch')),
        RunLogError,
        "'{tmp}/t.json' is not valid JSON (Unterminated string starting at: line 1, column 29); it may be truncated: record the run again.",
    ),
    (
        "log-foreign",
        lambda u: load_run(log_at(u, "f.json", '{"loss": 0.1}')),
        RunLogError,
        '\'{tmp}/f.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "log-a-list",
        lambda u: load_run(log_at(u, "l.json", "[1, 2]")),
        RunLogError,
        '\'{tmp}/l.json\' is not a loadeval_nb run log (it has no "kind": "loadeval_nb.run"); pass a file written by LoaderEvaluator(metrics_file=...) or save_metrics().',
    ),
    (
        "log-newer-schema",
        lambda u: load_run(log_at(u, "n.json", schema_version=99)),
        RunLogError,
        "'{tmp}/n.json' uses run-log schema 99, newer than the 4 this loadeval_nb reads; upgrade with `pip install -U loadeval-nb`.",
    ),
    (
        "log-no-schema",
        lambda u: load_run(log_at(u, "s.json", schema_version="2")),
        RunLogError,
        "'{tmp}/s.json' has no integer schema_version; write it again with save_metrics().",
    ),
    (
        "log-negative-step",
        lambda u: load_run(log_at(u, "neg.json", **{"steps.step_ns": [10, -1, 10]})),
        RunLogError,
        "'{tmp}/neg.json' is a damaged run log (it holds negative step or wait times); record the run again.",
    ),
    (
        "log-unknown-mode",
        lambda u: load_run(log_at(u, "m.json", mode="train")),
        RunLogError,
        "'{tmp}/m.json' is a damaged run log (its mode is 'train', not 'log' or 'replay'); record the run again.",
    ),
    (
        "log-complete-as-text",
        lambda u: load_run(log_at(u, "c.json", **{"steps.complete": ["false"] * 3})),
        RunLogError,
        "'{tmp}/c.json' is a damaged run log (steps.complete holds values that are not true or false (\"false\" is not)); record the run again.",
    ),
    (
        "log-lengths-differ",
        lambda u: load_run(log_at(u, "len.json", **{"steps.start_ns": [0]})),
        RunLogError,
        "'{tmp}/len.json' is a damaged run log (steps.start_ns has 1 entries but steps.step_ns has 3); record the run again.",
    ),
    (
        "log-no-steps",
        lambda u: load_run(log_at(u, "ns.json", steps=None)),
        RunLogError,
        "'{tmp}/ns.json' is a damaged run log (it has no steps); record the run again.",
    ),
    (
        "log-deep",
        lambda u: load_run(log_at(u, "d.json", "[" * 100_000 + "]" * 100_000)),
        RunLogError,
        "'{tmp}/d.json' is nested too deeply to be a run log; record the run again.",
    ),
]


BAD: list[Any] = [
    (
        "history-truncated",
        lambda tmp: load_history(history_at(tmp, "t.json", text=read(a_history(tmp))[:60])),
        RunLogError,
        "'{tmp}/t.json' is not a JSON history; export it again.",
    ),
    (
        "history-newer-schema",
        lambda tmp: load_history(history_at(tmp, "n.json", {**HISTORY, "schema_version": 2})),
        RunLogError,
        "'{tmp}/n.json' uses history schema 2, newer than this loadeval_nb reads; upgrade with `pip install -U loadeval-nb`.",
    ),
    (
        "history-row-not-an-object",
        lambda tmp: load_history(history_at(tmp, "r.json", {**HISTORY, "rows": [[1, 2]]})),
        RunLogError,
        "'{tmp}/r.json' holds a row that is not an object; export it again.",
    ),
    (
        "history-rows-not-a-list",
        lambda tmp: load_history(history_at(tmp, "l.json", {**HISTORY, "rows": {"#1": {}}})),
        RunLogError,
        "'{tmp}/l.json' is a damaged history (its rows are not a list of objects).",
    ),
    (
        "history-a-directory",
        lambda tmp: load_history(tmp),
        RunLogError,
        "Cannot read '{tmp}' (Is a directory); check the path.",
    ),
    pytest.param(
        "history-schema-true",
        lambda tmp: load_history(
            history_at(tmp, "s.json", {**HISTORY, "schema_version": True, "rows": []})
        ),
        RunLogError,
        None,  # any one sentence that refuses it
        id="history-schema-true",
    ),
    pytest.param(
        "history-byte-order-mark",
        lambda tmp: load_history(history_at(tmp, "bom.json", text="\ufeff" + read(a_history(tmp)))),
        None,
        "",
        id="history-byte-order-mark",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), BAD, ids=[case_id(c) for c in BAD])
def test_more_bad_input(user, quiet_frameworks, name, call, kind, sentence):
    check_more_bad_input(user.tmp, call, kind, sentence)
