"""The fault catalogue, grown with what was added since it was written: frameworks
(Lightning's ``fit_pair`` and ``LoadEvalCallback``, Hugging Face's ``train_pair``), ranks
(``launch_ranks``), ``compare`` on the command line, the rerun panel's history file, the
transform split, repeats, the journal, threads, paths and a full disk.

As in ``test_catalogue_faults.py``, each case asserts what the user is shown (their own
exception, unchanged, or the tool's one sentence), that nothing is lost (the partial run
log is on disk and loads with the steps that ran), that the user's objects and data are
as they were, and that nothing is left behind (no temporary file, journal, process or
thread: the suite's ``no_leaks`` fixture checks the last two after every case). A case
that first ran as ``xfail(strict=True)`` was a fault of the package this catalogue found
(a handler left behind, a journal line glued to a half one, "-0.0% faster", history
files read unlike run logs, framework functions that did not check their trainer); each
is fixed and the case now holds the fix.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import psutil
import pytest
import torch
import torch.distributed as dist
from torch.multiprocessing import ProcessExitedException
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import LoaderEvaluator, LoadEvalError, Run, RunSettings, load_run, run_pair
from loadeval_nb.core._shared import HistoryRow, load_history, save_history, torch_threads
from loadeval_nb.errors import RunLogError
from loadeval_nb.explore import RunHooks, split_transforms
from loadeval_nb.integrations import fit_pair, launch_ranks, train_pair

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


# ---- what every case checks ---------------------------------------------------------------


@dataclass
class User:
    data: torch.Tensor
    tmp: str

    def loader(self, **kw: Any) -> DataLoader:
        return DataLoader(TensorDataset(self.data), batch_size=4, **kw)


@pytest.fixture
def user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return User(torch.arange(128.0).reshape(64, 2), str(tmp_path))


def loader_state(loader: Any) -> Any:
    d = getattr(loader, "__dict__", {})
    return {k: v for k, v in d.items() if not k.startswith("_") or k == "_iterator"}


def nothing_left(folder: str, expected: tuple[str, ...]) -> None:
    """Only ``expected`` is in the folder: no temporary file, probe or journal."""
    extra = sorted(set(os.listdir(folder)) - set(expected))
    assert not extra, f"left behind: {extra}"


def logged(path: str, steps: Optional[int], status: str) -> Run:
    run = load_run(path)
    assert run.status == status
    if steps is not None:
        assert run.n_steps == steps
    return run


def weights(module: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same_weights(module: Any, before: dict[str, torch.Tensor]) -> bool:
    now = module.state_dict()
    return set(now) == set(before) and all(torch.equal(now[k], v) for k, v in before.items())


_EARLIER: set[int] = set()
"""Child processes that were running before the case began (an earlier test's: a
resource tracker, a compile-worker pool): not this case's to answer for."""


def no_children() -> list[psutil.Process]:
    """Our child processes still running that the case started (multiprocessing's resource
    tracker excepted: a spawn context starts it, and it stays for the interpreter's life)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if (
                p.pid not in _EARLIER
                and p.status() != psutil.STATUS_ZOMBIE
                and "resource_tracker" not in " ".join(p.cmdline())
            ):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


class Boom(Exception):
    pass


class Sides(RunHooks):
    """Tells the user's model which run of a pair is going ("real" or "ideal")."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def run_started(self, which: str, ev: Any, index: int, total: int) -> None:
        self.target.run = which


@pytest.fixture
def quiet_frameworks():
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if transformers is not None:
        transformers.logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the frameworks' advice on workers, logging, ...
        yield


@pytest.fixture(autouse=True)
def earlier_children():
    _EARLIER.clear()
    _EARLIER.update(p.pid for p in psutil.Process().children(recursive=True))
    yield


@pytest.fixture(autouse=True)
def sigint_put_back():
    """No case hands another SIGINT handler to the cases after it (a package fault that
    leaves one is a case of its own: ``test_a_failed_pair_..._puts_sigint_back``)."""
    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)


# ---- frameworks: Lightning -----------------------------------------------------------------

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


PAIR_SETTINGS = dict(
    steps=12, warmup=1, num_cached_batches=2, log_dir="logs", sample_interval_s=None
)


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


# ---- frameworks: Hugging Face -----------------------------------------------------------------


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


# ---- ranks: one killed ------------------------------------------------------------------------


def _rank_1_exits() -> None:
    if dist.get_rank() == 1:
        os._exit(3)
    dist.barrier()  # rank 0 waits for rank 1 in a collective: it is stopped, not left


def _rank_1_killed() -> None:
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()


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


# ---- transform split: a transform that raises in a worker ----------------------------------------


class Scale:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class Corrupt:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if float(x[0]) == 26:  # sample 13, scaled
            raise Boom("sample 13 is corrupt")
        return x


class Compose:
    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x


class Transformed(Dataset):
    def __init__(self) -> None:
        self.transform = Compose([Scale(), Corrupt()])

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(torch.full((2,), float(i)))


def test_split_transforms_whose_transform_raises_in_a_worker(user):
    ds = Transformed()
    pipeline, steps = ds.transform, ds.transform.transforms
    items = list(steps)
    loader = DataLoader(ds, batch_size=4, num_workers=2)
    before = loader_state(loader)
    rng = torch.get_rng_state()
    with pytest.raises(Boom) as info:
        split_transforms(loader, batches=8)
    assert str(info.value).startswith("Caught Boom in DataLoader worker process")
    assert "sample 13 is corrupt" in str(info.value)
    # the dataset's pipeline is put back: the same objects, in the same list
    assert ds.transform is pipeline and ds.transform.transforms is steps
    assert len(steps) == len(items) and all(a is b for a, b in zip(steps, items))
    assert list(vars(ds)) == ["transform"] and list(vars(pipeline)) == ["transforms"]
    assert loader_state(loader) == before and torch.equal(torch.get_rng_state(), rng)
    assert no_children() == []
    nothing_left(user.tmp, ())


# ---- repeats: the second real repeat fails -----------------------------------------------------


@pytest.mark.filterwarnings("ignore::loadeval_nb.errors.CacheMutationWarning")
def test_a_repeat_that_fails_keeps_the_runs_so_far(user, fake_time):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    calls: list[str] = []
    raised: list[BaseException] = []

    def run_once(ev: LoaderEvaluator) -> None:
        calls.append(ev.mode)
        for k, b in enumerate(ev):
            b[0].mul_(2)  # in place: never the user's data
            if calls.count("log") == 2 and ev.mode == "log" and k == 3:
                raised.append(Boom("the second real repeat failed"))
                raise raised[0]

    settings = RunSettings(**{**PAIR_SETTINGS, "steps": 8, "repeat": 3})
    res = run_pair(loader, run_once, settings)
    assert calls == ["log", "replay", "replay", "log"]  # A B B A: it stopped there
    assert res.error is raised[0] and res.failed == "real" and res.diagnosis is None
    assert "the real run failed (Boom: the second real repeat failed)" in res.text()
    # the real run keeps its first repeat whole and the second up to the failure
    assert isinstance(res.real, Run) and res.real.n_steps == 8 + 4
    assert res.real.epoch == [0] * 8 + [1] * 4 and res.real.complete[-1] is False
    assert [e["status"] for e in res.real.epochs] == ["complete", "stopped"]
    assert isinstance(res.ideal, Run) and res.ideal.n_steps == 16
    logged(res.log_paths["real"], 12, "stopped")
    logged(res.log_paths["ideal"], 16, "complete")
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(os.path.basename(p) for p in res.log_paths.values()))


# ---- signals: Ctrl-C in next(), after a pair that failed --------------------------------------


class CtrlCAt(Dataset):
    """Item 10 is Ctrl-C, pressed while the loop waits in ``next()`` (no workers: the main
    process reads it)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 10:
            signal.raise_signal(signal.SIGINT)
        return torch.zeros(2)


def test_ctrl_c_in_next_is_a_stop(user):
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as in a fresh process
    ev = LoaderEvaluator(DataLoader(CtrlCAt(), batch_size=4), sample_interval_s=None)
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    assert ev.to_run().epochs[0]["status"] == "stopped"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failed_pair_whose_loop_holds_its_iterator_puts_sigint_back(user, fake_time):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    raised: list[BaseException] = []

    def run_once(ev: LoaderEvaluator) -> None:
        it = iter(ev)  # held, as a framework's loop holds it
        for k in range(100):
            next(it)
            if k == 3:
                raised.append(Boom("failed with its iterator held"))
                raise raised[0]

    res = run_pair(user.loader(), run_once, RunSettings(**PAIR_SETTINGS))
    assert res.error is raised[0] and res.failed == "real"
    logged(res.log_paths["real"], 4, "stopped")
    handler = signal.getsignal(signal.SIGINT)
    # what it costs: a later run's Ctrl-C in next() (see test_ctrl_c_in_next_is_a_stop)
    ev = LoaderEvaluator(DataLoader(CtrlCAt(), batch_size=4), sample_interval_s=None)
    with pytest.raises(KeyboardInterrupt):
        for _ in ev:
            pass
    ev.close()
    status = ev.to_run().epochs[0]["status"]
    assert (handler, status) == (signal.default_int_handler, "stopped")


# ---- journal: a process killed after many epochs -------------------------------------------------

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
    assert run.n_steps == 120 * 50 and run.epoch == [e for e in range(120) for _ in range(50)]
    assert all(run.complete) and [e["status"] for e in run.epochs] == ["complete"] * 120
    nothing_left(user.tmp, ("run.json", "run.json.journal"))


# ---- threads ----------------------------------------------------------------------------------


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
    assert [e["status"] for e in a.epochs] == ["complete"] * 5
    assert [e["status"] for e in b.epochs] == ["complete", "complete", "stopped"]
    nothing_left(user.tmp, ("a.json", "b.json"))


def test_ctrl_c_in_the_main_thread_leaves_a_run_on_another_thread_alone(user, clock):
    reached, go = threading.Event(), threading.Event()
    path = os.path.join(user.tmp, "run.json")
    ev = LoaderEvaluator(list(range(40)), metrics_file=path, sample_interval_s=None, clock=clock)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's, as in a fresh process

    def train() -> None:
        for k, _ in enumerate(ev):
            if k == 5:
                reached.set()
                go.wait(30)

    t = threading.Thread(target=train)
    t.start()
    try:
        assert reached.wait(30)
        # the evaluator on the other thread took no SIGINT handler: Python's raises here
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        go.set()
        t.join(30)
    ev.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert all(logged(path, 40, "complete").complete)
    nothing_left(user.tmp, ("run.json",))


# ---- paths: a folder removed during the run -------------------------------------------------------


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


# ---- a full disk: a tmpfs of a few KiB -------------------------------------------------------------


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


# ---- bad inputs: compare, the history, the frameworks, ranks ---------------------------------------


class Refused(Exception):
    """What the user saw: a command's exit code and message."""


def compare_cli(*args: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "compare", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in out.stderr + out.stdout
    said = out.stderr.strip() or out.stdout.splitlines()[0]
    raise Refused(f"exit {out.returncode}: {said}")


def steps_log(tmp: str, name: str, n: int) -> str:
    p = os.path.join(tmp, name)
    Run(
        mode="log",
        start_ns=[i * 10_000_000 for i in range(n)],
        step_ns=[10_000_000] * n,
        wait_ns=[1_000] * n,
    ).save(p)
    return p


CUT_AT = '"step_ns":[10000000,10000000'


def cut_log(tmp: str) -> str:
    """A 40-step log cut off in the middle of its steps (a copy killed mid-write)."""
    p = steps_log(tmp, "cut.json", 40)
    with open(p) as f:
        text = f.read()
    with open(p, "w") as f:
        f.write(text[: text.index(CUT_AT) + len(CUT_AT)])
    return p


def cut_column(tmp: str) -> int:
    """Where the JSON of :func:`cut_log`'s file stops: the column its error names."""
    with open(os.path.join(tmp, "cut.json")) as f:
        return len(f.read()) + 1


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


def lightning_not_a_trainer(tmp: str) -> Any:
    loader = DataLoader(TensorDataset(torch.zeros(16, 2)), batch_size=4)
    settings = RunSettings(steps=4, warmup=1, sample_interval_s=None)
    res = fit_pair(object(), object(), loader, settings=settings)
    return res  # refused before anything runs, or (the fault) an error in the result


def callback(**kw: Any) -> Any:
    from loadeval_nb.integrations import LoadEvalCallback

    return LoadEvalCallback(**kw)


BAD: list[Any] = [
    # ---- compare on the command line ---------------------------------------------------------
    (
        "cli-compare-truncated-log",
        lambda tmp: compare_cli(cut_log(tmp), steps_log(tmp, "b.json", 40)),
        Refused,
        "exit 2: loadeval_nb: '{tmp}/cut.json' is not valid JSON (Expecting ',' delimiter: line 1, column {cut}); it may be truncated: record the run again.",
    ),
    (
        "cli-compare-a-directory",
        lambda tmp: compare_cli(steps_log(tmp, "a.json", 40), tmp),
        Refused,
        "exit 2: loadeval_nb: '{tmp}' is a directory; pass the path of a .json run log.",
    ),
    (
        "cli-compare-too-few-steps",
        lambda tmp: compare_cli(steps_log(tmp, "a.json", 3), steps_log(tmp, "b.json", 40)),
        Refused,
        "exit 2: Compare: not enough steady steps to compare (at least 10 in each run).",
    ),
    # ---- the rerun panel's history file --------------------------------------------------------
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
    # ---- frameworks and ranks ------------------------------------------------------------------
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
    (
        "repeat-over-20",
        lambda tmp: RunSettings(repeat=21),
        LoadEvalError,
        "repeat must be from 1 to 20, not 21.",
    ),
    (
        "split-transforms-no-pipeline",
        lambda tmp: split_transforms(DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4)),
        LoadEvalError,
        "No transform pipeline was found on the loader's dataset (a TensorDataset and the datasets it wraps have no transform, transforms or target_transform); name the callables it calls with transforms=[...].",
    ),
]


def test_compare_of_a_log_with_itself_says_no_change(user):
    a = steps_log(user.tmp, "a.json", 40)
    out = subprocess.run(
        [sys.executable, "-m", "loadeval_nb", "compare", a, a],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stderr == ""
    headline = out.stdout.splitlines()[0]
    assert headline == "Compare: OK: steps take the same time."
    nothing_left(user.tmp, ("a.json",))


def _id(case: Any) -> str:
    return case.id if hasattr(case, "id") else case[0]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), BAD, ids=[_id(c) for c in BAD])
def test_bad_input(user, quiet_frameworks, name, call, kind, sentence):
    before = set(os.listdir(user.tmp))
    if kind is None:  # accepted: loads
        assert call(user.tmp)
        return
    with pytest.raises(kind) as info:
        call(user.tmp)
    said = str(info.value)
    if sentence is not None:
        expected = sentence.replace("{tmp}", user.tmp)
        if "{cut}" in expected:
            expected = expected.replace("{cut}", str(cut_column(user.tmp)))
        assert said == expected
    assert "\n" not in said and "Traceback" not in said and said.endswith((".", ")"))
    # nothing but the files the case wrote itself (its logs and histories)
    left = {f for f in set(os.listdir(user.tmp)) - before if not f.endswith(".json")}
    assert not left, f"left behind: {left}"
    assert no_children() == []
