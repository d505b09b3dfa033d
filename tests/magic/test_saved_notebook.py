"""What a notebook saved during or after a %%loadeval cell keeps: the cell's outputs in
order, as a kernel sends them (captured in an in-process shell)."""

from __future__ import annotations

import pytest
import torch
from IPython.core.displaypub import CapturingDisplayPublisher
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import magic

from ..ipython_shell import ipython_shell

BOKEHJS = "application/vnd.bokehjs_load.v0+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def shell():
    loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=4)
    with ipython_shell(train_loader=loader) as ip:
        ip.display_pub = CapturingDisplayPublisher()
        yield ip


def test_bokehjs_is_gone_from_the_outputs_before_the_run_starts(shell):
    kinds = []

    def seen_when_the_loop_runs():  # what a save at that moment would keep
        if not kinds:
            kinds.extend(_kinds(shell.display_pub.outputs))

    shell.user_ns["mark"] = seen_when_the_loop_runs
    shell.run_cell_magic(
        "loadeval",
        "train_loader --steps 6 --warmup 1 --cache 2",
        "for b in train_loader:\n    mark()\n",
    )
    # BokehJS went to the page first, then was emptied (the page ran it as it showed it),
    # all before the first step; the saved copy was there from the start
    assert kinds[:4] == ["bokehjs", "dashboard", "bokehjs emptied", "saved copy: not finished"]
    outputs = shell.display_pub.outputs
    assert sum(BOKEHJS in o["data"] for o in outputs) == 1
    # frontends without widgets (nbconvert, GitHub) read words, never the widget's repr
    texts = [o["data"]["text/plain"] for o in outputs if WIDGET in o["data"]]
    assert texts == ["loadeval_nb live dashboard: the saved copy below holds the result."]
    last = [o for o in outputs if magic.latest_session().dashboard.static_class in str(o["data"])]
    assert last[-1]["update"] and "not finished" not in last[-1]["data"]["text/html"]
    assert "loadeval-verdict" in last[-1]["data"]["text/html"]


def test_quiet_prints_nothing(shell, capsys, monkeypatch):
    import sys

    import loadeval_nb.core.measure.readers as readers

    monkeypatch.setattr(readers, "_nvml_state", {})  # the no-GPU line not printed yet
    monkeypatch.setitem(sys.modules, "pynvml", None)
    shell.run_cell_magic(
        "loadeval",
        "train_loader --steps 6 --warmup 1 --cache 2 --quiet",
        "for b in train_loader:\n    pass\n",
    )
    assert shell.display_pub.outputs == [] and capsys.readouterr().err == ""


def _kinds(outputs):
    out = []
    for o in outputs:
        data = o["data"]
        if BOKEHJS in data:
            out.append("bokehjs")
        elif WIDGET in data:
            out.append("dashboard")
        elif o["update"] and data.get("text/plain") == "" and len(data) == 1:
            out.append("bokehjs emptied")
        elif "static copy" in data.get("text/html", ""):
            done = "not finished" not in data["text/html"]
            out.append("saved copy: " + ("result" if done else "not finished"))
        else:
            out.append(str(sorted(data)))
    return out
