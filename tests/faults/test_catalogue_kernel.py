"""The fault catalogue in a real kernel (jupyter_client): Stop pressed once, three times
quickly, a burst landing while the run finishes, during the ideal run, and an error with
workers running.

Each case asserts what the user sees (``KeyboardInterrupt``, or their own error), that
the partial runs are in ``_loadeval`` and their logs on disk and loadable, that the
loader's name is bound to the user's loader again, that the kernel still answers, and
that no worker process, thread or temporary file is left behind.
"""

from __future__ import annotations

import json
import os
import textwrap
import time

import psutil
import pytest

from loadeval_nb import load_run

jupyter_client = pytest.importorskip("jupyter_client")

SETUP = textwrap.dedent(
    """
    import os, threading, time, json, psutil, torch
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
        return json.dumps({
            "restored": train_loader is original,
            "children": kids,
            "threads": extra,
            "failed": getattr(res, "failed", None),
            "real_steps": res.real.n_steps if res is not None and res.real else None,
            "ideal_steps": res.ideal.n_steps if res is not None and res.ideal else None,
        })
    """
)


class Kernel:
    def __init__(self, cwd: str) -> None:
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
        reply = self.kc.get_shell_msg(timeout=30)
        return {**reply["content"], "stdout": "".join(out)}

    def start(self, code: str) -> str:
        return self.kc.execute(code)

    def reply(self, msg_id: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_shell_msg(timeout=max(1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]

    def wait_for(self, msg_id: str, text: str, timeout: float = 60) -> None:
        """Wait until the running cell prints ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream" and text in msg["content"]["text"]:
                return
        raise AssertionError(f"the cell never printed {text!r}")

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
    log_dir: str, fail: str = "", steps: int = 400, sequential: bool = True, at: int = 10
) -> str:
    """A %%loadeval cell that prints its wrapper's mode once it has run ``at`` steps (the
    sides one after the other unless ``sequential`` is False)."""
    return (
        f"%%loadeval train_loader --steps {steps} --warmup 2 --cache 4 --no-live "
        f"--log-dir {log_dir}{' --sequential' if sequential else ''}\n"
        "for k, b in enumerate(train_loader):\n"
        "    time.sleep(0.005)\n"
        f"    if k == {at}:\n"
        "        print('running', train_loader.mode, flush=True)\n"
        f"{fail}"
    )


def files_in(folder: str) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def check_logs(folder: str, n: int) -> None:
    logs = files_in(folder)
    assert len(logs) == n and all(f.endswith(".json") for f in logs), logs  # no temp file
    for f in logs:
        assert load_run(os.path.join(folder, f)).n_steps >= 10


def interrupted(kernel: Kernel, tmp_path, presses: int, gap_s: float, mode: str) -> dict:
    msg = kernel.start(cell(str(tmp_path / "logs")))
    kernel.wait_for(msg, f"running {mode}")
    for _ in range(presses):
        kernel.km.interrupt_kernel()
        time.sleep(gap_s)
    reply = kernel.reply(msg)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    return kernel.state()


@pytest.mark.parametrize(
    ("presses", "gap_s"), [(1, 0.0), (3, 0.05), (12, 0.02)], ids=["once", "three-quick", "burst"]
)
def test_stop_during_the_real_run(kernel, tmp_path, presses, gap_s):
    st = interrupted(kernel, tmp_path, presses, gap_s, "log")
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "real" and st["real_steps"] >= 10 and st["ideal_steps"] is None
    check_logs(str(tmp_path / "logs"), 1)


def test_stop_during_the_ideal_run(kernel, tmp_path):
    st = interrupted(kernel, tmp_path, 3, 0.05, "replay")
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "ideal" and st["real_steps"] == 400 and st["ideal_steps"] >= 10
    check_logs(str(tmp_path / "logs"), 2)


def test_stop_during_an_interleaved_pair(kernel, tmp_path):
    # real and ideal blocks in one loop: Stop lands in a block of either side; both sides'
    # partial runs are kept and their logs written (the ideal's blocks had begun)
    msg = kernel.start(cell(str(tmp_path / "logs"), sequential=False, at=150))
    kernel.wait_for(msg, "running pair")
    kernel.km.interrupt_kernel()
    reply = kernel.reply(msg)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    st = kernel.state()
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "pair" and st["real_steps"] >= 10 and st["ideal_steps"] >= 10, st
    check_logs(str(tmp_path / "logs"), 2)


def test_an_error_in_the_cell_with_workers_running(kernel, tmp_path):
    fail = "    if k == 20:\n        raise ValueError('loss is nan')\n"
    r = kernel.execute(cell(str(tmp_path / "logs"), fail))
    assert r["status"] == "error" and r["ename"] == "ValueError" and r["evalue"] == "loss is nan"
    st = kernel.state()
    assert st["restored"] and not st["children"] and not st["threads"], st
    assert st["failed"] == "real" and st["real_steps"] == 21
    check_logs(str(tmp_path / "logs"), 1)


def test_the_kernel_still_measures_after_the_faults(kernel, tmp_path):
    r = kernel.execute(cell(str(tmp_path / "logs"), steps=40))
    assert r["status"] == "ok", r
    st = kernel.state()
    assert st["restored"] and not st["children"] and st["failed"] is None
    assert st["real_steps"] == 40 and st["ideal_steps"] == 40
    check_logs(str(tmp_path / "logs"), 2)


def test_a_kernel_killed_mid_run_leaves_no_worker(tmp_path):
    # the kernel dies (killed by the OS, say): the workers must not outlive it
    k = Kernel(str(tmp_path))
    try:
        assert k.execute(SETUP)["status"] == "ok"
        msg = k.start(cell(str(tmp_path / "logs")))
        k.wait_for(msg, "running log")
        kernel_proc = psutil.Process(k.km.provisioner.process.pid)
        workers = kernel_proc.children(recursive=True)
        assert workers
        kernel_proc.kill()
        gone, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, [p.pid for p in alive]
    finally:
        k.stop()
