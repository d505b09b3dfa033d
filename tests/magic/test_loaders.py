"""``%%loadeval`` on loaders other than a plain DataLoader: found in the cell without a
name (a StatefulDataLoader, ``torchdata.nodes.Loader``, an endless webdataset
``WebLoader``), or named (any iterable); the cell's own count of batches is the pass's
steps, and the loader is the user's again afterwards."""

from __future__ import annotations

import pytest
import torch

from ..ipython_shell import ipython_shell

QUIET = "--steps 24 --warmup 2 --cache 3 --quiet"
LOOP = "seen = 0\nfor batch in loader:\n    seen += 1\n"


def measure(line: str, loader) -> dict:
    with ipython_shell(loader=loader) as ip:
        ip.run_cell_magic("loadeval", line, LOOP)
        ns = ip.user_ns
        assert ns["loader"] is loader  # the user's again
        res = ns["_loadeval"]
        assert res.diagnosis is not None
        # every batch the cell was handed is a step of the pass, real or replayed
        assert ns["seen"] == res.real.n_steps + res.ideal.n_steps
        return {"real": res.real, "seen": ns["seen"]}


def test_a_stateful_dataloader_is_found_and_its_state_dict_works_after():
    sd = pytest.importorskip("torchdata.stateful_dataloader")
    loader = sd.StatefulDataLoader(torch.arange(400.0).reshape(-1, 2), batch_size=2)
    got = measure(QUIET, loader)
    assert got["real"].loader_settings["type"].endswith("StatefulDataLoader")
    assert got["seen"] <= len(loader) == 100
    assert loader.state_dict()["_num_yielded"] == got["real"].n_steps


def test_a_torchdata_nodes_loader_is_found():
    tn = pytest.importorskip("torchdata.nodes")
    rows = [torch.full((2,), float(i)) for i in range(300)]
    loader = tn.Loader(tn.Batcher(tn.IterableWrapper(rows), batch_size=2))
    got = measure(QUIET, loader)
    assert got["real"].loader_settings["type"] == "torchdata.nodes.loader.Loader"


def test_an_endless_webloader_is_found_and_the_pass_ends(tmp_path):
    wds = pytest.importorskip("webdataset")
    for s in range(2):
        with wds.TarWriter(str(tmp_path / f"shard{s}.tar")) as w:
            for i in range(6):
                w.write({"__key__": f"{s}-{i}", "x.pyd": [float(i)] * 2})
    shards = sorted(str(p) for p in tmp_path.glob("*.tar"))
    ds = wds.WebDataset(shards, resampled=True, shardshuffle=False).decode().to_tuple("x.pyd")
    loader = wds.WebLoader(ds.batched(2), batch_size=None, num_workers=0)
    got = measure(QUIET, loader)
    assert got["real"].loader_settings["type"] == "webdataset.compat.WebLoader"
    assert got["real"].loader_settings["len"] is None


def test_any_iterable_is_measured_when_named():
    class Stream:
        def __iter__(self):
            for i in range(200):
                yield torch.full((2, 2), float(i))

    got = measure(f"loader {QUIET}", Stream())
    assert got["real"].loader_settings["type"].endswith("Stream")


class Stream(torch.utils.data.IterableDataset):
    """``n`` items, one a batch; ``says``: the ``__len__`` it claims (None: none)."""

    def __init__(self, n, says=None):
        self.n, self.says = n, says

    def __iter__(self):
        return (torch.full((2,), float(i)) for i in range(self.n))

    def __len__(self):
        if self.says is None:
            raise TypeError("a stream has no len()")
        return self.says


@pytest.mark.parametrize(
    "line",
    [
        "--steps 60 --warmup 5 --cache 5 --quiet",
        "--steps 60 --warmup 5 --cache 5 --quiet --sequential",
    ],
)
@pytest.mark.parametrize("n, says", [(75, None), (30, 1000)])
def test_an_epoch_its_len_does_not_bound_is_never_exceeded(line, n, says):
    # the cell is handed no more batches than the loader holds (107 of 75 before: the ideal
    # blocks came on top of the stream); the pass pays for each replayed step by a real
    # batch drawn and dropped, and ends where the loader does
    loader = torch.utils.data.DataLoader(Stream(n, says), batch_size=None)
    with ipython_shell(loader=loader) as ip:
        ip.run_cell_magic("loadeval", line, LOOP)
        ns = ip.user_ns
        assert ns["loader"] is loader
        res = ns["_loadeval"]
        sequential = "--sequential" in line
        # (one pass, or one pass a side)
        assert ns["seen"] <= n
        assert res.real.n_steps <= n and res.ideal.n_steps <= n
        if not sequential:
            assert ns["seen"] == res.real.n_steps + res.ideal.n_steps
            plan = res.real.settings["interleaved"]
            assert plan["epoch_seen"] == n  # it drew them all, and says so
            if says is not None:
                assert any(f"len() says {says} batches" in x for x in res.diagnosis.notes)
