"""A stand-in for ``pynvml`` in a dry run: one GPU that always reads ``UTIL_PCT``, so that
the tool's NVML series, the windows cut from it and the comparison with the nvidia-smi
stand-in (which prints the same number) run on CPU. Installed in ``sys.modules`` before
the tool first asks NVML; never on a machine with CUDA."""

from __future__ import annotations

import sys
import types
from typing import Any

UTIL_PCT = 42


class _Reading:
    gpu = UTIL_PCT
    memory = 0
    used = 1 << 30


def _module() -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.__doc__ = "gpu_truth's dry-run stand-in for NVML (one GPU, constant readings)"
    calls: dict[str, Any] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ("fake-gpu", i),
        "nvmlDeviceGetName": lambda h: "gpu_truth dry-run GPU",
        "nvmlDeviceGetUtilizationRates": lambda h: _Reading(),
        "nvmlDeviceGetMemoryInfo": lambda h: _Reading(),
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [],
    }
    for name, fn in calls.items():
        setattr(m, name, fn)
    return m


def install() -> None:
    """Put the stand-in where ``import pynvml`` finds it (this process only)."""
    sys.modules["pynvml"] = _module()
