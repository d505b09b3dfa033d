"""The fault catalogue's shared parts: the user's objects a case runs on, what every case
checks afterwards, and the two bad-input checks. The cases themselves sit beside the
other tests of what they exercise (``tests/*/test_faults.py``); the fixtures that hand
out these objects (``user``, ``input_user``, ``quiet_frameworks``, ``earlier_children``,
``sigint_put_back``) are in ``tests/conftest.py``.

A fault case asserts what the user is shown (their own exception, unchanged, or the
tool's one sentence), that nothing is lost (the partial run log is on disk and loads with
the steps that ran), that the user's objects and data are as they were, and that nothing
is left behind (no temporary file, journal, process or thread: the suite's ``no_leaks``
fixture checks the last two after every case). A bad-input case asserts the sentence word
for word (one line, ending in a full stop, no traceback).
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass
from typing import Any, Optional

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from loadeval_nb import Run, load_run

MS = 1_000_000
MAX_WORKERS = 4 * len(os.sched_getaffinity(0))  # 4 per CPU this process may run on

PAIR_SETTINGS = dict(
    steps=12, warmup=1, num_cached_batches=2, log_dir="logs", sample_interval_s=None
)


# ---- the user's objects ----------------------------------------------------------------------


@dataclass
class User:
    data: torch.Tensor
    tmp: str

    def loader(self, **kw: Any) -> DataLoader:
        return DataLoader(TensorDataset(self.data), batch_size=4, **kw)


@dataclass
class InputUser:
    """The user's objects a bad-input case may use; compared before and after it."""

    data: torch.Tensor
    loader: DataLoader
    tmp: str

    def fingerprint(self) -> Any:
        d = self.loader.__dict__
        return (
            self.data.clone(),
            {k: v for k, v in d.items() if not k.startswith("_") or k == "_iterator"},
        )


class Boom(Exception):
    pass


class Refused(Exception):
    """What the user saw: a command's exit code and message, or a magic's UsageError."""


class CtrlCAt(Dataset):
    """Item 10 is Ctrl-C, pressed while the loop waits in ``next()`` (no workers: the main
    process reads it)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 10:
            signal.raise_signal(signal.SIGINT)
        return torch.zeros(2)


def run_of(ms, mode="log", n=20, **kw):
    step = [int(ms * MS)] * n
    return Run(mode=mode, start_ns=[i * step[0] for i in range(n)], step_ns=step, **kw)


def loop(ev):
    for _ in ev:
        pass


def log_at(u: InputUser, name: str, text: Any = None, **change: Any) -> str:
    """A run log in the user's folder: ``text`` as is, or a good log with fields changed."""
    p = os.path.join(u.tmp, name)
    if text is None:
        run = Run(mode="log", start_ns=[0, 10, 20], step_ns=[10, 10, 10], wait_ns=[1, 1, 1])
        run.save(p)
        with open(p) as f:
            doc = json.load(f)
        for key, value in change.items():
            target, leaf = doc, key.split(".")
            for part in leaf[:-1]:
                target = target[part]
            target[leaf[-1]] = value
        text = json.dumps(doc)
    with open(p, "w") as f:
        f.write(text)
    return p


# ---- what every case checks ------------------------------------------------------------------


def loader_state(loader: Any) -> Any:
    d = getattr(loader, "__dict__", {})
    return {k: v for k, v in d.items() if not k.startswith("_") or k == "_iterator"}


def nothing_left(folder: str, expected: tuple[str, ...]) -> None:
    """Only ``expected`` is in the folder: no temporary file, probe or journal."""
    extra = sorted(set(os.listdir(folder)) - set(expected))
    assert not extra, f"left behind: {extra}"


def logged(path: str, steps: Optional[int], status: str) -> Run:
    run = load_run(path)
    assert run.status == status
    if steps is not None:
        assert run.n_steps == steps
    return run


EARLIER: set[int] = set()
"""Child processes that were running before the case began (an earlier test's: a
resource tracker, a compile-worker pool): not this case's to answer for (the
``earlier_children`` fixture fills it)."""


def no_children() -> list[psutil.Process]:
    """Our child processes still running that the case started (multiprocessing's resource
    tracker excepted: a spawn context starts it, and it stays for the interpreter's life)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if (
                p.pid not in EARLIER
                and p.status() != psutil.STATUS_ZOMBIE
                and "resource_tracker" not in " ".join(p.cmdline())
            ):
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def cut_column(tmp: str) -> int:
    """Where the JSON of a log cut short (``cut.json``, see ``tests/scripts/test_faults.py``)
    stops: the column its error names."""
    with open(os.path.join(tmp, "cut.json")) as f:
        return len(f.read()) + 1


def case_id(case: Any) -> str:
    return case.id if hasattr(case, "id") else case[0]


def check_bad_input(user: InputUser, name: str, call: Any, kind: Any, sentence: str) -> None:
    """The bad-input catalogue's check: ``call(user)`` raises ``kind`` with ``sentence``,
    the user's loader and data are as they were, and no file but a log or text is left."""
    before_files = set(os.listdir(user.tmp))
    before = user.fingerprint()
    with pytest.raises(kind) as info:
        call(user)
    said = str(info.value)
    if os.environ.get("HARVEST"):
        with open(os.environ["HARVEST"], "a") as f:
            f.write(f"{name}\t{said}\n")
    assert said == sentence.replace("{tmp}", user.tmp)
    assert "\n" not in said and "Traceback" not in said and said.endswith((".", ")"))
    data, loader_state = user.fingerprint()
    assert torch.equal(data, before[0]) and loader_state == before[1]
    left = {
        f for f in set(os.listdir(user.tmp)) - before_files if not f.endswith((".json", ".txt"))
    }
    assert not left, f"left behind: {left}"


def check_more_bad_input(tmp: str, call: Any, kind: Any, sentence: Optional[str]) -> None:
    """The second catalogue's check (compare, the history, the frameworks, ranks):
    ``call(tmp)`` raises ``kind`` with ``sentence`` (or, with ``kind`` None, is accepted),
    and leaves no file but its own logs and histories, and no process."""
    before = set(os.listdir(tmp))
    if kind is None:  # accepted: loads
        assert call(tmp)
        return
    with pytest.raises(kind) as info:
        call(tmp)
    said = str(info.value)
    if sentence is not None:
        expected = sentence.replace("{tmp}", tmp)
        if "{cut}" in expected:
            expected = expected.replace("{cut}", str(cut_column(tmp)))
        assert said == expected
    assert "\n" not in said and "Traceback" not in said and said.endswith((".", ")"))
    # nothing but the files the case wrote itself (its logs and histories)
    left = {f for f in set(os.listdir(tmp)) - before if not f.endswith(".json")}
    assert not left, f"left behind: {left}"
    assert no_children() == []
