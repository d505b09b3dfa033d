"""%%loadeval --view: which view each host gets, each view end to end in an IPython shell,
and the text view in a real terminal IPython."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import types

import pytest
import torch
from IPython.core.displaypub import CapturingDisplayPublisher
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.terminal.interactiveshell import TerminalInteractiveShell
from torch.utils.data import DataLoader, TensorDataset

from loadeval_nb import magic
from loadeval_nb.magic._view import choose_view
from loadeval_nb.widgets import Dashboard
from loadeval_nb.widgets._bokeh import DisplayOnlyBokehModel
from loadeval_nb.widgets._html_view import HtmlDashboard
from loadeval_nb.widgets._text_view import TextDashboard

from ..ipython_shell import ipython_shell

KERNEL = types.SimpleNamespace(kernel=object())  # a Jupyter kernel's shell
TERMINAL = TerminalInteractiveShell.__new__(TerminalInteractiveShell)  # `ipython`, unstarted
NO_MODULES = {"IPython.terminal.interactiveshell": sys.modules["IPython.terminal.interactiveshell"]}


@pytest.mark.parametrize(
    "shell, environ, modules, view",
    [
        (KERNEL, {}, NO_MODULES, "bokeh"),  # JupyterLab, Notebook 7
        (KERNEL, {"VSCODE_PID": "4242"}, NO_MODULES, "html"),  # VS Code
        (KERNEL, {}, {**NO_MODULES, "google.colab": object()}, "html"),  # Colab
        (TERMINAL, {}, NO_MODULES, "text"),  # a terminal IPython
        (TERMINAL, {"VSCODE_PID": "4242"}, NO_MODULES, "text"),  # ... in VS Code's terminal
        (KERNEL, {"LOADEVAL_VIEW": "text"}, NO_MODULES, "text"),  # the variable, anywhere
        (KERNEL, {"LOADEVAL_VIEW": " HTML "}, NO_MODULES, "html"),
        (TERMINAL, {"LOADEVAL_VIEW": "bokeh"}, NO_MODULES, "bokeh"),
        (KERNEL, {"LOADEVAL_VIEW": ""}, NO_MODULES, "bokeh"),  # set but empty: unset
    ],
)
def test_the_view_each_host_gets(shell, environ, modules, view):
    assert choose_view(None, shell, environ, modules) == view


def test_the_option_comes_before_the_variable_and_the_host():
    env = {"LOADEVAL_VIEW": "text", "VSCODE_PID": "1"}
    assert choose_view("bokeh", TERMINAL, env, NO_MODULES) == "bokeh"
    assert choose_view("'html'", KERNEL, env, NO_MODULES) == "html"


def test_a_view_that_does_not_exist_gets_one_sentence():
    with pytest.raises(UsageError) as e:
        choose_view("svg", KERNEL, {}, NO_MODULES)
    assert str(e.value) == (
        "--view svg is not a view; use --view bokeh, --view html or --view text "
        "(or set LOADEVAL_VIEW to one of them)."
    )
    with pytest.raises(UsageError, match=r"^LOADEVAL_VIEW=plots is not a view; use --view bokeh"):
        choose_view(None, KERNEL, {"LOADEVAL_VIEW": "plots"}, NO_MODULES)


LOOP = "import time\nfor x, y in train_loader:\n    time.sleep(0.002)\n"
LINE = "train_loader --steps 24 --warmup 2 --cache 3"


@pytest.fixture
def shell():
    loader = DataLoader(TensorDataset(torch.randn(512, 4), torch.arange(512)), batch_size=8)
    with ipython_shell(train_loader=loader) as ip:
        yield ip


def test_the_in_process_shell_is_no_terminal(shell):
    # IPython's plain shell (this suite's, an embedding) keeps the bokeh view
    assert type(shell) is InteractiveShell
    assert choose_view(None, shell, {}, NO_MODULES) == "bokeh"


@pytest.mark.parametrize("view", ["bokeh", "html", "text"])
def test_every_view_shows_the_verdict_and_keeps_the_result(shell, view, capsys, monkeypatch):
    monkeypatch.setattr(shell, "display_pub", CapturingDisplayPublisher())
    shell.run_cell_magic("loadeval", f"{LINE} --view {view}", LOOP)
    session = magic.latest_session()
    result = shell.user_ns["_loadeval"]
    assert result.diagnosis is not None and session.view == view
    kind = {"bokeh": Dashboard, "html": HtmlDashboard, "text": TextDashboard}[view]
    assert type(session.dashboard) is kind
    out = capsys.readouterr().out
    shown = [o["data"] for o in shell.display_pub.outputs]
    # the saved copy (in a terminal: its text) holds the verdict in every view
    assert any(d.get("text/plain") == result.diagnosis.text("options") for d in shown)
    if view == "text":
        assert session.panel is None and "\r" in out and "Done: " in out
        assert not [d for d in shown if "loadeval_nb live dashboard" in d.get("text/plain", "")]
    else:  # the panel: ipywidgets core, in the dashboard's box, never beside a Bokeh model
        assert session.panel is not None
        assert session.dashboard.panel_box.children == (session.panel.widget,)
        bokeh = [
            w for w in session.dashboard.widget.children if isinstance(w, DisplayOnlyBokehModel)
        ]
        assert bokeh == []
    if view == "html":  # its live output, drawn at least at the start and the end
        assert (
            session.dashboard.renders >= 2
            and "<svg" in session.dashboard.live_bundle()["text/html"]
        )


def test_the_variable_picks_the_view_and_a_bad_one_is_said(shell, monkeypatch):
    monkeypatch.setenv("LOADEVAL_VIEW", "html")
    shell.run_cell_magic("loadeval", f"{LINE} --quiet", LOOP)
    assert magic.latest_session().view == "html"
    monkeypatch.setenv("LOADEVAL_VIEW", "svg")
    with pytest.raises(UsageError, match="LOADEVAL_VIEW=svg is not a view"):
        shell.run_cell_magic("loadeval", LINE, LOOP)
    with pytest.raises(UsageError, match="--view plots is not a view"):
        shell.run_cell_magic("loadeval", f"{LINE} --view plots", LOOP)


def test_a_sweep_in_the_html_view_shows_its_table_without_bokeh(shell, capsys):
    shell.run_cell_magic("loadeval", f"{LINE} --view html --sweep 'num_workers=0,1'", LOOP)
    session = magic.latest_session()
    assert type(session.dashboard) is HtmlDashboard
    assert "num_workers=1" in session.dashboard.verdict.value  # the sweep's card
    assert shell.user_ns["_loadeval"].error is None


SCRIPT = """
import time, torch
from torch.utils.data import DataLoader, TensorDataset
loader = DataLoader(TensorDataset(torch.randn(4096, 4)), batch_size=8)
ip = get_ipython()
print("SHELL", type(ip).__name__)
ip.run_line_magic("load_ext", "loadeval_nb")
ip.run_cell("%%loadeval loader --steps 60 --warmup 2 --cache 3\\nfor (x,) in loader:\\n    time.sleep(0.02)\\n")
print("VERDICT", _loadeval.diagnosis.verdict)
print("STEPS", _loadeval.real.n_steps, _loadeval.ideal.n_steps)
"""


@pytest.mark.slow
def test_a_terminal_ipython_gets_a_line_that_updates_then_the_verdict(tmp_path):
    script = tmp_path / "cell.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in ("LOADEVAL_VIEW", "VSCODE_PID")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--simple-prompt",
            "--no-banner",
            "--no-confirm-exit",
            "-c",
            f"exec(open({str(script)!r}).read())",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=240,
        env=env,
    )  # fmt: skip (bytes: text mode would turn each carriage return into a new line)
    assert out.returncode == 0, out.stderr[-2000:].decode()
    text = out.stdout.decode()
    assert "SHELL TerminalInteractiveShell" in text
    line = next(t for t in text.split("\n") if "\r" in t)
    counts = [
        (int(a), int(b)) for a, b in re.findall(r"real step (\d+), ideal step (\d+) of 60", line)
    ]
    # updated in place while it ran (0.5 s apart, 60 steps of 20 ms a side), up to the end
    steps = re.search(r"STEPS (\d+) (\d+)", text)
    assert len(counts) >= 2 and all(a <= b for c in zip(*counts) for a, b in zip(c, c[1:]))
    assert counts[-1] == (int(steps[1]), int(steps[2]))
    after = text.split(line, 1)[1]
    assert re.search(r"^Done: .* an ideal loader would (be|make steps)", after, re.M)
    assert "Verdict: " in after and "speedup with an ideal loader" in after  # the report
    assert "VERDICT " in after and "<div" not in text and "VBox" not in text
