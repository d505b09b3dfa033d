"""Whether there is anything to measure here: asked before loadeval_nb is imported."""

from __future__ import annotations

import os
from collections.abc import Sequence

NO_CUDA_LINE = (
    "gpu_truth: no CUDA device here; nothing to measure (run this on a machine with an NVIDIA GPU)"
)
DRY_ENV = "GPU_TRUTH_DRY_RUN"


def dry_by_env() -> bool:
    return os.environ.get(DRY_ENV, "") not in ("", "0")


def nothing_to_measure(argv: Sequence[str]) -> bool:
    """No CUDA, and no dry run (or help) asked for."""
    if {"--dry-run", "-h", "--help"} & set(argv) or dry_by_env():
        return False
    import torch

    return not torch.cuda.is_available()
