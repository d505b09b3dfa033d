"""PyTorch Lightning: Trainer.fit measured as a pair, from scripts and from the magic.

Real Lightning, tiny modules made here, sleep-based costs whose truth is known."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from torch.utils.data import DataLoader

from loadeval_nb import LoadEvalError, RunSettings
from loadeval_nb.integrations import LoadEvalCallback, fit_for_measurement, fit_pair
from loadeval_nb.verdict import INPUT_BOUND, NOT_INPUT_BOUND

from ..ipython_shell import ipython_shell
from ..timing import excused_if_busy, retry_once
from ..workloads import SleepyItems, take

L = pytest.importorskip("lightning.pytorch")


@pytest.fixture(autouse=True)
def quiet_lightning():
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice on num_workers, logging, ...
        yield


class SleepyModule(L.LightningModule):
    """A training step of ``step_s`` seconds; validation is slow on purpose (50 ms a batch)
    so that a validation between timed steps would show."""

    def __init__(self, step_s: float = 0.010) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 1)
        self.step_s = step_s

    def training_step(self, batch, batch_idx):
        take(self.step_s)
        return self.layer(batch).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        take(0.05)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class SleepyData(L.LightningDataModule):
    def __init__(self, item_s: float = 0.0, n: int = 400) -> None:
        super().__init__()
        self.item_s, self.n, self.setups = item_s, n, 0

    def setup(self, stage):
        self.setups += 1
        self.ds = SleepyItems(self.n, self.item_s)

    def train_dataloader(self):
        return DataLoader(self.ds, batch_size=8)


def trainer(**kw):
    from lightning.pytorch.callbacks import ModelCheckpoint

    opts = dict(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(every_n_train_steps=2, save_top_k=-1)],
        default_root_dir=kw.pop("root"),
    )
    opts.update(kw)
    return L.Trainer(**opts)


def finished_trainer(tmp_path, model, loader):
    """A trainer that already ran its fit to the end: a second fit would return at once."""
    t = trainer(root=tmp_path, val_check_interval=3, limit_train_batches=6)
    t.fit(
        model, train_dataloaders=loader, val_dataloaders=DataLoader(SleepyItems(8, 0), batch_size=4)
    )
    return t


@pytest.mark.slow
@retry_once
def test_input_bound_ground_truth_on_a_finished_trainer(tmp_path):
    # 8 items x 5 ms = 40 ms a batch, 2 workers -> one every 20 ms; the step is 10 ms
    loader = DataLoader(SleepyItems(800, 0.005), batch_size=8, num_workers=2)
    model = SleepyModule(0.010)
    t = finished_trainer(tmp_path, model, loader)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    callbacks, epoch = list(t.callbacks), t.current_epoch
    res = fit_pair(t, model, loader, settings=RunSettings(steps=50, warmup=5, num_cached_batches=5))
    d = res.diagnosis
    assert res.error is None and d is not None
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 0.0175 <= d.real_step_s <= 0.029, d
        assert 0.0095 <= d.ideal_step_s <= 0.016, d  # Lightning adds a little to each step
        assert d.real_p90_s < 0.045, d  # no 50 ms validation batch or checkpoint between steps
    assert one_whole_pass(res)  # both sides interleaved in one run of the framework
    assert res.real.status == res.ideal.status == "complete"
    # the trainer and the model are left as they were
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert t.callbacks == callbacks and t.current_epoch == epoch and t.fit_loop.max_epochs == 1
    assert t.limit_val_batches == 1.0 and t.limit_train_batches == 6


@pytest.mark.slow
@retry_once
def test_compute_bound_ground_truth(tmp_path):
    # 8 items x 1 ms = 8 ms a batch, 2 workers -> 4 ms; the step is 80 ms
    loader = DataLoader(SleepyItems(400, 0.001), batch_size=8, num_workers=2)
    t = trainer(root=tmp_path)
    res = fit_pair(t, SleepyModule(0.080), loader, settings=RunSettings(steps=30, warmup=3))
    d = res.diagnosis
    with excused_if_busy(d):
        assert d.verdict == NOT_INPUT_BOUND, d
        assert 0.079 <= d.real_step_s <= 0.092, d
        assert d.speedup < 1.05, d


def test_fit_pair_with_a_datamodule_leaves_it_as_it_was(tmp_path):
    dm = SleepyData()
    t = trainer(root=tmp_path)
    res = fit_pair(
        t,
        SleepyModule(0.0),
        datamodule=dm,
        settings=RunSettings(steps=15, warmup=2, num_cached_batches=3),
    )
    assert res.error is None and res.real.n_steps == res.ideal.n_steps == 15
    assert "train_dataloader" not in vars(dm)  # the method is the class's again
    assert dm.setups == 3  # ours, then Lightning's in each fit


def test_callback_measures_one_fit(tmp_path):
    cb = LoadEvalCallback("replay", steps=12, warmup=2, num_cached_batches=3)
    t = trainer(root=tmp_path, callbacks=[cb])
    t.fit(SleepyModule(0.0), datamodule=SleepyData())
    ev = cb.evaluator
    assert ev is not None and ev.mode == "replay" and len(ev.cached_batches) == 3
    assert ev.total_steps == 12 and ev.to_run().status == "complete"
    assert type(t.fit_loop._data_source).__name__ == "_DataLoaderSource"  # put back


def test_callback_refuses_bad_arguments_at_once():
    with pytest.raises(ValueError, match="mode must be"):
        LoadEvalCallback("fast")
    with pytest.raises(LoadEvalError, match="^steps must be an integer >= 1"):
        LoadEvalCallback(steps=0)


def test_fit_for_measurement_refuses_other_trainers():
    with pytest.raises(LoadEvalError, match="lightning.pytorch.Trainer"):
        with fit_for_measurement(object()):
            pass


@pytest.mark.slow
def test_a_failing_fit_restores_weights_and_trainer(tmp_path):
    class Boom(SleepyModule):
        def training_step(self, batch, batch_idx):
            if batch_idx == 3:
                raise RuntimeError("boom")
            return super().training_step(batch, batch_idx)

    model = Boom(0.0)
    t = trainer(root=tmp_path)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    loader = DataLoader(SleepyItems(80, 0), batch_size=8)
    res = fit_pair(t, model, loader, settings=RunSettings(steps=8, warmup=1))
    assert isinstance(res.error, RuntimeError) and res.failed == "real"
    assert res.real is not None and res.real.n_steps >= 3  # the partial run is kept
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert t.fit_loop.max_epochs == 1 and len(t.callbacks) == len(trainer(root=tmp_path).callbacks)


# ---- the magic ----------------------------------------------------------------------------------


@pytest.fixture
def lshell(tmp_path):
    with ipython_shell(
        L=L,
        trainer=finished_trainer(
            tmp_path, SleepyModule(0.0), DataLoader(SleepyItems(64, 0), batch_size=8)
        ),
        model=SleepyModule(0.002),
        train_loader=DataLoader(SleepyItems(400, 0.0005), batch_size=8),
        dm=SleepyData(0.0005),
    ) as ip:
        yield ip


@pytest.mark.slow
def test_magic_measures_a_fit_cell_on_a_finished_trainer(lshell):
    # the report: the second fit returned at once, "The cell never iterated train_loader"
    lshell.run_cell_magic(
        "loadeval",
        "train_loader --steps 40 --warmup 3 --cache 5 --quiet",
        "trainer.fit(model, train_dataloaders=train_loader)\n",
    )
    res = lshell.user_ns["_loadeval"]
    assert res.error is None and res.diagnosis is not None
    assert one_whole_pass(res)  # both sides interleaved in one fit
    assert lshell.user_ns["train_loader"].__class__ is DataLoader  # the name is restored


@pytest.mark.slow
def test_magic_finds_a_datamodule_in_the_cell(lshell):
    lshell.run_cell_magic(
        "loadeval", "--steps 20 --warmup 2 --cache 3 --quiet", "trainer.fit(model, datamodule=dm)\n"
    )
    res = lshell.user_ns["_loadeval"]
    assert res.error is None and one_whole_pass(res)
    assert "train_dataloader" not in vars(lshell.user_ns["dm"])


def test_the_trainer_does_not_keep_our_wrapper(tmp_path):
    loader = DataLoader(SleepyItems(80, 0), batch_size=8)
    t = trainer(root=tmp_path)
    res = fit_pair(
        t, SleepyModule(0.0), loader, settings=RunSettings(steps=6, warmup=1, num_cached_batches=2)
    )
    assert res.error is None
    # the replay wrapper (and its cached batches) is not left in the trainer
    assert t.fit_loop._data_source.instance is None and t.fit_loop._combined_loader is None
    assert t.fit_loop.epoch_loop._batches_that_stepped == 0


@pytest.mark.slow
def test_magic_refuses_a_trainer_made_in_the_cell(lshell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="make the Trainer in an earlier cell"):
        lshell.run_cell_magic(
            "loadeval",
            "train_loader --quiet",
            "t = L.Trainer(max_epochs=1)\nt.fit(model, train_dataloaders=train_loader)\n",
        )


def one_whole_pass(res) -> bool:
    """An interleaved pair whose loop ran its whole pass: both sides measured, and the
    steps of both sides together the wrapper's len() (what the framework was told)."""
    info = res.real.settings.get("interleaved") or {}
    total = res.real.n_steps + res.ideal.n_steps
    return bool(res.real.n_steps and res.ideal.n_steps and total == info.get("pass_steps"))
