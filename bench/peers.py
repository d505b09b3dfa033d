"""Per-step cost side by side with the peers, in one process, interleaved with the bare loop.

    python bench/peers.py [--steps 1000] [--reps 9] [--rounds 5]

Variants, each timed over whole epochs of a list of ``--steps`` small tensors:

  bare                      ``for _ in source: pass``
  ours log, samplers off    LoaderEvaluator(source, sample_interval_s=None)
  ours log, samplers on     LoaderEvaluator(source)  (the default: 10 Hz GPU/CPU sampler)
  ours replay               LoaderEvaluator(source, mode="replay", sample_interval_s=None)
  ours interleaved, a pass  LoaderEvaluator(source, mode="pair", steps=--steps/2, sample_interval_s=None):
                            the default pair, both sides in one pass (a new evaluator each
                            repetition: the pass fills its cache from the real warm-up)
  ours interleaved, a step  the same, one more step: a pass 4x as long, less that pass
  DALI log / replay         NVIDIA DALI's LoaderEvaluator (package nvidia-dali-cuda120)
  SPDL cache_iterator       spdl.pipeline.cache_iterator (untimed: a floor for replay)

A peer that is not installed is skipped with a line. DALI's class is pure Python, but
``nvidia.dali``'s ``__init__`` needs the rest of DALI (optree, the CUDA libraries):
when that import fails, the class is loaded from its file in the installed wheel.
Install the peers into a bench-only environment, never into CI::

    python -m venv --system-site-packages /tmp/benchenv
    /tmp/benchenv/bin/pip install --no-deps nvidia-dali-cuda120 && /tmp/benchenv/bin/pip install spdl
    /tmp/benchenv/bin/python bench/peers.py

Each repetition runs every variant once, in a rotating order, with the cyclic GC off
(as timeit does); a variant's added cost is the median over repetitions of (its epoch
minus the bare epoch of the same repetition) / steps. Ratios against DALI are taken
within a round; ``--rounds`` repeats the whole measurement to show the run-to-run spread.

Goals (issue 13): log (samplers off) <= 0.8x DALI's log; replay <= 0.5x DALI's replay;
log with the default samplers on 1,000-step epochs <= 1.5x DALI's log.

A pair's cost per measured step: ours interleaved against DALI's pair, a log epoch then
a replay epoch (the mean of its two rows; DALI fills its cache in the constructor,
untimed). "a step" is what one more step of the pass costs; "a pass" adds, spread over
the pass's steps, what the pass costs once (the cache filled from the warm-up, checked
at the end, the blocks' changes): those fall in warm-up and drained steps, which the
numbers leave out.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import statistics
import time
from typing import Any, Callable, Optional

import torch

from loadeval_nb import LoaderEvaluator
from loadeval_nb.measure import step_path

clock = time.perf_counter_ns
GOALS = {
    "ours log, samplers off": ("DALI log", 0.8),
    "ours replay": ("DALI replay", 0.5),
    "ours log, samplers on": ("DALI log", 1.5),
}


def dali_class() -> tuple[Optional[type], str]:
    try:
        from nvidia.dali.plugin.pytorch.loader_evaluator import (  # type: ignore[import-not-found]
            LoaderEvaluator as Dali,
        )

        return Dali, "nvidia.dali.plugin.pytorch.loader_evaluator"
    except Exception as e:  # not installed, or nvidia.dali's __init__ needs CUDA/optree
        why = f"{type(e).__name__}: {e}"
    rel = "nvidia/dali/plugin/pytorch/loader_evaluator/loader.py"
    for dist in ("nvidia-dali-cuda120", "nvidia-dali-cuda130", "nvidia-dali-cuda110"):
        try:
            path = importlib.metadata.distribution(dist).locate_file(rel)
        except importlib.metadata.PackageNotFoundError:
            continue
        spec = importlib.util.spec_from_file_location("dali_loader_evaluator", str(path))
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.LoaderEvaluator, f"{dist} ({path}; the package import failed: {why})"
    return None, f"skipped: nvidia-dali-cuda120 is not installed ({why})"


def spdl_cache_iterator() -> tuple[Optional[Callable[..., Any]], str]:
    try:
        from spdl.pipeline import cache_iterator  # type: ignore[import-not-found]

        return cache_iterator, f"spdl {importlib.metadata.version('spdl')}"
    except Exception as e:
        return None, f"skipped: spdl is not installed ({type(e).__name__})"


def epoch(iterable: Any) -> int:
    t = clock()
    for _ in iterable:
        pass
    return clock() - t


def interleaved_pass(source: list[Any], cache: int) -> tuple[int, int]:
    """One interleaved pass of ``len(source) / 2`` steps a side: (its ns, steps it served:
    both sides and the drains). A new evaluator: the pass fills its cache from the warm-up."""
    ev = LoaderEvaluator(
        source,
        mode="pair",
        steps=len(source) // 2,
        warmup=10,
        num_cached_batches=cache,
        sample_interval_s=None,
    )
    n = 0
    t = clock()
    for _ in ev:
        n += 1
    t = clock() - t
    ev.release()
    return t, n


def interleaved_whole(source: list[Any], cache: int) -> int:
    """A whole pass, scaled to ``len(source)`` steps (the cache's fill included)."""
    t, n = interleaved_pass(source, cache)
    return t * len(source) // n


def interleaved_steady(source: list[Any], long: list[Any], cache: int) -> int:
    """The cost of one more step, scaled to ``len(source)`` steps: a pass over ``long``
    less a pass over ``source``, over the steps between (what a pass costs once, the
    cache's fill and its checks, falls in warm-up and drained steps, out of the numbers)."""
    t1, n1 = interleaved_pass(source, cache)
    t2, n2 = interleaved_pass(long, cache)
    return (t2 - t1) * len(source) // (n2 - n1)


def variants(source: list[Any], cache: int) -> tuple[dict[str, Callable[[], int]], list[str]]:
    steps = len(source)
    notes = []
    ours_off = LoaderEvaluator(source, sample_interval_s=None)
    ours_on = LoaderEvaluator(source)
    ours_replay = LoaderEvaluator(
        source, mode="replay", num_cached_batches=cache, sample_interval_s=None
    )
    out: dict[str, Callable[[], int]] = {
        "bare": lambda: epoch(source),
        "ours log, samplers off": lambda: epoch(ours_off),
        "ours log, samplers on": lambda: epoch(ours_on),
        "ours replay": lambda: epoch(ours_replay),
        "ours interleaved, a step": lambda: interleaved_steady(source, source * 4, cache),
        "ours interleaved, a pass": lambda: interleaved_whole(source, cache),
    }
    Dali, where = dali_class()
    notes.append(f"DALI LoaderEvaluator: {where}")
    if Dali is not None:
        dali_log = Dali(source, mode="log")
        dali_replay = Dali(source, mode="replay", num_cached_batches=cache)
        out["DALI log"] = lambda: epoch(dali_log)
        out["DALI replay"] = lambda: epoch(dali_replay)
    cache_iterator, where = spdl_cache_iterator()
    notes.append(f"SPDL cache_iterator: {where}")
    if cache_iterator is not None:
        out["SPDL cache_iterator"] = lambda: epoch(
            cache_iterator(source, cache, return_caches_after=cache, stop_after=steps)
        )
    return out, notes


def one_round(vs: dict[str, Callable[[], int]], reps: int, steps: int) -> dict[str, float]:
    """Added ns/step of each variant over the bare loop: the median of paired differences."""
    names = list(vs)
    for k in names:  # warm-up: first-epoch costs (first-batch inspection, thread start)
        vs[k]()
    added: dict[str, list[float]] = {k: [] for k in names if k != "bare"}
    gc.disable()
    try:
        for r in range(reps):
            order = names[r % len(names) :] + names[: r % len(names)]
            t = {k: vs[k]() for k in order}
            for k in added:
                added[k].append((t[k] - t["bare"]) / steps)
    finally:
        gc.enable()
    out = {k: statistics.median(v) for k, v in added.items()}
    if "DALI log" in out and "DALI replay" in out:
        out["DALI pair (log, replay)"] = (out["DALI log"] + out["DALI replay"]) / 2
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="steps per epoch (default 1000)")
    ap.add_argument("--reps", type=int, default=9, help="repetitions per round (default 9)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, for the spread (default 5)")
    ap.add_argument("--cache", type=int, default=20, help="cached batches (default 20)")
    a = ap.parse_args()
    source = [torch.zeros(4) for _ in range(a.steps)]
    vs, notes = variants(source, a.cache)
    print(f"our per-step path: {step_path()} (LOADEVAL_NB_PURE_PYTHON=1: the pure-Python one)")
    print("\n".join(notes))
    rounds = [one_round(vs, a.reps, a.steps) for _ in range(a.rounds)]
    print(f"\nadded ns/step over the bare loop ({a.steps:,}-step epochs; median of {a.reps} paired")
    print(f"repetitions; {a.rounds} rounds: median [min-max])")
    for k in rounds[0]:
        vals = [r[k] for r in rounds]
        print(f"  {k:<26} {statistics.median(vals):7.0f} ns  [{min(vals):.0f}-{max(vals):.0f}]")
    print("\nratios (within each round), against the goals")
    for ours, (peer, goal) in GOALS.items():
        if peer not in rounds[0]:
            print(f"  {ours} / {peer}: {peer} not installed")
            continue
        ratios = [r[ours] / r[peer] for r in rounds]
        med = statistics.median(ratios)
        verdict = "meets" if med <= goal else "MISSES"
        print(
            f"  {ours} / {peer}: {med:.2f}x  [{min(ratios):.2f}-{max(ratios):.2f}]"
            f"  goal <= {goal}x: {verdict}"
        )
    if "DALI pair (log, replay)" in rounds[0]:
        for ours in ("ours interleaved, a step", "ours interleaved, a pass"):
            ratios = [r[ours] / r["DALI pair (log, replay)"] for r in rounds]
            print(
                f"  {ours} / DALI pair (log, replay): {statistics.median(ratios):.2f}x"
                f"  [{min(ratios):.2f}-{max(ratios):.2f}]"
            )
    if "SPDL cache_iterator" in rounds[0]:
        ratios = [r["ours replay"] / max(r["SPDL cache_iterator"], 1.0) for r in rounds]
        print(f"  ours replay / SPDL cache_iterator (untimed): {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
