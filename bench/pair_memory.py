"""What a finished pair keeps in memory: the result of ``run_pair`` over a loader whose
20-batch replay cache is 400 MB, held as ``_loadeval`` holds it.

    python bench/pair_memory.py [--batches 20] [--mb 20]

Prints the process's resident memory before the pair, right after it (the result still
held) and after dropping the result, and what the result holds (ratios to the cache).
Runs on CPU; the same holds for a device cache, whose memory the release frees on the
GPU. Works with the releases before the runner held Run records too (compare the two).
"""

from __future__ import annotations

import argparse
import ctypes
import gc

import psutil
import torch
from torch.utils.data import DataLoader, Dataset

import loadeval_nb
from loadeval_nb import RunSettings, run_pair


class Big(Dataset):
    """Each item a fresh ``mb`` MB tensor: a batch of one is ``mb`` MB."""

    def __init__(self, n: int, mb: int) -> None:
        self.n, self.numel = n, mb * 1_000_000 // 4

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((self.numel,), float(i))


def rss_mb() -> float:
    gc.collect()
    try:  # give freed pages back to the OS, so RSS shows what is still held
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    return psutil.Process().memory_info().rss / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--mb", type=int, default=20)
    args = ap.parse_args()
    loader = DataLoader(Big(4 * args.batches, args.mb), batch_size=1)
    fields = RunSettings.__dataclass_fields__
    key = "num_cached_batches" if "num_cached_batches" in fields else "cache"  # older releases
    settings = RunSettings(
        steps=2 * args.batches, warmup=2, sample_interval_s=None, **{key: args.batches}
    )

    def run_once(ev) -> None:
        for x in ev:
            x.sum()

    before = rss_mb()
    result = run_pair(loader, run_once, settings)
    assert result.error is None, result.error
    held = rss_mb()
    del result
    dropped = rss_mb()
    cache = args.batches * args.mb
    print(
        f"loadeval_nb {loadeval_nb.__version__}: a {cache} MB replay cache ({args.batches} x {args.mb} MB)"
    )
    print(f"  resident before the pair:          {before:8.0f} MB")
    print(
        f"  after, the result held:            {held:8.0f} MB  (+{held - before:.0f} MB, {(held - before) / cache:.2f}x the cache)"
    )
    print(f"  after dropping the result:         {dropped:8.0f} MB  (+{dropped - before:.0f} MB)")


if __name__ == "__main__":
    main()
