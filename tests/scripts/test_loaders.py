"""``python -m loadeval_nb run`` finds loaders other than a plain DataLoader: a subclass
with its own ``__iter__`` (torchdata's StatefulDataLoader), ``torchdata.nodes.Loader``,
webdataset's endless ``WebLoader``, a Hugging Face streaming dataset in a DataLoader, and
any iterable named with ``--loader-from``. Each script counts the batches it is handed:
every one of them is a step of the measured pass (the real and the ideal run's steps,
no more), never more than its own epoch, and it exits as it would (code 0)."""

from __future__ import annotations

import json
import textwrap

import pytest

from .cli import loadeval, runs

QUICK = ["--steps", "30", "--warmup", "2", "--cache", "2"]

TRAIN = """
import json, sys, torch
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def step(x):
    if isinstance(x, dict):  # a Hugging Face dataset's batch
        x = x["x"]
    if isinstance(x, tuple):  # webdataset's to_tuple
        x = x[0]
    opt.zero_grad()
    model(torch.as_tensor(x, dtype=torch.float32).reshape(-1, 3)).sum().backward()
    opt.step()

def train(loader, out, epoch_len=None, stop_at=None):
    seen = 0
    try:
        for batch in loader:
            seen += 1
            step(batch)
            if seen == stop_at:
                break
    finally:
        facts = {"seen": seen, "epoch_len": epoch_len}
        if hasattr(loader, "state_dict"):
            facts["state"] = loader.state_dict()
        json.dump(facts, open(out, "w"), default=str)
"""


def script(tmp_path, body: str, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(TRAIN + textwrap.dedent(body))
    return str(path)


def measured(tmp_path, *args: str) -> tuple[dict, object, object]:
    """Run, check the exit and the script's count; the script's facts, real, ideal."""
    logs = tmp_path / "logs"
    p = loadeval("run", *QUICK, "--log-dir", str(logs), *args, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: "), p.stdout
    facts = json.loads((tmp_path / "out.json").read_text())
    real, ideal = runs(logs)
    # every batch the script was handed is a step of the pass, real or replayed
    assert facts["seen"] == real.n_steps + ideal.n_steps, (facts, real.n_steps, ideal.n_steps)
    if facts["epoch_len"] is not None:
        assert facts["seen"] <= facts["epoch_len"]
    return facts, real, ideal


def test_a_stateful_dataloader_is_found_and_its_state_is_its_own(tmp_path):
    pytest.importorskip("torchdata.stateful_dataloader")
    path = script(
        tmp_path,
        """
        from torchdata.stateful_dataloader import StatefulDataLoader
        loader = StatefulDataLoader(torch.arange(600.0).reshape(-1, 3), batch_size=2)
        train(loader, sys.argv[1], epoch_len=len(loader))
        """,
    )
    facts, real, _ = measured(tmp_path, path, str(tmp_path / "out.json"))
    assert real.loader_settings["type"].endswith("StatefulDataLoader")
    assert facts["epoch_len"] == 100 == real.loader_settings["len"]  # its own epoch
    # state_dict() works after the pass: its iterator handed out the real steps' batches
    assert facts["state"]["_num_yielded"] == real.n_steps, facts["state"]


def test_a_torchdata_nodes_loader_is_found(tmp_path):
    pytest.importorskip("torchdata.nodes")
    path = script(
        tmp_path,
        """
        import torchdata.nodes as tn
        rows = [[float(i)] * 3 for i in range(400)]
        loader = tn.Loader(tn.Batcher(tn.IterableWrapper(rows), batch_size=2))
        train(loader, sys.argv[1], epoch_len=200)
        """,
    )
    facts, real, _ = measured(tmp_path, path, str(tmp_path / "out.json"))
    assert real.loader_settings["type"] == "torchdata.nodes.loader.Loader"
    assert facts["state"]  # its state_dict() still answers


@pytest.mark.slow
def test_an_endless_webloader_is_measured_for_the_steps_asked_and_ends(tmp_path):
    wds = pytest.importorskip("webdataset")
    for s in range(3):
        with wds.TarWriter(str(tmp_path / f"shard{s}.tar")) as w:
            for i in range(8):
                w.write({"__key__": f"{s}-{i}", "x.pyd": [float(i)] * 3})
    path = script(
        tmp_path,
        """
        import glob, os, webdataset as wds
        shards = sorted(glob.glob(os.path.join(os.path.dirname(sys.argv[1]), "*.tar")))
        ds = wds.WebDataset(shards, resampled=True, shardshuffle=False)
        ds = ds.decode().to_tuple("x.pyd").batched(4)
        loader = wds.WebLoader(ds, batch_size=None, num_workers=0)
        # endless: without the tool, only the script's own limit would end it
        train(loader, sys.argv[1], stop_at=10_000)
        """,
    )
    facts, real, ideal = measured(tmp_path, path, str(tmp_path / "out.json"))
    # the WebLoader (what the script iterates), not the DataLoader inside it
    assert real.loader_settings["type"] == "webdataset.compat.WebLoader"
    assert real.loader_settings["len"] is None
    assert real.settings["steps"] == 30 and 0 < facts["seen"] < 10_000


@pytest.mark.slow
def test_a_hugging_face_streaming_dataset_in_a_dataloader_is_found(tmp_path):
    pytest.importorskip("datasets")
    path = script(
        tmp_path,
        """
        from datasets import Dataset
        from torch.utils.data import DataLoader
        rows = {"x": [[float(i)] * 3 for i in range(600)]}
        ds = Dataset.from_dict(rows).to_iterable_dataset(num_shards=2).with_format("torch")
        loader = DataLoader(ds, batch_size=4)
        train(loader, sys.argv[1], epoch_len=150)
        """,
    )
    facts, real, _ = measured(tmp_path, path, str(tmp_path / "out.json"))
    assert real.loader_settings["type"] == "torch.utils.data.dataloader.DataLoader"
    assert real.loader_settings["dataset_type"] == "IterableDataset"


STREAMS = """
import torch

class Stream:
    '''Not a DataLoader: only --loader-from finds it.'''

    def __init__(self, n, value):
        self.n, self.value = n, value

    def __iter__(self):
        for i in range(self.n):
            yield torch.full((2, 3), self.value + i)

warmup = Stream(40, -1.0)
train = Stream(300, 0.0)
"""


def test_loader_from_names_an_object_of_a_module_and_only_it_is_measured(tmp_path):
    (tmp_path / "streams.py").write_text(STREAMS)
    path = script(
        tmp_path,
        """
        import streams
        for _ in streams.warmup:  # a pass past the warm-up that is not the named loader
            pass
        train(streams.train, sys.argv[1], epoch_len=300)
        """,
    )
    facts, real, _ = measured(
        tmp_path, "--loader-from", "streams:train", path, str(tmp_path / "out.json")
    )
    assert real.loader_settings["type"] == "streams.Stream"


@pytest.mark.slow
def test_loader_from_names_a_class_the_script_defines(tmp_path):
    path = script(
        tmp_path,
        """
        class Batches:
            def __iter__(self):
                for i in range(250):
                    yield torch.full((2, 3), float(i))

        train(Batches(), sys.argv[1], epoch_len=250)
        """,
    )
    _, real, _ = measured(
        tmp_path, "--loader-from", "__main__:Batches", path, str(tmp_path / "out.json")
    )
    assert real.loader_settings["type"] == "__main__.Batches"


def test_loader_from_says_what_to_pass(tmp_path):
    p = loadeval("run", "--loader-from", "streams.train", "x.py")
    assert p.returncode == 2
    assert "--loader-from takes MODULE:NAME" in p.stderr.splitlines()[-1]
    (tmp_path / "streams.py").write_text(STREAMS)
    path = script(tmp_path, "import streams\ntrain(streams.train, sys.argv[1])\n")
    p = loadeval("run", *QUICK, "--loader-from", "streams:nothing", path, "out.json")
    assert p.returncode == 1
    assert p.stderr.splitlines()[-1] == (
        "loadeval_nb: --loader-from streams:nothing: streams has no nothing once imported; "
        "name a class or an object the module defines as it is imported."
    )


SUBCLASSES = """
import torch
from torch.utils.data import DataLoader

class ToDevice(DataLoader):  # the usual device-moving loader
    def __iter__(self):
        for batch in super().__iter__():
            yield batch.to("cpu")

class Returns(DataLoader):
    def __iter__(self):
        return super().__iter__()
"""


@pytest.mark.parametrize(
    "cls, where", [("ToDevice", "__main__"), ("Returns", "__main__"), ("ToDevice", "module")]
)
def test_a_dataloader_subclass_whose_iter_goes_on_to_dataloaders_is_measured(tmp_path, cls, where):
    # its own __iter__ calls super().__iter__() (returned, or wrapped in a generator): the
    # pass starts in DataLoader's, and what the subclass adds stays in both runs
    if where == "module":
        (tmp_path / "loaders.py").write_text(SUBCLASSES)
        body = f"from loaders import {cls}\n"
    else:
        body = SUBCLASSES
    path = script(
        tmp_path,
        body
        + f"""
loader = {cls}(torch.arange(2400.0).reshape(-1, 3), batch_size=1)
train(loader, sys.argv[1], epoch_len=len(loader))
""",
    )
    facts, real, _ = measured(tmp_path, path, str(tmp_path / "out.json"))
    assert real.loader_settings["type"].endswith(f".{cls}")
    assert 0 < facts["seen"] < 800


UNSIZED = """
from torch.utils.data import DataLoader, IterableDataset, Sampler

class Stream(IterableDataset):
    def __init__(self, n, says=None):
        self.n, self.says = n, says
    def __iter__(self):
        return (torch.full((3,), float(i)) for i in range(self.n))
    def __len__(self):
        if self.says is None:
            raise TypeError("no len")
        return self.says

class NoLen(Sampler):  # a sampler whose __len__ raises
    def __iter__(self):
        return iter(range(100))
    def __len__(self):
        raise TypeError("no len")

kind = sys.argv[2]
if kind == "stream":
    loader, held = DataLoader(Stream(75), batch_size=None), 75
elif kind == "lying":
    loader, held = DataLoader(Stream(30, says=1000), batch_size=None), 30
else:
    loader, held = DataLoader(torch.arange(300.0).reshape(-1, 3), sampler=NoLen()), 100
# a schedule sized from the epoch the script knows: one step too many raises
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=held)
seen = 0
try:
    for batch in loader:
        seen += 1
        step(batch)
        sched.step()
finally:  # (the tool stops the script after its pass)
    json.dump({"seen": seen, "epoch_len": held}, open(sys.argv[1], "w"))
"""


@pytest.mark.parametrize("kind", ["stream", "lying", "sampler"])
@pytest.mark.parametrize("mode", ["interleaved", "sequential"])
def test_an_epoch_its_len_does_not_bound_is_kept(tmp_path, kind, mode):
    # an IterableDataset without len() (75 batches), one whose __len__ overstates (30 of a
    # claimed 1000), a sampler whose __len__ raises (100): the script's loop is handed no
    # more than its epoch, so its OneCycleLR(total_steps=epoch) never steps past its end
    # (before: 106-107 batches, 'Tried to step 76 times', exit 1)
    path = script(tmp_path, UNSIZED)
    out = str(tmp_path / "out.json")
    args = ["--steps", "60", "--warmup", "5", "--cache", "5", path, out, kind]
    if mode == "interleaved":
        facts, real, _ = measured(tmp_path, *args)
        assert real.settings["interleaved"]["epoch_seen"] == facts["epoch_len"]
        assert facts["seen"] <= facts["epoch_len"]
    else:
        # more steps than any of the epochs (60 were fewer than the stream's 75 and the
        # sampler's 100: a replay that overran the epoch could not have failed there)
        args[1] = "200"
        logs = tmp_path / "logs"
        p = loadeval("run", "--sequential", "--log-dir", str(logs), *args, timeout=180)
        assert p.returncode == 0, p.stderr[-3000:]
        # why there are no GPU readings, said once by the command, not once per child
        assert p.stderr.count("GPU utilisation is recorded as null") <= 1, p.stderr
        facts = json.loads((tmp_path / "out.json").read_text())  # the ideal run's script
        _, ideal = runs(logs)
        assert facts["seen"] == ideal.n_steps <= facts["epoch_len"]


NAMED = """
class Batches:
    def __iter__(self):
        for i in range(60):
            yield torch.full((2, 3), float(i))

def make():
    yield from Batches()

obj, gen = Batches(), make()
for batch in obj:
    step(batch)
"""


@pytest.mark.parametrize(
    "named, says",
    [
        ("__main__:obj", "names an object, a Batches: for the script's own loader name its "
         "class, --loader-from __main__:Batches."),
        ("__main__:nothing", "the script defines no nothing; name the class"),
        ("__main__:gen", "names a generator, which is one pass; wrap it in a class"),
        ("__main__:make", "names a function, not a loader; name the class"),
        ("elsewhere:Batches", "the script never imported elsewhere, so nothing of it was "
         "iterated; name the module"),
    ],
)  # fmt: skip
def test_loader_from_names_why_it_found_nothing(tmp_path, named, says):
    # before: each ended with 'ended without iterating a DataLoader', never naming the name
    path = script(tmp_path, NAMED)
    p = loadeval("run", *QUICK, "--loader-from", named, path)
    assert p.returncode == 1, p.stderr[-2000:]
    last = p.stderr.splitlines()[-1]
    assert last.startswith(f"loadeval_nb: --loader-from {named}") and says in last, last
