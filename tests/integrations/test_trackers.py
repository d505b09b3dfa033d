"""Trackers (``--log-to``, ``RunSettings(log_to=...)``): the verdict written to
TensorBoard, MLflow and W&B, offline, and read back with each package's own reader;
bad entries refused before a run, a failing tracker a sentence after it."""

from __future__ import annotations

import glob
import json
import logging
import struct
import warnings

import pytest
from torch.utils.data import DataLoader

from loadeval_nb import LoadEvalError, RunSettings
from loadeval_nb.core.errors import OptionError
from loadeval_nb.core.explore import run_pair
from loadeval_nb.integrations import trackers
from loadeval_nb.integrations._script.parent.options import run_parser, script_settings
from loadeval_nb.integrations.trackers import check_log_to, log_result, parse_log_to

from ..workloads import SleepyItems, sleep_steps


@pytest.fixture
def pair(fake_time):
    """A pair on the fake clock: 8 ms a batch, 4 ms a step (INPUT-BOUND, 2x), in no time."""
    loader = DataLoader(SleepyItems(400, 0.002, fake_time), batch_size=4)
    settings = RunSettings(steps=40, warmup=4, num_cached_batches=5, sample_interval_s=None)
    res = run_pair(loader, sleep_steps(0.004, fake_time), settings, label="tiny")
    assert res.diagnosis is not None and res.diagnosis.speedup > 1.5, res
    return res


def steady(run):
    return [(i, run.step_ns[i] / 1e9) for i in run.steady_indices()]


def assert_series(got, want):
    """A tracker's (step, value) series against the run's: the steps exactly, the values
    to float precision (pytest.approx compares flat sequences only, not pairs)."""
    got = sorted(got)
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6)


# ---- bad input, before a run -------------------------------------------------------------


def cli(*words):
    return script_settings(run_parser().parse_args(list(words)))


def test_an_unknown_tracker_is_refused_in_the_options_words():
    with pytest.raises(
        LoadEvalError, match=r"^--log-to takes tensorboard:DIR, mlflow, .* 'foo'\.$"
    ):
        cli("--log-to", "foo")
    with pytest.raises(LoadEvalError, match="log_to takes"):
        parse_log_to(["mlflow", "comet"])
    with pytest.raises(OptionError, match="log_to must be"):
        RunSettings(log_to=3)


def test_the_option_repeats_and_keeps_the_place(tmp_path):
    settings, _ = cli("--log-to", f"tensorboard:{tmp_path}", "--log-to", "mlflow")
    assert settings.log_to == (f"tensorboard:{tmp_path}", "mlflow")
    assert [t.kind for t in parse_log_to(settings.log_to)] == ["tensorboard", "mlflow"]
    assert parse_log_to("mlflow:file:///x/mlruns")[0].where == "file:///x/mlruns"
    assert RunSettings(log_to="wandb").log_to == ("wandb",)


def test_a_missing_package_says_what_to_install(monkeypatch):
    real = trackers.importlib.util.find_spec
    monkeypatch.setattr(
        trackers.importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a)
    )
    with pytest.raises(LoadEvalError, match=r"--log-to wandb needs .*; pip install wandb, or"):
        cli("--log-to", "wandb")


def test_trainer_needs_a_trainer():
    with pytest.raises(LoadEvalError, match="script's own process; name the tracker instead"):
        cli("--log-to", "trainer")
    with pytest.raises(LoadEvalError, match="this run does not train"):
        check_log_to("trainer")


# ---- each tracker, written and read back ------------------------------------------------


def test_tensorboard_has_the_verdict_the_numbers_and_the_steps(pair, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert log_result(pair, log_to=f"tensorboard:{tmp_path}") == []
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    d = pair.diagnosis
    for key, want in [
        ("speedup", d.speedup),
        ("headroom", d.headroom),
        ("speedup_ci_low", d.speedup_ci[0]),
        ("speedup_ci_high", d.speedup_ci[1]),
    ]:
        assert acc.Scalars(f"loadeval/{key}")[0].value == pytest.approx(want, rel=1e-6), key
    for side in ("real", "ideal"):
        got = [(e.step, e.value) for e in acc.Scalars(f"loadeval/steps/{side}_s")]
        assert_series(got, steady(getattr(pair, side)))
    text = acc.Tensors("loadeval/verdict/text_summary")[0].tensor_proto.string_val[0].decode()
    assert d.verdict in text and "Speedup" in text or "speedup" in text
    config = acc.Tensors("loadeval/config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "| loader/batch_size | 4 |" in config and "| settings/steps | 40 |" in config


def test_tensorboard_under_ranks_has_the_slowest_ranks_steps(tmp_path):
    """A job of ranks (``run --nproc-per-node``, ``gather_logs``): the slowest rank's
    verdict and its two step series, as docs/scripts.md promises, from the ranks' logs."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from loadeval_nb.integrations import ScriptResult
    from loadeval_nb.ranks import gather_logs
    from tests.core.ranks.test_ranks import write_job

    logs = tmp_path / "logs"
    logs.mkdir()
    write_job(logs, "loadeval-20250101-120000-train", [0.2, 32.0])
    ranks = gather_logs(logs)
    result = ScriptResult(target=["train.py"], label="train", log_dir=str(logs), ranks=ranks)
    assert log_result(result, log_to=f"tensorboard:{tmp_path / 'tb'}") == []
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    slowest = ranks.ranks_by_number[ranks.slowest]
    assert ranks.slowest == 1
    assert acc.Scalars("loadeval/speedup")[0].value == pytest.approx(ranks.diagnosis().speedup)
    for side in ("real", "ideal"):
        got = [(e.step, e.value) for e in acc.Scalars(f"loadeval/steps/{side}_s")]
        assert_series(got, steady(slowest.run(side)))


def test_mlflow_a_run_of_its_own_or_nested_under_the_active_one(pair, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    import mlflow
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it for this
    uri = (tmp_path / "mlruns").as_uri()
    assert log_result(pair, log_to=f"mlflow:{uri}") == []
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs(["0"])
    d = pair.diagnosis
    assert run.info.run_name == "tiny" and run.info.status == "FINISHED"
    assert run.data.metrics["loadeval/speedup"] == pytest.approx(d.speedup)
    assert run.data.metrics["loadeval/headroom"] == pytest.approx(d.headroom)
    assert run.data.tags["loadeval/verdict"] == d.verdict
    assert run.data.params["loadeval/loader/batch_size"] == "4"
    assert run.data.params["loadeval/settings/num_cached_batches"] == "5"
    history = client.get_metric_history(run.info.run_id, "loadeval/steps/real_s")
    assert_series([(m.step, m.value) for m in history], steady(pair.real))

    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        with mlflow.start_run(run_name="the user's") as parent:
            assert log_result(pair, RunSettings(log_to="mlflow")) == []
            assert mlflow.active_run().info.run_id == parent.info.run_id  # left as it was
    finally:
        mlflow.set_tracking_uri(before)
    (child,) = client.search_runs(["0"], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert child.data.metrics["loadeval/speedup"] == pytest.approx(d.speedup)


def wandb_records(path):
    """The records of an offline W&B run file (a LevelDB-style log of protobuf records:
    a 7-byte header, then 32 KiB blocks of [crc:4][length:2][type:1][data])."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    pos, chunk, out = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            r = pb.Record()
            r.ParseFromString(chunk)
            out.append(r)
            chunk = b""
    return out


def test_wandb_offline_has_the_summary_the_steps_and_the_config(pair, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for k, v in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        "WANDB_CONSOLE": "off",
    }.items():
        monkeypatch.setenv(k, v)
    import wandb

    try:
        assert log_result(pair, log_to="wandb:loadeval-tests") == []
    finally:
        wandb.teardown()  # its service process, which would outlive the test
    (path,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    records = wandb_records(path)
    summary, config, history = {}, {}, []
    for r in records:
        kind = r.WhichOneof("record_type")
        if kind == "summary":
            summary.update({i.key: json.loads(i.value_json) for i in r.summary.update})
        elif kind in ("config", "run"):  # a new run's config comes with the run record
            items = r.config.update if kind == "config" else r.run.config.update
            config.update({i.key: json.loads(i.value_json) for i in items})
        elif kind == "history":
            history.append(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            )
    d = pair.diagnosis
    assert summary["loadeval/speedup"] == pytest.approx(d.speedup)
    assert summary["loadeval/verdict"] == d.verdict
    assert config["loadeval"]["loader"]["batch_size"] == 4
    real = [
        (h["loadeval/step"], h["loadeval/steps/real_s"])
        for h in history
        if "loadeval/steps/real_s" in h
    ]
    assert_series(real, steady(pair.real))


# ---- a tracker that fails ------------------------------------------------------------------


def test_a_failing_tracker_is_one_sentence_and_the_others_are_written(pair, tmp_path):
    pytest.importorskip("tensorboard")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    good = tmp_path / "tb"
    failed = log_result(pair, log_to=[f"tensorboard:{blocked}", f"tensorboard:{good}"])
    assert len(failed) == 1 and failed[0].startswith(
        f"writing the verdict to tensorboard:{blocked}"
    )
    assert failed[0].endswith("the run and its logs are kept.")
    assert glob.glob(str(good / "events.out.tfevents.*"))
    # a result without a verdict writes nothing
    pair.diagnosis = None
    assert log_result(pair, log_to=f"tensorboard:{tmp_path / 'none'}") == []
    assert not (tmp_path / "none").exists()


def test_the_command_writes_and_a_failing_tracker_is_a_note(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ..scripts.cli import fixture, loadeval

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    out = loadeval(
        "run", "--steps", "30", "--warmup", "3", "--cache", "4",
        "--log-to", f"tensorboard:{tmp_path / 'tb'}", "--log-to", f"tensorboard:{blocked}",
        fixture("plain_loop.py"), "--step-ms", "2", "--batches", "60",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"loadeval_nb: note: writing the verdict to tensorboard:{blocked} failed" in out.stderr
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    speedup = acc.Scalars("loadeval/speedup")[0].value
    assert f"{speedup:.2f}" in out.stdout or f"{speedup:.1f}" in out.stdout


# ---- a trainer's own loggers --------------------------------------------------------------


def test_lightning_trainer_loggers(tmp_path):
    L = pytest.importorskip("lightning.pytorch")
    pytest.importorskip("tensorboard")
    import torch
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from loadeval_nb.integrations import fit_pair

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    tb, csv = TensorBoardLogger(tmp_path, name="tb"), CSVLogger(tmp_path, name="csv")
    t = L.Trainer(
        max_epochs=1, accelerator="cpu", logger=[tb, csv], enable_progress_bar=False,
        enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path,
    )  # fmt: skip
    loader = DataLoader(SleepyItems(240, 0.0), batch_size=4)
    settings = RunSettings(steps=24, warmup=3, num_cached_batches=4, log_to="trainer")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_pair(t, Tiny(), loader, settings=settings)
    assert res.diagnosis is not None
    assert not [w for w in caught if "writing the verdict" in str(w.message)]
    acc = EventAccumulator(tb.log_dir)
    acc.Reload()
    assert acc.Scalars("loadeval/speedup")[0].value == pytest.approx(res.diagnosis.speedup)
    metrics = (tmp_path / "csv" / "version_0" / "metrics.csv").read_text()
    assert "loadeval/speedup" in metrics and "loadeval/steps/real_s" in metrics
    hparams = (tmp_path / "csv" / "version_0" / "hparams.yaml").read_text()
    assert res.diagnosis.verdict in hparams


def test_lightning_without_trainer_in_a_cell_is_refused(pair):
    from IPython.core.error import UsageError

    from ..ipython_shell import ipython_shell

    loader = DataLoader(SleepyItems(40, 0.0), batch_size=4)
    with ipython_shell(loader=loader) as ip, pytest.raises(UsageError, match="trains no"):
        ip.run_cell_magic("loadeval", "loader --log-to trainer --quiet", "for x in loader: pass\n")
    with ipython_shell(loader=loader) as ip, pytest.raises(UsageError, match="--log-to takes"):
        ip.run_cell_magic("loadeval", "loader --log-to foo --quiet", "for x in loader: pass\n")


def test_the_magic_writes_where_it_is_asked(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ..ipython_shell import ipython_shell

    loader = DataLoader(SleepyItems(200, 0.0), batch_size=4)
    with ipython_shell(loader=loader) as ip:
        ip.run_cell_magic(
            "loadeval",
            f"loader --steps 24 --warmup 3 --cache 4 --quiet --log-to tensorboard:{tmp_path}",
            "for x in loader: pass\n",
        )
        res = ip.user_ns["_loadeval"]
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert acc.Scalars("loadeval/speedup")[0].value == pytest.approx(res.diagnosis.speedup)


@pytest.mark.slow  # transformers takes seconds to import
def test_a_hugging_face_trainer_reports_where_its_report_to_says(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ..ipython_shell import ipython_shell
    from .test_huggingface import SleepyRecords, SleepyRegressor, hf_trainer

    tr = hf_trainer(
        tmp_path, SleepyRegressor(0.0), SleepyRecords(240), report_to=["tensorboard"],
        eval_strategy="no",
    )  # fmt: skip
    with ipython_shell(trainer=tr) as ip:
        ip.run_cell_magic(
            "loadeval", "--steps 20 --warmup 2 --cache 3 --quiet --log-to trainer",
            "trainer.train()\n",
        )  # fmt: skip
        res = ip.user_ns["_loadeval"]
    assert res.diagnosis is not None
    (events,) = {p.rsplit("/", 1)[0] for p in glob.glob(f"{tmp_path}/runs/*/events.out.*")}
    acc = EventAccumulator(events)
    acc.Reload()
    assert acc.Scalars("loadeval/speedup")[0].value == pytest.approx(res.diagnosis.speedup)
