"""The notebook probe: a notebook built in memory (a loader, ``%load_ext loadeval_nb``,
``%%loadeval --ladder``, a cell that prints what the ladder found as one JSON line), run
in a real kernel through nbclient, as a user's notebook runs."""

from __future__ import annotations

import json
import time
from typing import Any

from .harness import Ctx, child_env

NB_SETUP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
device = {device!r}
dl = DataLoader(TensorDataset(torch.randn({n}, 3, 64, 64)), batch_size=32, pin_memory={pin})
w = torch.randn(3, device=device)
"""
NB_MAGIC = """\
%%loadeval dl --ladder --steps {steps} --warmup 2 --cache 3
for (x,) in dl:
    x = x.to(device, non_blocking=True)
    (x.mean(dim=(0, 2, 3)) * w).sum().item()
"""
NB_PROBE = """\
import json
def _run(rung):  # a rung's Run
    return rung.run
_r = _loadeval
_runs = {g.name: _run(g) for g in _r.rungs if g.skipped is None}
_dev = _runs.get("device")
print("PROBE " + json.dumps({
    "ok": _r.ok,
    "ran": [name for name, run in _runs.items() if run is not None],
    "device_cache_on": (_dev.settings or {}).get("cache_on") if _dev is not None else None,
    "gpu_util": {name: run.mean_gpu_util_pct() for name, run in _runs.items() if run is not None},
    "conclusion": _r.conclusion(),
}))
"""


def notebook_probe(ctx: Ctx) -> tuple[dict[str, Any], float]:
    """Build a notebook in memory, run it in a real kernel (nbclient), read the probe."""
    import nbformat
    from nbclient import NotebookClient

    steps = ctx.pick(20, 16, 12)
    cells = [
        NB_SETUP.format(device=ctx.dev.type, n=32 * (steps + 4), pin=ctx.cuda),
        "%load_ext loadeval_nb",
        NB_MAGIC.format(steps=steps),
        NB_PROBE,
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    t = time.perf_counter()
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ctx.tmp)}}
    ).execute(env=child_env())
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    line = next(ln for ln in text.splitlines() if ln.startswith("PROBE "))
    return json.loads(line[len("PROBE ") :]), time.perf_counter() - t
