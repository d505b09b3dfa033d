"""Notebook 7 (the ``notebook`` package's single-document page), for real: its server on
127.0.0.1 with jupyter_bokeh's labextension as installed, driven by headless Debian
Chromium through Playwright.

A ``%%loadeval`` cell over the demo workload (:mod:`loadeval_nb.demo`'s synthetic images,
one worker, its small CNN) with the default view, which is bokeh there: the live step
plot gains points between two reads while the cell is busy, then the verdict card and the
rerun panel show, the plots stay visible, the static copy stays hidden, and no widget
error box and no console error (beyond ``BENIGN``) appear. Screenshots go to
test-artifacts/ (LOADEVAL_ARTIFACTS overrides).
"""

from __future__ import annotations

import time

import pytest

from .conftest import (
    ARTIFACTS,
    BENIGN,
    BUSY,
    RUN_ALL,
    STEP_POINTS,
    VISIBLE_BOXES,
    diagnose,
    notebook_json,
    open_page,
    read_again,
    served,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SETUP = """\
import torch
from torch.utils.data import DataLoader
from loadeval_nb.demo import SmallConvNet, SyntheticImages, train_steps

torch.manual_seed(0)
torch.set_num_threads(1)  # (a 2-core machine with a core kept busy: two intra-op threads
# beside one worker took 10x as long, and the page's wait ran out)
train_loader = DataLoader(SyntheticImages(n=8192), batch_size=8, shuffle=True, num_workers=1)
model = SmallConvNet()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
%load_ext loadeval_nb"""
CELLS = [
    SETUP,
    "%%loadeval train_loader --steps 400 --warmup 5 --cache 10\n"
    "train_steps(model, train_loader, torch.device('cpu'), opt)",
]
IN_CELL = """([i, sel]) => [...document.querySelectorAll('.jp-Notebook .jp-Cell')[i]
  .querySelectorAll(sel)].filter(e => e.checkVisibility()).length"""
"""How many elements of cell ``i`` that match ``sel`` are visible."""
NO_MODULE = "No version of module @bokeh/jupyter_bokeh is registered"


@pytest.fixture
def notebook7():
    # the host picks the view: no LOADEVAL_VIEW or VSCODE_PID from the caller
    with served(
        "loadeval-nb7-",
        {"demo.ipynb": notebook_json(CELLS)},
        app="notebook",
        drop_env=("LOADEVAL_VIEW", "VSCODE_PID"),
    ) as server:
        yield server


def test_notebook7_bokeh_view_live_verdict_panel(notebook7):
    root = notebook7.root
    opened = open_page(notebook7, "notebooks/demo.ipynb", timeout_shot="nb7-99-timeout.png")
    with opened as (page, errors):
        # Notebook 7's own page: no JupyterLab side panels, its own app
        assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
        page.evaluate(RUN_ALL)

        # (a) live: the Bokeh step plot gains points between two reads while busy
        deadline = time.monotonic() + 240
        first = -1
        while time.monotonic() < deadline:
            first = page.evaluate(STEP_POINTS)
            if first >= 3 and page.evaluate(BUSY):
                break
            page.wait_for_timeout(100)
        assert first >= 3, "the step plot never showed points\n" + diagnose(page, root, errors)
        second, still_busy = read_again(
            page, lambda: page.evaluate(STEP_POINTS), lambda: page.evaluate(BUSY), first, 30
        )
        page.screenshot(path=str(ARTIFACTS / "nb7-01-live.png"), full_page=True)
        assert still_busy, "the run ended before the second read; give the cell more steps"
        assert second > first, f"no new points while busy ({first} then {second})"
        assert page.evaluate(IN_CELL, [1, ".loadeval-plots"]) >= 1  # the plots render

        # (b) the verdict card and the rerun panel; the plots still there
        cell = page.locator(".jp-Notebook .jp-Cell").nth(1)
        cell.locator(".loadeval-dashboard .loadeval-verdict").wait_for(timeout=240_000)
        cell.locator(".loadeval-panel button.loadeval-rerun").wait_for(timeout=60_000)
        page.wait_for_function(f"() => !({BUSY[6:]})", timeout=60_000)
        assert page.evaluate(IN_CELL, [1, ".loadeval-dashboard .loadeval-verdict"]) == 1
        assert page.evaluate(IN_CELL, [1, ".loadeval-panel .loadeval-rerun"]) == 1
        assert page.evaluate(IN_CELL, [1, ".loadeval-plots"]) >= 1
        assert page.evaluate(STEP_POINTS) >= second
        # the static copy for saved notebooks stays hidden while the widgets show
        assert page.evaluate(IN_CELL, [1, ".loadeval-not-yet, [class$='-static']"]) == 0

        # (c) no widget error box, no widget or console error
        page.wait_for_timeout(1000)  # whatever would still render
        assert page.evaluate(VISIBLE_BOXES) == []
        assert page.evaluate(IN_CELL, [1, ".jupyter-widgets-error-widget"]) == 0
        assert not [e for e in errors if NO_MODULE in e], errors
        ours = [e for e in errors if not any(b in e for b in BENIGN)]
        (ARTIFACTS / "nb7-console-errors.txt").write_text("\n".join(errors))
        assert not ours, ours
        cell.locator(".loadeval-dashboard .loadeval-verdict").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "nb7-02-verdict.png"), full_page=True)
