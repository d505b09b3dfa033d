"""Execute a shipped notebook with nbclient and print what its `%%loadeval` cells found.

Used to check ``notebooks/image_pipeline.ipynb`` on a machine with a GPU: the
verdict lines and the GPU utilisation of each run (from the pairs' run logs,
NVML readings) are printed, and the executed notebook is saved beside ``--out``.

    python bench/run_notebook.py notebooks/image_pipeline.ipynb --out executed.ipynb
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# Run in the kernel after the notebook: one line per pair, GPU readings from the run logs.
PROBE = r"""
import json as _json
def _util(run):
    if run is None:
        return None
    gpu = (run.util or {}).get("gpu") or {}
    return {"gpu": gpu.get("available"), "gpu_reason": gpu.get("reason"),
            "mean_gpu_util_pct": run.mean_gpu_util_pct(),
            "gpu_samples": sum(len(s) for s in gpu.get("util_pct") or []),
            "mean_process_cpu_pct": run.mean_cpu_pct("process_pct"),
            "mean_workers_cpu_pct": run.mean_cpu_pct("workers_pct"),
            "median_step_s": run.summary()["step"].get("median_s")}
_r = _loadeval
if hasattr(_r, "rungs"):  # a caching ladder: one entry per rung
    print("PROBE", _json.dumps({r.name: _util(r.run) or r.skipped for r in _r.rungs}, default=str))
else:
    print("PROBE", _json.dumps({"real": _util(_r.real), "ideal": _util(_r.ideal),
          "speedup": getattr(_r.diagnosis, "speedup", None)}, default=str))
"""


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("notebook")
    ap.add_argument("--out", default="executed.ipynb")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    nb = nbformat.read(args.notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    t = time.perf_counter()
    NotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(args.notebook).resolve().parent)}},
    ).execute()
    print(f"executed {args.notebook} in {time.perf_counter() - t:.1f} s")
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                print(o.text.rstrip())
            elif o.output_type == "display_data":
                text = o.get("data", {}).get("text/plain", "")
                if "Verdict" in text or text.startswith("Caching ladder"):
                    print(re.sub(r"\n+", "\n", text).strip())
    nbformat.write(nb, args.out)
    print("saved", args.out)


if __name__ == "__main__":
    main()
