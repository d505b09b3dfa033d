"""A host without jupyter_bokeh's widget JavaScript, for real: JupyterLab on 127.0.0.1 with
the ``@bokeh/jupyter_bokeh`` labextension disabled in the test's own JUPYTER_CONFIG_DIR
(its ``labconfig/page_config.json``: what VS Code without ``jupyter.widgetScriptSources``
and Colab get), driven by headless Debian Chromium through Playwright.

A ``%%loadeval --view html`` cell: its live output (the status line and the step-time SVG,
refreshed through a display handle) grows between reads while the cell is busy, with no
widget error box and no "No version of module" error in the console; then the verdict and
the rerun panel (ipywidgets core). A ``--view bokeh`` cell in the same page, run only once
those are checked (its Bokeh models are what the console's error is about): its plots
cannot render there, and still its status line and rerun panel show, and the static copy
holds the verdict. The notebook, saved, is exported by nbconvert to HTML and opened in
Chromium: the result shows. Screenshots go to test-artifacts/ (LOADEVAL_ARTIFACTS
overrides).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from .conftest import (
    ARTIFACTS,
    BUSY,
    SAVE,
    diagnose,
    launch_chromium,
    notebook_json,
    open_page,
    served,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NO_MODULE = "No version of module @bokeh/jupyter_bokeh is registered"
SETUP = """\
import time, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self): return 4096
    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.full((4,), float(i))

train_loader = DataLoader(Slow(), batch_size=2)
%load_ext loadeval_nb"""
LOOP = "for x in train_loader:\n    time.sleep(0.01)"
CELLS = [
    SETUP,
    "%%loadeval train_loader --steps 200 --warmup 5 --cache 5 --view html\n" + LOOP,
    "%%loadeval train_loader --steps 30 --warmup 2 --cache 3 --view bokeh\n" + LOOP,
]
CELL = "(i) => document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
AT_BOKEH = """(command) => {
  window.jupyterapp.shell.currentWidget.content.activeCellIndex = 2;
  window.jupyterapp.commands.execute(command);
}"""
"""Run ``command`` at the bokeh view's cell: first ``notebook:run-all-above`` (the setup
and the html view's cells: the bokeh view's models raise the console error the html view
must not, and on a quick machine it started before the html view's verdict was read),
then ``notebook:run-cell`` once the html view is checked."""
LIVE = f"""() => {{
  const cell = ({CELL})(1);
  const el = cell && cell.querySelector('.loadeval-live');
  if (!el) return null;
  const pts = [...el.querySelectorAll('polyline')].map(p => p.getAttribute('points').trim().split(/\\s+/).length);
  return {{status: el.querySelector('.loadeval-status').innerText, points: pts.reduce((a, b) => a + b, 0)}};
}}"""
"""The html view of the second cell: its status line and the points its chart draws."""
ERROR_BOXES = f"""(i) => {{
  const cell = ({CELL})(i), shown = (e) => e.checkVisibility();
  const boxes = [...cell.querySelectorAll('.jupyter-widgets-error-widget')].filter(shown);
  const said = [...cell.querySelectorAll('.jp-OutputArea-output')].filter(shown)
    .filter(e => /Loading widget|Error displaying widget|javascript error/.test(e.innerText));
  return [...boxes, ...said].map(e => e.innerText.slice(0, 200));
}}"""
"""Visible outputs of a cell that hold a widget error (or say one is loading or failed)."""
VISIBLE = """(sel) => [...document.querySelectorAll(sel)].filter(e => e.checkVisibility()).length"""
IN_CELL = f"""([i, sel]) => [...({CELL})(i).querySelectorAll(sel)]
  .filter(e => e.checkVisibility()).length"""
"""How many elements of cell ``i`` that match ``sel`` are visible."""


@pytest.fixture
def lab_without_bokeh_js():
    # jupyter_bokeh's labextension disabled in this server's own config only (the
    # command, `jupyter labextension disable`, writes to the environment's sys-prefix
    # config by default: every JupyterLab of the environment would lose it)
    with served(
        "loadeval-hosts-",
        {"hosts.ipynb": notebook_json(CELLS)},
        disabled=("@bokeh/jupyter_bokeh",),
        drop_env=("LOADEVAL_VIEW", "VSCODE_PID"),
    ) as server:
        listed = subprocess.run(
            [sys.executable, "-m", "jupyter", "labextension", "list"],
            env=server.env,
            capture_output=True,
            text=True,
        )
        listing = listed.stdout + listed.stderr
        assert re.search(r"@bokeh/jupyter_bokeh.*disabled", listing), listing
        yield server


def test_html_view_where_jupyter_bokeh_cannot_load(lab_without_bokeh_js):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    root, env = lab_without_bokeh_js.root, lab_without_bokeh_js.env
    opened = open_page(
        lab_without_bokeh_js, "lab/tree/hosts.ipynb", timeout_shot="hosts-99-timeout.png"
    )
    with opened as (page, errors):
        # the setup cell, then the html view's cell (the bokeh view's cell after its checks)
        page.evaluate(AT_BOKEH, "notebook:run-all-above")

        # (a) live: the html view gains steps and points between reads while busy
        reads: list[dict] = []
        seen: list[object] = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            live = page.evaluate(LIVE)
            busy = page.evaluate(BUSY)
            seen.append((busy, live))
            if live and busy and re.search(r"real step \d+", live["status"]):
                reads.append(live)
                if len(reads) == 1:
                    page.screenshot(path=str(ARTIFACTS / "hosts-01-html-live.png"), full_page=True)
            if page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".loadeval-verdict").count():
                break
            page.wait_for_timeout(300)
        else:
            pytest.fail("the html view's verdict never came:\n" + diagnose(page, root, errors))
        steps = [sum(int(n) for n in re.findall(r"step (\d+)", r["status"])) for r in reads]
        assert len(reads) >= 2, (seen[:40], diagnose(page, root, errors))
        assert steps[-1] > steps[0] and reads[-1]["points"] > reads[0]["points"], reads
        # no widget error anywhere in the html view's cell, none in the console
        assert page.evaluate(ERROR_BOXES, 1) == []
        assert not [e for e in errors if NO_MODULE in e], errors

        # (b) the verdict and the rerun panel (ipywidgets core), the chart of both sides
        cell2 = page.locator(".jp-Notebook .jp-Cell").nth(1)
        cell2.locator(".loadeval-panel button.loadeval-rerun").wait_for(timeout=60_000)
        assert page.evaluate(IN_CELL, [1, ".loadeval-dashboard .loadeval-verdict"]) == 1
        done = page.evaluate(LIVE)
        assert done["status"].startswith("Done: ") and done["points"] >= reads[-1]["points"]
        assert done["points"] >= 300  # the whole runs: about 190 steps a side
        assert cell2.locator(".loadeval-live polyline").count() == 2  # real, ideal
        # the static copy stays hidden while the widgets show
        assert page.evaluate(IN_CELL, [1, ".loadeval-not-yet, [class$='-static']"]) == 0
        cell2.locator(".loadeval-panel").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "hosts-02-html-verdict.png"), full_page=True)

        # (c) the bokeh view in the same page: its plots cannot render (the module is
        # not registered), its status line, panel and saved verdict still show
        page.wait_for_function(f"() => !({BUSY[6:]})", timeout=60_000)
        page.evaluate(AT_BOKEH, "notebook:run-cell")
        cell3 = page.locator(".jp-Notebook .jp-Cell").nth(2)
        try:
            cell3.locator(".loadeval-panel button.loadeval-rerun").wait_for(timeout=180_000)
        except PlaywrightTimeout:
            pytest.fail("the bokeh view's panel never came:\n" + diagnose(page, root, errors))
        page.wait_for_function(f"() => !({BUSY[6:]})", timeout=60_000)
        assert [e for e in errors if NO_MODULE in e], "the labextension was not disabled"
        assert page.evaluate(IN_CELL, [2, ".loadeval-status"]) == 1
        assert page.evaluate(IN_CELL, [2, ".loadeval-verdict"]) == 1  # the static copy's
        assert page.evaluate(IN_CELL, [2, ".loadeval-plots"]) == 0  # hidden: no error box
        assert page.evaluate(ERROR_BOXES, 2) == []
        cell3.locator(".loadeval-panel").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "hosts-03-bokeh-without-js.png"), full_page=True)

        page.evaluate(SAVE)
        page.wait_for_timeout(1000)

    # (d) the saved notebook, exported by nbconvert to HTML: the result shows
    nb = root / "hosts.ipynb"
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", str(nb)],
        env=env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    exported = root / "hosts.html"
    with sync_playwright() as pw:
        ctx = launch_chromium(pw, root / "chromium-profile-2")
        try:
            page = ctx.new_page()
            page.goto(exported.as_uri())
            page.wait_for_selector(".loadeval-verdict", timeout=30_000)
            shown = page.evaluate(VISIBLE, ".loadeval-verdict")
            assert shown >= 2, shown  # each cell's static copy holds its verdict
            assert page.evaluate(VISIBLE, ".loadeval-not-yet") == 0
            text = page.evaluate("() => document.body.innerText")
            assert "loadeval_nb result (static copy)" in text and "Done: " in text
            assert (
                page.evaluate(VISIBLE, ".loadeval-live svg polyline") == 2
            )  # the html view's chart
            page.screenshot(path=str(ARTIFACTS / "hosts-04-nbconvert.png"), full_page=True)
        finally:
            ctx.close()
