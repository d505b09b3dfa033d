"""``%loadeval_run`` and ``%loadeval_watch`` without jupyter_bokeh's widget JavaScript
(VS Code, Colab, ``--view html``): a followed job drawn as an HTML output redrawn through
a display handle, with no Bokeh model in the widgets, to the same verdict; and the magic's
own ``--view`` taken out of ``%loadeval_run``'s line before the script's words."""

from __future__ import annotations

import textwrap
import threading
import time

import pytest
from IPython.core.displaypub import CapturingDisplayPublisher
from torch.utils.data import DataLoader

from loadeval_nb import RunSettings, run_pair
from loadeval_nb.magic._script import take_view
from loadeval_nb.widgets._bokeh import DisplayOnlyBokehModel
from loadeval_nb.widgets._html_view import HtmlDashboard

from ..ipython_shell import ipython_shell
from ..workloads import SleepyItems


@pytest.fixture
def shell():
    with ipython_shell() as ip:
        yield ip


@pytest.mark.parametrize(
    "line, rest, view",
    [
        ("--view html train.py --lr 1", ["train.py", "--lr", "1"], "html"),
        ("--steps 40 --view=bokeh -m pkg.train", ["--steps", "40", "-m", "pkg.train"], "bokeh"),
        ("train.py --view html", ["train.py", "--view", "html"], None),  # the script's own
        ("--cache 4 train.py", ["--cache", "4", "train.py"], None),
    ],
)
def test_the_magics_view_option_is_taken_before_the_script(line, rest, view):
    assert take_view(line.split()) == (rest, view)


def _no_bokeh(widget) -> bool:
    todo = [widget]
    while todo:
        w = todo.pop()
        if isinstance(w, DisplayOnlyBokehModel):
            return False
        todo += list(getattr(w, "children", ()))
    return True


def test_a_watched_pair_in_the_html_view_is_drawn_without_bokeh(shell, tmp_path, monkeypatch):
    monkeypatch.setattr(shell, "display_pub", CapturingDisplayPublisher())
    loader = DataLoader(SleepyItems(800, 0.002), batch_size=4)  # 8 ms a batch

    def train(batches):
        for _ in batches:
            time.sleep(0.002)

    settings = RunSettings(steps=80, warmup=4, num_cached_batches=4, log_dir=str(tmp_path))
    done = []
    job = threading.Thread(target=lambda: done.append(run_pair(loader, train, settings)))
    job.start()
    try:
        shell.run_line_magic("loadeval_watch", f"{tmp_path} --timeout 120 --view html")
    finally:
        job.join()
    result = shell.user_ns["_loadeval"]
    assert result.diagnosis is not None
    assert result.diagnosis.verdict == done[0].diagnosis.verdict
    from loadeval_nb.magic._session import sessions

    session = max(
        (s for s in sessions if type(s).__name__ == "WatchSession"), key=lambda s: s.created
    )
    dash = session.view.dashboard
    assert isinstance(dash, HtmlDashboard) and _no_bokeh(session.view.box)
    assert dash.renders >= 2 and "<svg" in dash.live_bundle()["text/html"]
    shown = [o["data"] for o in shell.display_pub.outputs]
    assert any("loadeval-live" in d.get("text/html", "") for d in shown)  # the live output


@pytest.mark.slow
def test_a_script_in_the_html_view_streams_its_steps_and_ends_with_the_verdict(
    shell, tmp_path, monkeypatch
):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import time, torch
            from torch.utils.data import DataLoader, Dataset

            class Items(Dataset):
                def __len__(self):
                    return 800
                def __getitem__(self, i):
                    time.sleep(0.002)  # 8 ms a batch of 4
                    return torch.full((3,), float(i))

            for x in DataLoader(Items(), batch_size=4):
                time.sleep(0.002)
            """
        )
    )
    monkeypatch.setattr(shell, "display_pub", CapturingDisplayPublisher())
    shell.run_line_magic("loadeval_run", f"--view html --steps 60 --warmup 4 --cache 4 {script}")
    result = shell.user_ns["_loadeval"]
    assert result.diagnosis is not None, result.error
    from loadeval_nb.magic._session import sessions

    session = max(
        (s for s in sessions if type(s).__name__ == "ScriptSession"), key=lambda s: s.created
    )
    dash = session.view.dashboard
    assert isinstance(dash, HtmlDashboard) and _no_bokeh(session.view.box)
    assert dash.renders >= 2 and "<svg" in dash.live_bundle()["text/html"]
    assert session.panel is not None  # the rerun panel: ipywidgets core
