"""The magic under faults: a cell that raises, interrupts, bad options, and in a real kernel
(jupyter_client) Stop pressed once, three times quickly, a burst while the run finishes,
during the ideal run, and an error with workers running.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import psutil
import pytest
import torch
from IPython.core.error import UsageError
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import (
    load_run,
)
from tests.catalogue import (
    Boom,
    InputUser,
    Refused,
    User,
    check_bad_input,
    loader_state,
    log_at,
    nothing_left,
)
from tests.ipython_shell import ipython_shell


def run_cell(u: User, line: str, cell: str = "for b in train_loader:\n    pass") -> None:
    with ipython_shell(train_loader=u.loader, not_a_loader=3, empty=[]) as ip:
        try:
            ip.run_cell_magic("loadeval", line, cell)
        except UsageError as e:
            raise Refused(str(e)) from None


QUIET = "--steps 24 --warmup 2 --cache 3 --quiet --log-dir logs --sequential"
"""(the sides one after the other: each case fails in one side's run; a loader this short
is otherwise paired on the loop's epochs, whose faults tests/core/explore/test_faults.py
checks)"""


RAISE_AT_5 = "for k, b in enumerate(train_loader):\n    if k == 5:\n        raise {exc}\n"


RAISE_IN_IDEAL = (
    "for k, b in enumerate(train_loader):\n"
    "    if k == 5 and train_loader.mode == 'replay':\n"
    "        raise {exc}\n"
)


SHELL = [
    # id, cell, exception, its text, failed run, logs written
    (
        "cell-raises-real",
        RAISE_AT_5.format(exc="Boom('cell failed')"),
        Boom,
        "cell failed",
        "real",
        1,
    ),
    (
        "cell-raises-ideal",
        RAISE_IN_IDEAL.format(exc="Boom('ideal failed')"),
        Boom,
        "ideal failed",
        "ideal",
        2,
    ),
    (
        "cell-interrupted",
        RAISE_AT_5.format(exc="KeyboardInterrupt"),
        KeyboardInterrupt,
        "",
        "real",
        1,
    ),
    (
        "cell-interrupted-ideal",
        RAISE_IN_IDEAL.format(exc="KeyboardInterrupt"),
        KeyboardInterrupt,
        "",
        "ideal",
        2,
    ),
    (
        "cell-rebinds-and-raises",
        "for k, b in enumerate(train_loader):\n    train_loader = None\n    raise Boom('x')\n",
        Boom,
        "x",
        "real",
        1,
    ),
    ("cell-breaks", "for k, b in enumerate(train_loader):\n    break\n", None, None, None, 2),
]


SETUP = textwrap.dedent(
    """
    import os, sys, threading, time, json, psutil, torch, traceback
    from torch.utils.data import DataLoader, Dataset
    %load_ext loadeval_nb

    class Slow(Dataset):
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(0.004)
            return torch.full((2,), float(i))

    train_loader = DataLoader(Slow(), batch_size=4, num_workers=2)
    original = train_loader
    threads_before = {t.name for t in threading.enumerate()}

    def absorb_presses(seconds=1.0):
        # after a Stopped cell's magic returns: a press that comes later lands here, not
        # in the kernel's own code between the cell and its reply (ipykernel keeps
        # Python's SIGINT handler until the reply is sent; there a press lost the reply,
        # or the next cell's output, on a quick machine)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                time.sleep(0.02)
            except KeyboardInterrupt:
                pass

    def state():
        deadline = time.monotonic() + 10
        while True:
            kids = [p.pid for p in psutil.Process().children(recursive=True)
                    if p.status() != psutil.STATUS_ZOMBIE]
            extra = sorted({t.name for t in threading.enumerate() if t.is_alive()} - threads_before)
            if (not kids and not extra) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        res = globals().get("_loadeval")
        frames = sys._current_frames()
        where = {t.name: "".join(traceback.format_stack(frames[t.ident])[-4:])
                 for t in threading.enumerate() if t.name in extra and t.ident in frames}
        return json.dumps({
            "restored": train_loader is original,
            "children": kids,
            "threads": extra,
            "where": where,  # what a thread left behind was doing
            "failed": getattr(res, "failed", None),
            "real_steps": res.real.n_steps if res is not None and res.real else None,
            "ideal_steps": res.ideal.n_steps if res is not None and res.ideal else None,
        })
    """
)


class Kernel:
    def __init__(self, cwd: str) -> None:
        # only the kernel cases need it: skipped without it, the in-process cases run
        jupyter_client = pytest.importorskip("jupyter_client")
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def execute(self, code: str, timeout: float = 120) -> dict:
        """Run ``code``; its reply's content, with the text it printed as "stdout"."""
        msg_id = self.kc.execute(code)
        out = []
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        return {**self.reply(msg_id, timeout=30), "stdout": "".join(out)}

    def reply(self, msg_id: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_shell_msg(timeout=max(1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]

    def started(self, code: str, text: str, timeout: float = 60) -> str:
        """Run ``code`` until it prints ``text``, and return its request's id. A request
        the kernel aborted (sent while it still dropped its queue after the previous
        KeyboardInterrupt, on a busy machine; a cell once never printed in 60 s) is sent
        once more, as ``state`` does; a cell that ended otherwise is an AssertionError."""
        for attempt in range(2):
            msg_id = self.kc.execute(code)
            ended = self._printed_or_ended(msg_id, text, timeout)
            if ended is None:
                return msg_id
            if ended["status"] != "aborted" or attempt:
                raise AssertionError(f"the cell ended without printing {text!r}: {ended}")
        raise AssertionError("unreachable")

    def _printed_or_ended(self, msg_id: str, text: str, timeout: float) -> dict | None:
        """None once the running cell prints ``text``; its reply if it ends before."""
        deadline = time.monotonic() + timeout
        seen = []
        printed = ""  # (one print may come in several stream messages: ipykernel flushes
        # on a timer of its own, which may fire between the print's writes)
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.2)
                ours = msg["parent_header"].get("msg_id") == msg_id
                seen.append((ours, msg["msg_type"], str(msg["content"])[:100]))
                if ours and msg["msg_type"] == "stream":
                    printed += msg["content"]["text"]
                    if text in printed:
                        return None
            except Empty:
                pass
            try:
                msg = self.kc.get_shell_msg(timeout=0)
            except Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return {**msg["content"], "printed": printed[-300:], "iopub seen": seen[-20:]}
        raise AssertionError(f"the cell never printed {text!r} in {timeout:.0f} s: {seen[-20:]}")

    def state(self) -> dict:
        r = self.execute("print(state())")
        if r["status"] == "aborted":  # sent while the kernel still dropped its queue after
            r = self.execute("print(state())")  # the KeyboardInterrupt (a busy machine): again
        assert r["status"] == "ok", r
        return json.loads(r["stdout"].strip().splitlines()[-1])

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(str(tmp_path_factory.mktemp("kernel")))
    try:
        r = k.execute(SETUP)
        assert r["status"] == "ok", r
        yield k
    finally:
        k.stop()


def cell(
    log_dir: str,
    fail: str = "",
    steps: int = 400,
    sequential: bool = True,
    at: int = 10,
    stopped: bool = False,
) -> str:
    """A %%loadeval cell that prints its wrapper's mode once it has run ``at`` steps (the
    sides one after the other unless ``sequential`` is False). A cell to be ``stopped``
    runs the magic as IPython runs a ``%%loadeval`` cell, then lets a second of later
    presses land in ``absorb_presses``: the test's presses are the tool's to handle while
    the magic runs, never ipykernel's once it has returned."""
    line = (
        f"train_loader --steps {steps} --warmup 2 --cache 4 --no-live "
        f"--log-dir {log_dir}{' --sequential' if sequential else ''}"
    )
    body = (
        "for k, b in enumerate(train_loader):\n"
        "    time.sleep(0.005)\n"
        f"    if k == {at}:\n"
        "        print('running', train_loader.mode, flush=True)\n"
        f"{fail}"
    )
    if not stopped:
        return f"%%loadeval {line}\n{body}"
    return (
        f"try:\n    get_ipython().run_cell_magic('loadeval', {line!r}, {body!r})\n"
        "finally:\n    absorb_presses()\n"
    )


def files_in(folder: str) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def check_logs(folder: str, n: int) -> None:
    logs = files_in(folder)
    assert len(logs) == n and all(f.endswith(".json") for f in logs), logs  # no temp file
    for f in logs:
        assert load_run(os.path.join(folder, f)).n_steps >= 10


def interrupted(kernel: Kernel, tmp_path, presses: int, gap_s: float, mode: str) -> dict:
    msg = kernel.started(cell(str(tmp_path / "logs"), stopped=True), f"running {mode}")
    for _ in range(presses):
        kernel.km.interrupt_kernel()
        time.sleep(gap_s)
    reply = kernel.reply(msg)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    return kernel.state()


def test_an_empty_loader_in_the_magic_is_not_blamed_on_the_cell():
    empty = DataLoader(TensorDataset(torch.zeros(0, 3)), batch_size=4)
    with ipython_shell(train_loader=empty) as ip:
        with pytest.raises(UsageError, match="^train_loader produced no batches"):
            ip.run_cell_magic(
                "loadeval", "train_loader --only real --steps 6 --warmup 1 --quiet",
                "for b in train_loader:\n    pass\n",
            )  # fmt: skip
        with pytest.raises(UsageError, match="DataLoader produced no batches"):
            ip.run_cell_magic(
                "loadeval",
                "train_loader --steps 6 --warmup 1 --quiet",
                "for b in train_loader:\n    pass\n",
            )


@pytest.mark.parametrize(
    ("name", "cell", "kind", "text", "failed", "n_logs"), SHELL, ids=[s[0] for s in SHELL]
)
def test_fault_in_a_cell(user, name, cell, kind, text, failed, n_logs):
    loader = user.loader(num_workers=1)
    before, data = loader_state(loader), user.data.clone()
    with ipython_shell(train_loader=loader, Boom=Boom) as ip:
        if kind is None:
            ip.run_cell_magic("loadeval", f"train_loader {QUIET}", cell)
        else:
            with pytest.raises(kind) as info:
                ip.run_cell_magic("loadeval", f"train_loader {QUIET}", cell)
            assert str(info.value) == text
        assert ip.user_ns["train_loader"] is loader  # the name is restored
        res = ip.user_ns["_loadeval"]
        assert res.failed == failed
    logs = sorted(os.listdir("logs"))
    assert len(logs) == n_logs
    for f in logs:
        assert load_run(os.path.join("logs", f)).n_steps >= 1
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


@pytest.mark.parametrize("what", ["--ladder", '--sweep "num_workers=0,1"'])
def test_a_ladder_or_sweep_cell_that_fails(user, what):
    loader = user.loader()
    before, data = loader_state(loader), user.data.clone()
    cell = RAISE_IN_IDEAL.format(exc="Boom('late')").replace(
        "train_loader.mode == 'replay'", "True"
    )
    with ipython_shell(train_loader=loader, Boom=Boom) as ip:
        with pytest.raises(Boom, match="late"):
            ip.run_cell_magic("loadeval", f"train_loader {QUIET} {what}", cell)
        assert ip.user_ns["train_loader"] is loader
    logs = sorted(os.listdir("logs"))
    assert logs and all(load_run(os.path.join("logs", f)).n_steps == 6 for f in logs)
    assert torch.equal(user.data, data) and loader_state(loader) == before
    nothing_left("logs", tuple(logs))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("presses", "gap_s"), [(1, 0.0), (3, 0.05), (12, 0.02)], ids=["once", "three-quick", "burst"]
)
def test_stop_during_the_real_run(kernel, tmp_path, presses, gap_s):
    st = interrupted(kernel, tmp_path, presses, gap_s, "log")
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "real" and st["real_steps"] >= 10 and st["ideal_steps"] is None
    check_logs(str(tmp_path / "logs"), 1)


@pytest.mark.slow
def test_stop_during_the_ideal_run(kernel, tmp_path):
    st = interrupted(kernel, tmp_path, 3, 0.05, "replay")
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "ideal" and st["real_steps"] == 400 and st["ideal_steps"] >= 10
    check_logs(str(tmp_path / "logs"), 2)


@pytest.mark.slow
def test_stop_during_an_interleaved_pair(kernel, tmp_path):
    # real, contended and ideal blocks in one loop (the contended arm is on by default:
    # the loader has workers and the pass has room): Stop lands in a block of any arm;
    # every arm's partial run is kept and its log written (the ideal's blocks had begun,
    # and a round goes R C I I C R)
    cell_code = cell(str(tmp_path / "logs"), sequential=False, at=150, stopped=True)
    msg = kernel.started(cell_code, "running pair")
    kernel.km.interrupt_kernel()
    reply = kernel.reply(msg)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    st = kernel.state()
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "pair" and st["real_steps"] >= 10 and st["ideal_steps"] >= 10, st
    check_logs(str(tmp_path / "logs"), 3)


@pytest.mark.slow
def test_an_error_in_the_cell_with_workers_running(kernel, tmp_path):
    fail = "    if k == 20:\n        raise ValueError('loss is nan')\n"
    r = kernel.execute(cell(str(tmp_path / "logs"), fail))
    assert r["status"] == "error" and r["ename"] == "ValueError" and r["evalue"] == "loss is nan"
    st = kernel.state()
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "real" and st["real_steps"] == 21
    check_logs(str(tmp_path / "logs"), 1)


@pytest.mark.slow
def test_the_kernel_still_measures_after_the_faults(kernel, tmp_path):
    r = kernel.execute(cell(str(tmp_path / "logs"), steps=40))
    assert r["status"] == "ok", r
    st = kernel.state()
    assert st["restored"] and not st["children"] and st["failed"] is None
    assert st["real_steps"] == 40 and st["ideal_steps"] == 40
    check_logs(str(tmp_path / "logs"), 2)


@pytest.mark.slow
def test_a_kernel_killed_mid_run_leaves_no_worker(tmp_path):
    # the kernel dies (killed by the OS, say): the workers must not outlive it
    k = Kernel(str(tmp_path))
    try:
        assert k.execute(SETUP)["status"] == "ok"
        k.started(cell(str(tmp_path / "logs")), "running log")
        kernel_proc = psutil.Process(k.km.provisioner.process.pid)
        workers = kernel_proc.children(recursive=True)
        assert workers
        kernel_proc.kill()
        gone, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, [p.pid for p in alive]
    finally:
        k.stop()


def test_quoted_log_dir_with_a_space(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loader = DataLoader(TensorDataset(torch.zeros(40, 3)), batch_size=4)
    with ipython_shell(train_loader=loader) as ip:
        ip.run_cell_magic(
            "loadeval",
            "train_loader --steps 6 --warmup 1 --cache 2 --quiet --log-dir 'runs/my runs'",
            "for b in train_loader:\n    pass\n",
        )
    written = list((tmp_path / "runs" / "my runs").glob("*.json"))
    assert len(written) == 2 and not (tmp_path / "'runs").exists()


def test_the_magic_finds_the_loader_without_calling_properties():
    calls = []

    class Model:
        @property
        def trainer(self):
            calls.append(1)
            raise RuntimeError("a Lightning module's trainer raises before a fit")

    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    with ipython_shell(train_loader=dl, model=Model()) as ip:
        ip.run_cell_magic(
            "loadeval",
            "--steps 6 --warmup 1 --quiet",
            "t = type(model).trainer\nfor b in train_loader:\n    pass\n",
        )
        assert ip.user_ns["_loadeval"].ok
    assert calls == []


@pytest.mark.parametrize("flag", ["--ladder", "--sweep 'num_workers=0,1'"])
def test_repeat_with_a_ladder_or_a_sweep_is_refused_not_ignored(flag):
    from IPython.core.error import UsageError

    dl = DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=4)
    with ipython_shell(train_loader=dl) as ip:
        with pytest.raises(UsageError, match="^--repeat does not apply to a"):
            ip.run_cell_magic(
                "loadeval",
                f"train_loader {flag} --repeat 3 --quiet",
                "for b in train_loader: pass\n",
            )


CASES: list[tuple[str, Callable[[InputUser], Any], type[BaseException], str]] = [
    (
        "magic-unknown-name",
        lambda u: run_cell(u, "trian_loader"),
        Refused,
        "No variable named 'trian_loader' in the notebook (did you mean 'train_loader'?); define the loader first.",
    ),
    (
        "magic-not-iterable",
        lambda u: run_cell(u, "not_a_loader", "for b in not_a_loader:\n    pass"),
        Refused,
        "not_a_loader is an int, not a loader; pass the DataLoader's name.",
    ),
    (
        "magic-empty",
        lambda u: run_cell(u, "empty", "for b in empty:\n    pass"),
        Refused,
        "The list produced no batches, so there is nothing to measure; pass a loader that yields at least one batch.",
    ),
    (
        "magic-steps-word",
        lambda u: run_cell(u, "train_loader --steps lots"),
        Refused,
        "--steps must be a number of steps or auto, not 'lots'.",
    ),
    (
        "magic-cache-zero",
        lambda u: run_cell(u, "train_loader --cache 0"),
        Refused,
        "--cache must be a positive number of batches, not 0.",
    ),
    (
        "magic-warmup-over-steps",
        lambda u: run_cell(u, "train_loader --steps 10 --warmup 10"),
        Refused,
        "--warmup (10) must be smaller than steps (10): warm-up steps are not measured.",
    ),
    (
        "magic-device-cache",
        lambda u: run_cell(u, "train_loader --cache-on device"),
        Refused,
        "cache_on='device' needs a CUDA device, and none is available; use cache_on='host'.",
    ),
    (
        "magic-log-dir-file",
        lambda u: run_cell(u, f"train_loader --log-dir {log_at(u, 'f.txt', 'x')}"),
        Refused,
        "Cannot write run logs in '{tmp}/f.txt' ('f.txt' is a file, not a folder); pass a --log-dir you can write to.",
    ),
    (
        "magic-cell-never-iterates",
        lambda u: run_cell(u, "train_loader", "x = 1"),
        Refused,
        "The cell never iterated train_loader; loop over it (for batch in train_loader: ...).",
    ),
    (
        "magic-bad-sweep",
        lambda u: run_cell(u, 'train_loader --sweep "num_workers=many"'),
        Refused,
        "num_workers='many' is not a value a sweep can try; use integers, True/False or None.",
    ),
    (
        "magic-ladder-and-sweep",
        lambda u: run_cell(u, 'train_loader --ladder --sweep "num_workers=0,1"'),
        Refused,
        "Use --ladder or --sweep, not both: run them in two cells.",
    ),
]


@pytest.mark.parametrize(("name", "call", "kind", "sentence"), CASES, ids=[c[0] for c in CASES])
def test_bad_input(input_user, name, call, kind, sentence):
    check_bad_input(input_user, name, call, kind, sentence)
