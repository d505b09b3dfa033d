"""The script sees exactly the batches it would see without the tool (issue 45): under
``python -m loadeval_nb run`` every batch the loop is handed is, element for element, a
batch the same script draws without the tool, with the same seed — the real ones drawn in
their order, the replayed ones copies of the first, the variant's from copies of the
user's sampler and generator. A loader subclass whose own ``__iter__`` wraps DataLoader's
(``yield b + 0.25``, not idempotent) runs its wrapper once per batch: twice would show as
a batch no plain run draws. Each kind of loader the tool finds, in every method: blocks,
``--sequential``, the loop's own epochs, and ``--try``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from .cli import env, loadeval

SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from torch.utils.data import DataLoader
    torch.manual_seed(0)
    out, kind, epochs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    data = torch.arange(float(n * 3)).reshape(-1, 3)  # each sample's values its own

    class Shift(DataLoader):  # a wrapper that is not idempotent
        def __iter__(self):
            for b in super().__iter__():
                yield b + 0.25

    class Prefetch:  # timm's PrefetchLoader: a plain class around a DataLoader
        def __init__(self, loader):
            self.loader = loader
        def __len__(self):
            return len(self.loader)
        def __iter__(self):
            for b in self.loader:
                yield b * 2 + 0.25

    class Batches:  # an iterable of the script's own, named with --loader-from
        def __init__(self, n):
            self.n, self.g = n, torch.Generator().manual_seed(5)
        def __iter__(self):
            order = torch.randperm(self.n, generator=self.g)
            for i in range(0, self.n - 3, 4):
                yield data[order[i : i + 4]] + 0.25

    if kind == "sub":
        loader = Shift(data, batch_size=4, shuffle=True)
    elif kind == "workers":
        loader = DataLoader(data, batch_size=4, shuffle=True, num_workers=1)
    elif kind == "stateful":
        from torchdata.stateful_dataloader import StatefulDataLoader
        loader = StatefulDataLoader(data, batch_size=4, shuffle=True)
    elif kind == "accelerate":
        from accelerate import Accelerator
        loader = Accelerator(cpu=True).prepare(DataLoader(data, batch_size=4, shuffle=True))
    elif kind == "prefetch":
        loader = Prefetch(DataLoader(data, batch_size=4, shuffle=True))
    elif kind == "iterable":
        loader = Batches(n)
    elif kind == "webloader":  # webdataset's WebLoader over a shard the script writes
        import os, webdataset as wds
        shard = os.path.join(os.path.dirname(os.path.abspath(out)), "shard.tar")
        if not os.path.exists(shard):
            with wds.TarWriter(shard) as w:
                for i in range(n):
                    w.write({"__key__": f"{i:05d}", "x.pyd": data[i].tolist()})
        ds = wds.WebDataset([shard], shardshuffle=False).decode().to_tuple("x.pyd")
        ds = ds.map_tuple(torch.tensor).batched(4)
        loader = wds.WebLoader(ds, batch_size=None).map(lambda b: b[0] + 0.25)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = []
    try:
        for epoch in range(epochs):
            for x in loader:
                seen.append(x.flatten().tolist())
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
    finally:
        json.dump(seen, open(out, "w"))
    """
)

QUICK = ["--steps", "40", "--warmup", "2", "--cache", "3"]


def _batches(tmp_path, name, *args):
    return [tuple(b) for b in json.loads((tmp_path / name).read_text())]


def check(tmp_path, kind: str, *options: str, epochs: int = 1, n: int = 428) -> list:
    """Run the script plainly, then under the tool; every batch the tool's loop saw is one
    the plain run saw. The tool's batches."""
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    args = [str(epochs), str(n)]
    plain = subprocess.run(
        [sys.executable, str(path), str(tmp_path / "plain.json"), kind, *args],
        capture_output=True, text=True, timeout=120, env=env(),
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    p = loadeval(
        "run", *QUICK, "--log-dir", str(tmp_path / "logs"), *options,
        str(path), str(tmp_path / "tool.json"), kind, *args, timeout=240,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: "), p.stdout
    drawn = _batches(tmp_path, "plain.json")
    seen = _batches(tmp_path, "tool.json")
    assert seen, "the tool's loop saw no batch"
    strange = [b for b in seen if b not in set(drawn)]
    assert not strange, f"{len(strange)} of {len(seen)} batches no plain run draws: {strange[0]}"
    return seen


@pytest.mark.parametrize("method", ["blocks", "sequential", "try"])
def test_a_subclass_wrapping_iter_runs_its_wrapper_once_per_batch(tmp_path, method):
    # before: every batch had the wrapper applied twice ([0.5, ...] for [0.25, ...])
    options = {"blocks": [], "sequential": ["--sequential"], "try": ["--try", "num_workers=1"]}
    seen = check(tmp_path, "sub", *options[method])
    assert {round(v % 1, 6) for b in seen for v in b} == {0.25}


def test_a_subclass_on_the_loops_epochs_runs_its_wrapper_once_per_batch(tmp_path):
    # a 32-batch loader over 8 epochs: measured on the loop's epochs (A B B A)
    seen = check(tmp_path, "sub", epochs=8, n=128)
    assert {round(v % 1, 6) for b in seen for v in b} == {0.25}


@pytest.mark.parametrize("kind", ["workers", "stateful", "prefetch", "iterable"])
def test_each_kind_of_loader_hands_the_loop_the_plain_runs_batches(tmp_path, kind):
    if kind == "stateful":
        pytest.importorskip("torchdata.stateful_dataloader")
    options = ["--loader-from", "__main__:Batches"] if kind == "iterable" else []
    check(tmp_path, kind, *options)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["accelerate", "webloader", "workers"])
def test_slow_kinds_and_a_variant_of_a_loader_with_workers(tmp_path, kind):
    pytest.importorskip({"accelerate": "accelerate", "webloader": "webdataset"}.get(kind, "torch"))
    seen = check(tmp_path, kind, *(["--try", "num_workers=2"] if kind == "workers" else []))
    if kind == "webloader":  # its own .map runs once per batch, too
        assert {round(v % 1, 6) for b in seen for v in b} == {0.25}
