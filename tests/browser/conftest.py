"""What the browser tests share: a Jupyter server of their own (JupyterLab or Notebook 7)
on 127.0.0.1, headless Debian Chromium through Playwright (never ``playwright install``),
and the page probes every host answers alike (kernel state, a busy prompt, a save).

The server gets a config folder of its own (``JUPYTER_CONFIG_DIR``), so a labextension
disabled for one test stays enabled in the environment; it is stopped with the kernels it
started. ``served`` gives a test a server over a temporary folder with its notebooks, and
``open_page`` a notebook of it open in Chromium with its kernel idle and the console's
errors collected. Screenshots go to ``ARTIFACTS`` (test-artifacts/; LOADEVAL_ARTIFACTS
overrides).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, NamedTuple

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("LOADEVAL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("LOADEVAL_ARTIFACTS", ROOT / "test-artifacts"))
# Console messages that are not ours and not errors of the page under test.
BENIGN = (
    "reading 'schema'",  # Notebook 7.6.5, even for print(1) (shared/notes)
    "could not set initial ranges",  # Bokeh, plots that start empty
    "Failed to load resource: net::ERR_",  # closed network: no internet by design
)
APPS = {"lab": "JupyterLab", "notebook": "Notebook 7"}
"""The server each host is (``jupyter lab``, ``jupyter notebook``), by its command."""


def need_browser() -> None:
    """Skip (fail in CI) where Playwright or Chromium is missing."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed"
    else:
        if os.path.exists(CHROMIUM):
            return
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"the browser test must run in CI: {reason}")
    pytest.skip(reason)


def need_app(app: str) -> None:
    """Skip (fail in CI) where the ``app`` server (``lab``, ``notebook``) is not installed."""
    module = {"lab": "jupyterlab", "notebook": "notebook"}[app]
    try:
        __import__(module)
    except ImportError:
        reason = f"{APPS[app]} is not installed (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {reason}")
        pytest.skip(reason)


class Server(NamedTuple):
    """A Jupyter server of the test's own: its address, token, root folder and environment."""

    url: str
    token: str
    root: Path
    env: dict[str, str]


class Opened(NamedTuple):
    """A notebook page open in Chromium, and the console errors and page errors it logged
    (the list keeps growing while the page is open)."""

    page: Any
    errors: list[str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(
    root: Path,
    app: str = "lab",
    disabled: tuple[str, ...] = (),
    drop_env: tuple[str, ...] = (),
):
    """A Jupyter server (``app``: ``lab`` or ``notebook``) on 127.0.0.1 over ``root`` with a
    config of its own (``disabled`` labextensions off in its own page_config, never the
    environment's; ``drop_env`` taken out of its environment), stopped with the kernels it
    started; yields its ``Server``."""
    need_app(app)
    port, token = free_port(), "loadeval-test-token"
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
        "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
    }
    for name in drop_env:
        env.pop(name, None)
    # no "get notified about Jupyter news?" pop-up over the page
    off = {"@jupyterlab/apputils-extension:announcements": True, **dict.fromkeys(disabled, True)}
    (root / ".jupyter" / "labconfig").mkdir(parents=True)
    (root / ".jupyter" / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": off})
    )
    cls = {"lab": "LabApp", "notebook": "JupyterNotebookApp"}[app]
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            app,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            f"--{cls}.expose_app_in_browser=True",
            "--ServerApp.port_retries=0",
            *(
                [
                    "--LabApp.extension_manager=readonly",
                    "--LabApp.news_url=",
                    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                ]
                if app == "lab"
                else []
            ),
            *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{APPS[app]} did not start:\n" + (root / "server.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.3)
        yield Server(url, token, root, env)
    finally:
        kids = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for k in kids:  # kernels that outlived the server
            try:
                k.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(kids, timeout=10)
        log.close()


def notebook_json(cells: list[str]) -> str:
    """An unexecuted notebook of code ``cells`` on the python3 kernel, as its file holds it."""
    return json.dumps(
        {
            "cells": [
                {"cell_type": "code", "metadata": {}, "source": src, "outputs": [],
                 "execution_count": None}
                for src in cells
            ],
            "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )  # fmt: skip


@contextlib.contextmanager
def served(prefix: str, files: dict[str, str | Path], **serve_kw):
    """``serve`` over a fresh temporary folder (``prefix``) holding ``files`` (name: the
    text to write, or a Path to copy), removed after; skips where the browser is missing."""
    need_browser()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copy(content, root / name)
            else:
                (root / name).write_text(content)
        with serve(root, **serve_kw) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def open_page(
    server: Server,
    path: str,
    *,
    timeout_shot: str | None = None,
    profile: str = "chromium-profile",
):
    """The notebook at ``path`` of ``server`` (``lab/tree/x.ipynb``, ``notebooks/x.ipynb``)
    open in headless Chromium (a fresh ``profile`` under the server's root), its cells shown
    and its kernel connected and idle; yields ``Opened(page, errors)``. A Playwright timeout
    inside becomes an AssertionError that says what the page saw (``diagnose``), after a
    screenshot ``timeout_shot`` in ARTIFACTS where one is named."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as pw:
        ctx = launch_chromium(pw, server.root / profile)
        try:
            page = ctx.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            page.goto(f"{server.url}/{path}?token={server.token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            # a started, connected, idle kernel before the test runs anything (a fixed
            # pause was not enough on a cold CI machine)
            page.wait_for_function(KERNEL_IDLE, timeout=180_000)
            yield Opened(page, errors)
        except PlaywrightTimeout as e:
            if timeout_shot:
                page.screenshot(path=str(ARTIFACTS / timeout_shot), full_page=True)
            raise AssertionError(f"{e}\n{diagnose(page, server.root, errors)}") from None
        finally:
            ctx.close()


def launch_chromium(pw, profile: Path):
    """Headless Chromium with a fresh profile, 1280 px wide (a laptop's notebook)."""
    return pw.chromium.launch_persistent_context(
        str(profile),
        executable_path=CHROMIUM,
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run"],
        viewport={"width": 1280, "height": 1000},
    )  # fmt: skip


KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""
KERNEL_STATE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return k ? `${k.name}: ${k.connectionStatus}, ${k.status}` : 'no kernel';
}"""
OUTPUTS = """() => [...document.querySelectorAll('.jp-OutputArea-output')]
  .map(e => e.innerText.slice(0, 800)).join('\\n---\\n')"""
BUSY = (
    "() => [...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'))"
)
"""Whether a cell's prompt reads ``[*]`` (the kernel's status indicator is not reliable
during widget callbacks; the prompt is)."""
STEP_POINTS = """() => {
  const docs = (window.Bokeh && window.Bokeh.documents) || [];
  let n = -1;
  for (const d of docs) for (const m of d.all_models)
    if (m.name === 'live_steps_real' && m.data && m.data.step) n = Math.max(n, m.data.step.length);
  return n;
}"""
"""Points on the live step line of the real run, as BokehJS holds them (-1: no plot)."""
VISIBLE_BOXES = """() => [...document.querySelectorAll('.jp-OutputArea-output')]
  .filter(e => e.checkVisibility())
  .map(e => e.innerText)
  .filter(t => /Loading widget|Error displaying widget|javascript error/.test(t))"""
"""Visible outputs that say a widget is loading or failed."""
SAVE = "async () => { await window.jupyterapp.commands.execute('docmanager:save'); }"
RUN_ALL = "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"


def read_again(
    page,
    count: Callable[[], int],
    busy: Callable[[], bool],
    first: int,
    seconds: float,
    also: Callable[[], None] | None = None,
) -> tuple[int, bool]:
    """The second of two reads of a live ``count`` (points on a plot) while the cell is
    ``busy``: polled every 250 ms (``also`` run at each poll) for ``seconds``, until it
    passes ``first`` or the cell is done; returns the read and whether the cell was busy."""
    second, still_busy = first, True
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page.wait_for_timeout(250)
        if also is not None:
            also()
        second = count()
        still_busy = busy()
        if second > first or not still_busy:
            break
    return second, still_busy


def diagnose(page, root: Path, errors: list[str]) -> str:
    """What a failed wait saw: kernel state, cell outputs, console errors, server log."""
    parts = []
    for name, js in (("kernel", KERNEL_STATE), ("outputs", OUTPUTS), ("busy", BUSY)):
        try:
            parts.append(f"{name}: {page.evaluate(js)}")
        except Exception as e:  # the page itself may be the problem
            parts.append(f"{name}: <{e}>")
    parts.append("console errors: " + " | ".join(errors[-10:]))
    log = root / "server.log"
    if log.exists():
        parts.append("server log tail:\n" + log.read_text(errors="replace")[-3000:])
    return "\n".join(parts)
