"""The framework front ends under faults: Lightning's ``fit_pair`` and ``LoadEvalCallback``,
Hugging Face's ``train_pair`` and accelerate, ``launch_ranks`` with a rank that dies or
hangs, and the bad-input catalogue's framework and rank cases.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from typing import Any, Optional

import pytest
import torch
import torch.distributed as dist
from torch.multiprocessing import ProcessExitedException
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, RunSettings
from loadeval_nb.core._shared import torch_threads
from loadeval_nb.explore import RunHooks
from loadeval_nb.integrations import fit_pair, launch_ranks, train_pair
from tests.catalogue import (
    PAIR_SETTINGS,
    Boom,
    case_id,
    check_more_bad_input,
    loader_state,
    logged,
    no_children,
    nothing_left,
)

# the added catalogue's cases ran with these around each
pytestmark = pytest.mark.usefixtures("earlier_children", "sigint_put_back")

try:  # imported here, not in a case: Lightning takes seconds to import
    import lightning.pytorch as L
except ImportError:  # pragma: no cover - the framework cases skip
    L = None


try:
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, TrainerCallback
except ImportError:  # pragma: no cover - the framework cases skip
    transformers = None


needs_lightning = pytest.mark.skipif(L is None, reason="needs lightning")


needs_transformers = pytest.mark.skipif(transformers is None, reason="needs transformers")


def weights(module: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same_weights(module: Any, before: dict[str, torch.Tensor]) -> bool:
    now = module.state_dict()
    return set(now) == set(before) and all(torch.equal(now[k], v) for k, v in before.items())


class Sides(RunHooks):
    """Tells the user's model which run of a pair is going ("real" or "ideal")."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def run_started(self, which: str, ev: Any, index: int, total: int) -> None:
        self.target.run = which


if L is not None:

    class FailingModule(L.LightningModule):
        """``training_step`` raises at batch 3 of the run named ``fail_in`` ("real",
        "ideal", or "any" for a fit of its own)."""

        def __init__(self, fail_in: str = "any") -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)
            self.fail_in, self.run = fail_in, None
            self.raised: Optional[BaseException] = None

        def training_step(self, batch, batch_idx):
            if batch_idx == 3 and self.fail_in in ("any", self.run):
                self.raised = Boom(f"training_step failed at step 3 of the {self.fail_in} run")
                raise self.raised
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def lightning_trainer(root: str, **kw: Any) -> Any:
    from lightning.pytorch.callbacks import ModelCheckpoint

    opts: dict[str, Any] = dict(
        max_epochs=3,
        limit_train_batches=6,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(root, "ckpt"), every_n_train_steps=2)],
        default_root_dir=root,
    )
    opts.update(kw)
    return L.Trainer(**opts)


def trainer_state(t: Any) -> Any:
    return (
        list(t.callbacks),
        t.fit_loop.max_epochs,
        t.limit_train_batches,
        t.limit_val_batches,
        t.num_sanity_val_steps,
        t.current_epoch,
        t.global_step,
        type(t.fit_loop._data_source).__name__,
    )


class Tokens(Dataset):
    """Token ids for a sequence classifier: 64 records of 4 tokens."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": torch.tensor([1 + i % 5, 2, 3, 4]),
            "attention_mask": torch.ones(4, dtype=torch.long),
            "labels": torch.tensor(i % 2),
        }


if transformers is not None:

    class FailingBert(BertForSequenceClassification):
        """A tiny BERT made from a config (nothing downloaded) whose forward raises at the
        3rd training step of the run named ``fail_in`` (None: never)."""

        def forward(self, input_ids=None, attention_mask=None, labels=None, **kw):
            if self.training and self.fail_in is not None and self.run == self.fail_in:
                self.calls += 1
                if self.calls == 3:
                    self.raised = Boom(f"forward failed at step 3 of the {self.fail_in} run")
                    raise self.raised
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kw
            )

    class FailingCallback(TrainerCallback):
        """Raises at the end of the 3rd optimizer step it sees."""

        def __init__(self) -> None:
            self.steps = 0
            self.raised: Optional[BaseException] = None

        def on_step_end(self, args, state, control, **kw):
            self.steps += 1
            if self.steps == 3:
                self.raised = Boom("a callback failed at step 3")
                raise self.raised


def tiny_bert(fail_in: Optional[str] = None) -> Any:
    config = BertConfig(
        vocab_size=16,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=8,
        max_position_embeddings=8,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = FailingBert(config)
    model.fail_in, model.run, model.calls, model.raised = fail_in, None, 0, None
    return model


def hf_trainer(tmp: str, model: Any, callbacks: tuple[Any, ...] = ()) -> Any:
    args = transformers.TrainingArguments(
        output_dir=os.path.join(tmp, "out"),
        per_device_train_batch_size=4,
        num_train_epochs=1,
        max_steps=5,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        logging_strategy="no",
        eval_strategy="no",
        save_strategy="no",
    )
    return transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), callbacks=list(callbacks)
    )


def hf_state(tr: Any) -> Any:
    return (
        tr.model,
        tr.optimizer,
        tr.lr_scheduler,
        tr.state.global_step,
        tr.args.max_steps,
        str(tr.args.eval_strategy),
        str(tr.args.save_strategy),
        "get_train_dataloader" in vars(tr),
    )


def _rank_1_exits() -> None:
    if dist.get_rank() == 1:
        os._exit(3)
    dist.barrier()  # rank 0 waits for rank 1 in a collective: it is stopped, not left


def _rank_1_killed() -> None:
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()


def lightning_not_a_trainer(tmp: str) -> Any:
    loader = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4)
    settings = RunSettings(steps=4, warmup=1, sample_interval_s=None)
    res = fit_pair(object(), object(), loader, settings=settings)
    return res  # refused before anything runs, or (the fault) an error in the result


def callback(**kw: Any) -> Any:
    from loadeval_nb.integrations import LoadEvalCallback

    return LoadEvalCallback(**kw)


def _fails_on_rank_1() -> None:
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("rank 1's own error")


@needs_lightning
@pytest.mark.parametrize(
    ("fail_in", "real_steps", "ideal_steps"),
    [("real", 4, None), ("ideal", 12, 4)],
    ids=["lightning-fit-pair-real-raises", "lightning-fit-pair-ideal-raises"],
)
def test_fit_pair_whose_training_step_raises(
    user, fake_time, quiet_frameworks, fail_in, real_steps, ideal_steps
):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    model = FailingModule(fail_in)
    trainer = lightning_trainer(os.path.join(user.tmp, "root"))
    kept, state = weights(model), trainer_state(trainer)
    res = fit_pair(
        trainer, model, loader, settings=RunSettings(**PAIR_SETTINGS), hooks=Sides(model)
    )
    # the user's exception comes back, the very object the step raised
    assert res.error is model.raised and res.failed == fail_in and res.diagnosis is None
    assert str(res.error) == f"training_step failed at step 3 of the {fail_in} run"
    # the partial run is kept (the unfinished step flagged), and its log loads
    assert res.real is not None and res.real.n_steps == real_steps
    real = logged(res.log_paths["real"], real_steps, "stopped" if fail_in == "real" else "complete")
    if fail_in == "real":
        assert not real.complete[-1]
    if ideal_steps is not None:
        assert res.ideal is not None and res.ideal.n_steps == ideal_steps
        assert not logged(res.log_paths["ideal"], ideal_steps, "stopped").complete[-1]
    # the trainer and the weights are as they were; no checkpoint was written
    assert same_weights(model, kept) and trainer_state(trainer) == state
    assert not os.path.exists(os.path.join(user.tmp, "root", "ckpt"))
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(os.path.basename(p) for p in res.log_paths.values()))


@needs_lightning
@pytest.mark.parametrize("mode", ["log", "replay"], ids=["callback-log", "callback-replay"])
def test_load_eval_callback_whose_training_step_raises(user, quiet_frameworks, mode):
    from loadeval_nb.integrations import LoadEvalCallback

    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    path = os.path.join(user.tmp, "run.json")
    cb = LoadEvalCallback(
        mode, steps=12, warmup=1, num_cached_batches=2, metrics_file=path, sample_interval_s=None
    )
    trainer = lightning_trainer(os.path.join(user.tmp, "root"), callbacks=[cb], max_epochs=1)
    model = FailingModule("any")
    with pytest.raises(Boom) as info:
        trainer.fit(model, train_dataloaders=loader)
    assert info.value is model.raised
    # Lightning's source of the loader is its own again, and the evaluator is closed
    assert type(trainer.fit_loop._data_source).__name__ == "_DataLoaderSource"
    ev = cb.evaluator
    assert ev is not None and ev.mode == mode and ev.to_run().n_steps == 4
    assert not logged(path, 4, "stopped").complete[-1]
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left(user.tmp, ("run.json", "root"))


@needs_transformers
@pytest.mark.parametrize(
    ("what", "fail_in", "real_steps", "ideal_steps"),
    [("callback", "real", 3, None), ("model", "ideal", 12, 3)],
    ids=["hf-callback-raises-in-real", "hf-model-raises-in-ideal"],
)
def test_train_pair_that_fails_mid_run(
    user, fake_time, quiet_frameworks, what, fail_in, real_steps, ideal_steps
):
    model = tiny_bert(fail_in if what == "model" else None)
    callback = FailingCallback()
    tr = hf_trainer(user.tmp, model, (callback,) if what == "callback" else ())
    kept, state = weights(model), hf_state(tr)
    with torch_threads(1):  # a tiny model: one thread is fastest, on a busy machine too
        res = train_pair(tr, settings=RunSettings(**PAIR_SETTINGS), hooks=Sides(model))
    raised = callback.raised if what == "callback" else model.raised
    assert res.error is raised and res.failed == fail_in and res.diagnosis is None
    assert res.real is not None and res.real.n_steps == real_steps
    real = logged(res.log_paths["real"], real_steps, "stopped" if fail_in == "real" else "complete")
    if fail_in == "real":
        assert not real.complete[-1]
    if ideal_steps is not None:
        assert res.ideal is not None and res.ideal.n_steps == ideal_steps
        assert not logged(res.log_paths["ideal"], ideal_steps, "stopped").complete[-1]
    assert same_weights(model, kept) and hf_state(tr) == state
    nothing_left("logs", tuple(os.path.basename(p) for p in res.log_paths.values()))
    nothing_left(user.tmp, ("logs", "out"))
    out = os.path.join(user.tmp, "out")
    assert not os.path.exists(out) or not os.listdir(out)  # no checkpoint, no log of its own


@pytest.mark.parametrize(
    ("fn", "text"),
    [
        (_rank_1_exits, "process 1 terminated with exit code 3"),
        (_rank_1_killed, "process 1 terminated with signal SIGKILL"),
    ],
    ids=["rank-1-os-exit", "rank-1-sigkill"],
)
def test_a_rank_that_dies_fails_the_launch_in_one_error(tmp_path, monkeypatch, fn, text):
    # torch writes its pytorch-errorfile-* in tempfile's folder (/tmp): here, a folder of
    # this case's own, so that what is left there is this launch's alone
    errors = tmp_path / "tmp"
    errors.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(errors))
    with pytest.raises(ProcessExitedException) as info:
        launch_ranks(fn, 2, timeout_s=60)
    assert str(info.value) == text and info.value.error_index == 1
    assert info.value.__cause__ is None and info.value.__context__ is None  # one error
    assert no_children() == []  # rank 0, stuck in the barrier, was stopped too
    assert os.listdir(errors) == []  # no pytorch-errorfile-* left


@pytest.mark.slow
def test_launch_ranks_refuses_unbounded_processes_and_stops_hung_ranks():
    from loadeval_nb.integrations import launch_ranks

    with pytest.raises(LoadEvalError, match="nprocs=100000 is more worker processes"):
        launch_ranks(lambda: 1, nprocs=100000)
    before = {f for f in os.listdir("/tmp") if f.startswith("pytorch-errorfile")}
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish in 2 s"):
        launch_ranks(lambda: time.sleep(60), nprocs=2, timeout_s=2)
    assert time.monotonic() - started < 30
    with pytest.raises(RuntimeError, match="rank 1 failed first"):
        launch_ranks(_fails_on_rank_1, nprocs=2)
    after = {f for f in os.listdir("/tmp") if f.startswith("pytorch-errorfile")}
    assert after <= before  # no error file left by these launches


def test_accelerate_is_told_its_loader_ended():
    accelerate = pytest.importorskip("accelerate")
    acc = accelerate.Accelerator(cpu=True)
    dl = acc.prepare(DataLoader(TensorDataset(torch.zeros(64, 2)), batch_size=4))
    ev = LoaderEvaluator(dl, steps=3, sample_interval_s=None)
    for _ in ev:
        pass
    ev.close()
    assert acc.gradient_state.in_dataloader is False
    ev = LoaderEvaluator(dl, mode="replay", num_cached_batches=2, steps=3, sample_interval_s=None)
    ev.close()
    assert acc.gradient_state.in_dataloader is False


BAD: list[Any] = [
    pytest.param(
        "fit-pair-not-a-trainer",
        lightning_not_a_trainer,
        LoadEvalError,
        "Expected a lightning.pytorch.Trainer, not an object; loadeval_nb supports the lightning package (pip install lightning).",
        marks=[
            needs_lightning,
        ],
        id="fit-pair-not-a-trainer",
    ),
    pytest.param(
        "train-pair-not-a-trainer",
        lambda tmp: train_pair(lightning_trainer(tmp, callbacks=[])),
        LoadEvalError,
        "Expected a transformers.Trainer, not a Trainer.",
        marks=[
            needs_lightning,
            needs_transformers,
        ],
        id="train-pair-not-a-trainer",
    ),
    pytest.param(
        "fit-pair-no-loader",
        lambda tmp: fit_pair(lightning_trainer(tmp, callbacks=[]), FailingModule()),
        LoadEvalError,
        "Pass the training loader or a datamodule to fit_pair, as to fit.",
        marks=needs_lightning,
        id="fit-pair-no-loader",
    ),
    pytest.param(
        "callback-unknown-mode",
        lambda tmp: callback(mode="ideal"),
        LoadEvalError,
        "mode must be 'log' or 'replay', not 'ideal'.",
        marks=needs_lightning,
        id="callback-unknown-mode",
    ),
    pytest.param(
        "callback-metrics-file-a-directory",
        lambda tmp: callback(metrics_file=tmp),
        LoadEvalError,
        "metrics_file '{tmp}' is a directory; pass a file path such as 'run.json'.",
        marks=needs_lightning,
        id="callback-metrics-file-a-directory",
    ),
    (
        "launch-ranks-timeout-zero",
        lambda tmp: launch_ranks(_rank_1_exits, 2, timeout_s=0),
        LoadEvalError,
        "timeout_s must be a number of seconds > 0 or None, not 0.",
    ),
    (
        "launch-ranks-nprocs-true",
        lambda tmp: launch_ranks(_rank_1_exits, nprocs=True),
        LoadEvalError,
        "nprocs must be a number of processes >= 1, not True.",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), BAD, ids=[case_id(c) for c in BAD])
def test_more_bad_input(user, quiet_frameworks, name, call, kind, sentence):
    check_more_bad_input(user.tmp, call, kind, sentence)
