"""The shipped notebooks run top to bottom under nbclient, and their saved form is useful."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def execute(name: str, tmp_path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    out = tmp_path / name
    nbformat.write(nb, out)
    return nb


def outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize(
    "name",
    [
        "quickstart.ipynb",
        "image_pipeline.ipynb",
        "lightning.ipynb",
        "ranks.ipynb",
        "scripts.ipynb",
        "watch_torchrun.ipynb",
    ],
)
def test_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in nb.cells
        if c.cell_type == "code"
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # CPU-bound cells: 75 s quiet, 200 s beside two busy loops
@pytest.mark.parametrize(
    "name, n_pairs, n_ladders",
    [("quickstart.ipynb", 1, 0), ("image_pipeline.ipynb", 2, 1), ("lightning.ipynb", 1, 0)],
)
def test_notebook_runs_and_keeps_a_static_result(name, n_pairs, n_ladders, tmp_path):
    nb = execute(name, tmp_path)
    outs = outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    static = [
        o
        for o in outs
        if o.output_type == "display_data"
        and "loadeval-verdict" in o.get("data", {}).get("text/html", "")
    ]
    # the verdict (or ladder) card, chart and history, without a kernel or JavaScript
    assert len(static) == n_pairs + n_ladders
    assert all(
        "<svg" in o.data["text/html"] and "<script" not in o.data["text/html"] for o in static
    )
    plain = [o.data["text/plain"] for o in static]
    assert sum("Verdict:" in t for t in plain) == n_pairs
    assert sum(t.startswith("Caching ladder") for t in plain) == n_ladders
    widgets = [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) == n_pairs + n_ladders
    assert nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    # BokehJS was sent inline for the live plots, then emptied: the saved notebook stays small
    assert not [o for o in outs if "application/vnd.bokehjs_load.v0+json" in o.get("data", {})]
    assert len(json.dumps(nb)) < 2_000_000
    printed = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert "Verdict:" in printed


@pytest.mark.slow
def test_two_rank_notebook_shows_the_gathered_report(tmp_path):
    nb = execute("ranks.ipynb", tmp_path)
    outs = outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert "2 ranks: rank 1 is a straggler" in printed
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outs)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert any("rank 1 is a straggler" in json.dumps(m) for m in state.values())


def _static_cards(outs):
    return [
        o
        for o in outs
        if o.output_type == "display_data"
        and "loadeval-verdict" in o.get("data", {}).get("text/html", "")
    ]


@pytest.mark.slow
def test_script_notebook_measures_the_script_it_writes(tmp_path):
    nb = execute("scripts.ipynb", tmp_path)
    outs = outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    assert (tmp_path / "train.py").exists()
    # each %loadeval_run: a dashboard, and its saved copy holding the verdict card
    static = _static_cards(outs)
    assert len(static) == 2
    assert all("Verdict:" in o.data["text/plain"] for o in static)
    assert all("<script" not in o.data["text/html"] for o in static)
    widgets = [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) == 2
    assert not [o for o in outs if "application/vnd.bokehjs_load.v0+json" in o.get("data", {})]
    assert len(json.dumps(nb)) < 2_000_000
    printed = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert "Verdict: INPUT-BOUND" in printed


@pytest.mark.slow
def test_watch_notebook_follows_a_two_rank_job_to_its_report(tmp_path):
    nb = execute("watch_torchrun.ipynb", tmp_path)
    outs = outputs(nb)
    assert not [o for o in outs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in outs if o.output_type == "stream")
    assert "2 ranks: rank 1 is a straggler" in printed
    logs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert [n.split("-")[-2:] for n in logs] == [
        ["ideal", "rank0.json"],
        ["ideal", "rank1.json"],
        ["real", "rank0.json"],
        ["real", "rank1.json"],
    ]
    # the live dashboard, then the ranks' view; the saved copy holds the ranks' card
    widgets = [o for o in outs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(widgets) == 2
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert any("rank 1 is a straggler" in json.dumps(m) for m in state.values())
    static = _static_cards(outs)
    assert len(static) == 1 and "rank 1 is a straggler" in static[0].data["text/plain"]
