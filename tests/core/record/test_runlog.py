"""Run logs: JSON round trip and clear refusals."""

from __future__ import annotations

import json

import pytest

from loadeval_nb import Run, load_run
from loadeval_nb.core.record import SCHEMA_VERSION
from loadeval_nb.errors import RunLogError


def sample_run(**kw):
    d = dict(
        mode="log", start_ns=[0, 10, 20], step_ns=[10, 10, 12], wait_ns=[1, 2, 3], samples=[4, 4, 2]
    )
    d.update(kw)
    return Run(**d)


def test_round_trip(tmp_path):
    run = sample_run(label="mine", warmup=1, util={"t_ns": [0], "gpu": {"util_pct": None}})
    p = run.save(tmp_path / "sub" / "r.json")
    back = load_run(p)
    assert back.step_ns == run.step_ns and back.wait_ns == run.wait_ns and back.samples == [4, 4, 2]
    assert back.warmup == 1 and back.label == "mine" and back.util == run.util
    doc = json.loads(open(p).read())
    assert doc["schema_version"] == SCHEMA_VERSION and doc["kind"] == "loadeval_nb.run"
    assert doc["summary"]["steady_steps"] == 2


def test_newer_schema_refused(tmp_path):
    doc = sample_run().to_dict()
    doc["schema_version"] = SCHEMA_VERSION + 1
    p = tmp_path / "new.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(
        RunLogError, match="newer than .* upgrade with `pip install -U loadeval-nb`"
    ):
        load_run(p)


def test_foreign_json_refused(tmp_path):
    p = tmp_path / "dali.json"
    p.write_text(json.dumps({"mode": "log", "total_batches": 3}))
    with pytest.raises(RunLogError, match="is not a loadeval_nb run log"):
        load_run(p)


def test_truncated_file(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text(json.dumps(sample_run().to_dict())[:40])
    with pytest.raises(RunLogError, match="is not valid JSON .* record the run again"):
        load_run(p)


def test_damaged_arrays(tmp_path):
    doc = sample_run().to_dict()
    doc["steps"]["wait_ns"] = [1]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(RunLogError, match="damaged run log .*wait_ns has 1 entries"):
        load_run(p)


def test_missing_and_directory(tmp_path):
    with pytest.raises(RunLogError, match="No run log at"):
        load_run(tmp_path / "nope.json")
    with pytest.raises(RunLogError, match="is a directory"):
        load_run(tmp_path)


def test_binary_file(tmp_path):
    p = tmp_path / "x.pkl"
    p.write_bytes(b"\x80\x04\x95\xff\xfe")
    with pytest.raises(RunLogError):
        load_run(p)


def test_run_log_errors_are_value_errors():
    assert issubclass(RunLogError, ValueError)


def test_schema_1_logs_are_still_read(tmp_path):
    doc = sample_run().to_dict()
    for key in ("total_batches", "total_time", "avg_batch_time", "min_batch_time"):
        del doc[key]
    del doc["max_batch_time"], doc["batch_times"]
    doc["schema_version"] = 1
    p = tmp_path / "old.json"
    p.write_text(json.dumps(doc))
    assert load_run(p).step_ns == [10, 10, 12]


def test_dali_keys_are_derived_not_trusted(tmp_path):
    p = sample_run().save(tmp_path / "r.json")
    doc = json.loads(p.read_text() if hasattr(p, "read_text") else open(p).read())
    assert doc["total_batches"] == 3 and doc["batch_times"] == [1e-9, 2e-9, 3e-9]
    doc["total_batches"] = 999  # a reader recomputes from the steps
    (tmp_path / "r2.json").write_text(json.dumps(doc))
    assert load_run(tmp_path / "r2.json").to_dict()["total_batches"] == 3


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", boom)
    with pytest.raises(OSError):
        sample_run().save(tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []


def test_subclass_round_trip():
    class MyRun(Run):
        pass

    assert type(MyRun.from_dict(sample_run().to_dict())) is MyRun


def test_a_schema_3_log_is_read_as_blocks(tmp_path):
    # schema 3 called a run's blocks its epochs: steps.epoch and epochs
    import json

    from loadeval_nb.core.record import Run, load_run

    run = Run(
        mode="log",
        start_ns=[0, 5, 9, 14],
        step_ns=[5, 4, 5, 4],
        block=[0, 0, 1, 1],
        blocks=[{"status": "complete", "steps": 2}, {"status": "stopped", "steps": 2}],
    )
    path = tmp_path / "run.json"
    run.save(str(path))
    doc = json.loads(path.read_text())
    assert doc["steps"]["block"] == [0, 0, 1, 1] and "epoch" not in doc["steps"]
    assert [b["status"] for b in doc["blocks"]] == ["complete", "stopped"]
    doc["schema_version"] = 3
    doc["steps"]["epoch"] = doc["steps"].pop("block")
    doc["epochs"] = doc.pop("blocks")
    path.write_text(json.dumps(doc))
    old = load_run(str(path))
    assert old.block == [0, 0, 1, 1] and old.blocks == run.blocks
    assert old.steady_by_block() == run.steady_by_block()


def test_a_schema_2_log_is_read_in_todays_words(tmp_path):
    # schema 2 said settings.max_steps and settings.warmup_steps; 3 says steps and warmup
    import json

    from loadeval_nb.core.record import SCHEMA_VERSION, Run, load_run

    run = Run(mode="log", start_ns=[0, 5, 9], step_ns=[5, 4, 4], warmup=1, settings={"steps": 3})
    path = tmp_path / "run.json"
    run.save(str(path))
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION == 4
    assert doc["settings"]["steps"] == 3 and doc["settings"]["warmup"] == 1
    assert "max_steps" not in doc["settings"] and "warmup_steps" not in doc["settings"]
    doc["schema_version"] = 2
    doc["settings"] = {"max_steps": 3, "warmup_steps": 1, "cache_on": None}
    doc["loader"] = {"num_workers": 2}
    del doc["loader_settings"]
    path.write_text(json.dumps(doc))
    old = load_run(str(path))
    assert old.warmup == 1 and old.settings == {"steps": 3, "cache_on": None}
    assert old.loader_settings == {"num_workers": 2}
    assert old.steady_step_s() == run.steady_step_s()
