"""What a rerun of a ``%%loadeval`` cell keeps, in a real kernel (jupyter_client), the way
JupyterLab and Notebook 7 run a cell again: the same ``cellId`` in the request's metadata,
from one page (one client session).

Measured in the kernel, not in an in-process ``InteractiveShell``: IPython 9.18's history
there keeps every display output of a cell (``history_manager.outputs``), megabytes of
BokehJS among them, which a user's kernel does not keep (ipykernel's history keeps streams).
"""

from __future__ import annotations

import json
import textwrap
import time

import pytest

jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.slow

BOKEHJS = "application/vnd.bokehjs_load.v0+json"
SETUP = textwrap.dedent(
    """
    import gc, json, tracemalloc
    import comm, torch
    from torch.utils.data import DataLoader, TensorDataset
    %load_ext loadeval_nb
    train_loader = DataLoader(TensorDataset(torch.randn(512, 4), torch.arange(512)), batch_size=8)
    tracemalloc.start()
    """
)
CELL = (
    "%%loadeval train_loader --steps 24 --warmup 2 --cache 3\n"
    "seen = 0\n"
    "for x, y in train_loader:\n"
    "    seen += 1\n"
)
READ = (
    "gc.collect()\n"
    "print(json.dumps([tracemalloc.get_traced_memory()[0], len(comm.get_comm_manager().comms)]))"
)


class Page:
    """One page's connection to a kernel: every request carries its client session."""

    def __init__(self, cwd: str) -> None:
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, cell_id: str | None = None, timeout: float = 120) -> dict:
        """Run ``code`` (as the cell ``cell_id``); what it printed and the sizes of the
        BokehJS outputs it displayed."""
        content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}}
        msg = self.kc.session.msg("execute_request", content)
        if cell_id is not None:
            msg["metadata"]["cellId"] = cell_id
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        out, bokehjs = [], []
        deadline = time.monotonic() + timeout
        while True:
            m = self.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            kind, c = m["msg_type"], m["content"]
            if kind == "stream" and c["name"] == "stdout":
                out.append(c["text"])
            if kind == "display_data" and BOKEHJS in c.get("data", {}):
                bokehjs.append(len(c["data"][BOKEHJS]))
            if kind == "error":
                raise AssertionError("\n".join(c["traceback"]))
            if kind == "status" and c["execution_state"] == "idle":
                return {"stdout": "".join(out), "bokehjs": bokehjs}

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def test_reruns_of_a_cell_keep_what_one_run_keeps_and_bokehjs_is_sent_once(tmp_path):
    page = Page(str(tmp_path))
    try:
        page.run(SETUP)

        def rerun():
            sent = page.run(CELL, cell_id="cell-1")["bokehjs"]
            memory, comms = json.loads(page.run(READ)["stdout"].strip().splitlines()[-1])
            return sent, memory, comms

        first, _, _ = rerun()  # the first run of the cell, then one rerun: what a cell keeps
        again, one, comms = rerun()
        for _ in range(4):
            later, five, comms_5 = rerun()
            assert later == []
    finally:
        page.stop()
    # BokehJS (about 4 MB) once for the page: the page keeps it
    assert len(first) == 1 and first[0] > 1_000_000 and again == []
    # a replaced session's widgets are closed, their layouts and styles too
    assert comms_5 == comms
    assert five - one < 150_000, (one, five)
