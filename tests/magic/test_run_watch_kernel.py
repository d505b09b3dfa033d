"""``%loadeval_run`` and ``%loadeval_watch`` in a real kernel (jupyter_client).

``%loadeval_run`` measures a tiny sleep-based script written here (its loader makes a
batch in 16 ms in the main process, its step takes 8 ms: input-bound): the verdict, the
two run logs, the live plots fed while the children ran (streamed rows reach the
browser's side before the cell ends), the rerun panel relaunching the script with
another ``num_workers``, a failing script answered in one sentence under its own
traceback with the kernel still answering, and no process of the script's left.
``%loadeval_watch`` follows a 2-rank torchrun job the test starts
(``tests/integrations/ddp_script.py``, rank 1 slow on purpose): a line per rank and
side, streamed while the job runs, and the gathered report naming the straggler.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from loadeval_nb import load_run

jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import argparse, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Items(Dataset):
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(0.002)  # 16 ms a batch of 8, in the main process
            return torch.full((3,), float(i))

    p = argparse.ArgumentParser()
    p.add_argument("--fail-at", type=int, default=-1)
    args = p.parse_args()
    loader = DataLoader(Items(), batch_size=8)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, x in enumerate(loader):
        if step == args.fail_at:
            raise RuntimeError(f"step {step} failed on purpose")
        time.sleep(0.008)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)

STATE = textwrap.dedent(
    """
    import json, psutil
    from loadeval_nb.magic._session import sessions

    def state():
        shown = [s for s in sessions if getattr(s, "view", None) is not None]
        dash = max(shown, key=lambda s: s.created).view.dashboard if shown else None
        kids = [p.pid for p in psutil.Process().children(recursive=True)
                if p.status() != psutil.STATUS_ZOMBIE]
        res = globals().get("_loadeval")
        return json.dumps({
            "lines": {k: len(v.data["step"]) for k, v in dash.step_src.items()} if dash else {},
            "rows": len(dash.rows) if dash else 0,
            "children": kids,
            "kind": type(res).__name__,
        })
    """
)


class Kernel:
    """A kernel, and what a cell sent while it ran: its streams, its error (the reply's),
    and how many of its plot updates streamed rows (the pusher's ``stream()``) before it
    ended."""

    def __init__(self, cwd: str) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
        # ipykernel forwards what child processes print, except under pytest: as a user's
        env.pop("PYTEST_CURRENT_TEST", None)
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd, env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 240) -> dict:
        msg_id = self.kc.execute(code)
        out = {"stdout": "", "stderr": "", "error": None, "streamed": 0, "status": None}
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out[content["name"]] += content["text"]
            elif kind == "error":
                out["error"] = content
            elif kind == "comm_msg" and "ColumnsStreamed" in json.dumps(content["data"]):
                out["streamed"] += 1
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while True:  # the reply to this cell: a late kernel_info reply may come first
            shell = self.kc.get_shell_msg(timeout=30)
            if shell["parent_header"].get("msg_id") == msg_id:
                break
        reply = shell["content"]
        out["status"] = reply["status"]
        if reply["status"] == "error":  # a UsageError is shown as text, not as an error
            out["error"] = {"ename": reply["ename"], "evalue": reply["evalue"]}
        return out

    def state(self) -> dict:
        r = self.run("print(state())")
        assert r["status"] == "ok", r
        return json.loads(r["stdout"].strip().splitlines()[-1])

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(str(tmp_path_factory.mktemp("kernel")))
    try:
        r = k.run("%load_ext loadeval_nb\n" + STATE)
        assert r["status"] == "ok", r
        yield k
    finally:
        k.stop()


def leftovers(mark: str) -> list[str]:
    """Processes anywhere on the machine whose command line holds ``mark`` (an orphan of
    the script's is no longer the kernel's child)."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            cmd = " ".join(p.info["cmdline"] or [])
            if p.info["status"] != psutil.STATUS_ZOMBIE and mark in cmd:
                out.append(f"{p.info['pid']}: {cmd}")
    return out


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "tiny_train.py"
    path.write_text(SCRIPT)
    return path


def test_run_measures_the_script_live_and_reruns_it_from_the_panel(kernel, script, tmp_path):
    logs = tmp_path / "logs"
    # a child per side (--sequential): each side's line when its pass ends
    r = kernel.run(
        f"%loadeval_run --sequential --steps 30 --warmup 3 --cache 5 --log-dir {logs} {script}"
    )
    assert r["status"] == "ok" and r["error"] is None, r
    # the plots were fed while the children ran (the ticker's streams), not only at the end
    assert r["streamed"] >= 1, r
    res = kernel.run(
        "print(json.dumps({'ok': _loadeval.ok, 'verdict': _loadeval.diagnosis.verdict, "
        "'steps': [_loadeval.real.n_steps, _loadeval.ideal.n_steps], "
        "'workers': _loadeval.real.loader_settings['num_workers'], "
        "'logs': sorted(_loadeval.log_paths)}))"
    )
    got = json.loads(res["stdout"].strip().splitlines()[-1])
    # 16 ms to load against an 8 ms step: the ideal loader would make it about 3x as fast
    assert got["ok"] and got["verdict"] == "INPUT-BOUND", got
    assert got["steps"] == [30, 30] and got["workers"] == 0 and got["logs"] == ["ideal", "real"]
    real = [p for p in os.listdir(logs) if p.endswith("-real.json")]
    ideal = [p for p in os.listdir(logs) if p.endswith("-ideal.json")]
    assert len(real) == len(ideal) == 1
    assert load_run(logs / real[0]).n_steps == 30 and load_run(logs / ideal[0]).n_steps == 30
    assert not [p for p in os.listdir(logs) if p.endswith(".journal")]
    st = kernel.state()
    # the whole of each run drawn: every step but the start-up's on its line
    assert st["lines"] == {"real": 29, "ideal": 29} and st["rows"] == 1, st
    assert st["children"] == [] and leftovers(str(script)) == []

    # the panel's "Rerun pair" (its callback, as a click runs it): the script again, its
    # training loader rebuilt with two workers and 4 cached batches
    r = kernel.run(
        "s = max((s for s in sessions if hasattr(s, 'panel')), key=lambda s: s.created)\n"
        "s.panel.num_workers.value = 2\n"
        "s.panel.cache.value = 4\n"
        "s.panel._clicked(None)\n"
        "print(json.dumps([_loadeval.real.loader_settings['num_workers'], "
        "_loadeval.ideal.settings['num_cached_batches'], s.view.dashboard.rows[-1].label]))"
    )
    assert r["status"] == "ok", r
    workers, cache, label = json.loads(r["stdout"].strip().splitlines()[-1])
    assert workers == 2 and cache == 4 and label.startswith("#2 num_workers=2"), label
    st = kernel.state()
    assert st["rows"] == 2 and st["children"] == [] and leftovers(str(script)) == []


def test_run_by_default_interleaves_both_sides_in_one_child_streaming_block_by_block(
    kernel, script, tmp_path
):
    logs = tmp_path / "logs"
    r = kernel.run(f"%loadeval_run --steps 90 --warmup 3 --cache 5 --log-dir {logs} {script}")
    assert r["status"] == "ok" and r["error"] is None, r
    assert r["streamed"] >= 2, r  # blocks reached the plots while the child ran
    res = kernel.run(
        "print(json.dumps({'verdict': _loadeval.diagnosis.verdict, "
        "'notes': _loadeval.diagnosis.notes, "
        "'blocks': [len(_loadeval.real.blocks), len(_loadeval.ideal.blocks)]}))"
    )
    got = json.loads(res["stdout"].strip().splitlines()[-1])
    assert got["verdict"] == "INPUT-BOUND", got
    assert got["blocks"][0] == got["blocks"][1] >= 2, got
    assert any("interleaved in" in n for n in got["notes"]), got
    names = sorted(os.listdir(logs))
    assert sum(n.endswith("-real.json") for n in names) == 1, names
    assert sum(n.endswith("-ideal.json") for n in names) == 1, names
    assert leftovers(str(script)) == []


def test_a_failing_script_is_one_sentence_under_its_traceback(kernel, script):
    r = kernel.run(f"%loadeval_run --sequential --steps 30 --warmup 3 {script} --fail-at 2")
    assert r["status"] == "error" and r["error"]["ename"] == "UsageError", r
    sentence = r["error"]["evalue"]
    assert sentence.startswith(
        "tiny_train.py failed after step 3 of the pass being measured (the real run)"
    ), sentence
    assert "RuntimeError: step 2 failed on purpose" in sentence
    # the script's own traceback, as python prints it, above the sentence
    assert "Traceback (most recent call last)" in r["stderr"], r["stderr"]
    assert (
        'tiny_train.py", line' in r["stderr"]
        and "loadeval_nb" not in r["stderr"].split("Traceback")[1].split("RuntimeError")[0]
    )
    ok = kernel.run("print(_loadeval.error is not None, 6 * 7)")
    assert ok["status"] == "ok" and ok["stdout"].split() == ["True", "42"]
    assert kernel.state()["children"] == [] and leftovers(str(script)) == []


def test_bad_options_are_one_sentence(kernel, script):
    r = kernel.run(f"%loadeval_run --steps many {script}")
    assert r["error"]["ename"] == "UsageError"
    assert r["error"]["evalue"] == "--steps must be a number of steps or auto, not 'many'."
    r = kernel.run("%loadeval_run --warmup 3")
    assert r["error"]["ename"] == "UsageError" and "Name the script" in r["error"]["evalue"]
    r = kernel.run("%loadeval_run --frobnicate 3 x.py")
    assert r["error"]["ename"] == "UsageError" and "--frobnicate" in r["error"]["evalue"]
    r = kernel.run(f"%loadeval_run --steps auto --nproc-per-node 2 {script}")
    assert r["error"]["ename"] == "UsageError"
    assert r["error"]["evalue"].startswith("--steps='auto' stops each rank on its own")
    r = kernel.run(f"%loadeval_run --cache 0 {script}")
    assert r["error"]["evalue"].startswith("--cache must be"), r["error"]
    r = kernel.run("%loadeval_run -h")
    assert r["status"] == "ok" and "%loadeval_run [options] SCRIPT" in r["stdout"]


def _watch_a_job(kernel, cmd, env, out, log_path) -> dict:
    """Start the job ``cmd`` writing to ``out``, watch it from the kernel until it is
    done, and check that it ended well; the watch cell's reply."""
    with open(log_path, "w") as log:
        job = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            r = kernel.run(f"%loadeval_watch {out} --timeout 180")
        finally:
            try:
                job.wait(timeout=120)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait()
    assert job.returncode == 0, log_path.read_text()[-3000:]
    return r


def test_watch_follows_a_torchrun_job_rank_by_rank(kernel, tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    env = {**os.environ, "SLOW_RANK": "1", "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    script = ROOT / "tests" / "integrations" / "ddp_script.py"
    r = _watch_a_job(
        kernel,
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", "2", str(script), str(out)],
        env, out, tmp_path / "job.log",
    )  # fmt: skip
    assert r["status"] == "ok" and r["error"] is None, r
    assert r["streamed"] >= 1, r  # the lines grew while the job ran
    got = kernel.run(
        "print(json.dumps({'kind': type(_loadeval).__name__, 'world': _loadeval.world_size, "
        "'straggler': _loadeval.straggler}))"
    )
    res = json.loads(got["stdout"].strip().splitlines()[-1])
    assert res == {"kind": "RanksResult", "world": 2, "straggler": 1}, res
    st = kernel.state()
    # one line per rank and side, each holding the steps its log holds
    lines = st["lines"]
    assert set(lines) == {"real r0", "ideal r0", "real r1", "ideal r1"}, lines
    for name, n in lines.items():
        side, rank = name.split(" r")
        (path,) = [p for p in os.listdir(out) if p.endswith(f"-{side}-rank{rank}.json")]
        run = load_run(out / path)
        assert 0 < n <= run.n_steps, (name, n, run.n_steps)
    assert st["children"] == []
    report = json.loads((out / "report.json").read_text())
    assert report["straggler"] == 1  # what the job said of itself, inside its group


CONTENDED_JOB = textwrap.dedent(
    """
    import sys, time
    import torch
    from torch.utils.data import DataLoader, Dataset
    from loadeval_nb import RunSettings, run_pair

    class Items(Dataset):
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(0.003)  # 12 ms a batch of 4, in each of 2 workers
            return torch.full((3,), float(i))

    def train(batches):
        for _ in batches:
            time.sleep(0.004)

    if __name__ == "__main__":
        time.sleep(2)  # the watch starts first, as it would for a job started after it
        loader = DataLoader(Items(), batch_size=4, num_workers=2)
        settings = RunSettings(
            steps=160, warmup=8, num_cached_batches=8, contention=True, log_dir=sys.argv[1]
        )
        res = run_pair(loader, train, settings)
        assert res.contended is not None, "the pass had no contended arm"
    """
)


def test_watch_shows_every_arm_the_pass_ran_and_the_headroom_split(kernel, tmp_path):
    """A pair whose pass had the contended arm, written by a job outside the kernel: the
    watch follows all three arms' logs (a line each) and its verdict holds the headroom
    split (before, its log-name grammar knew real and ideal only, and dropped the arm)."""
    out = tmp_path / "job"
    out.mkdir()
    job_py = tmp_path / "contended_job.py"
    job_py.write_text(CONTENDED_JOB)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    r = _watch_a_job(
        kernel, [sys.executable, str(job_py), str(out)], env, out, tmp_path / "job.log"
    )
    assert r["status"] == "ok" and r["error"] is None, r
    got = kernel.run(
        "d = _loadeval.diagnosis\n"
        "print(json.dumps({'kind': type(_loadeval).__name__, "
        "'contended': _loadeval.contended is not None, 'split': d.contention_s is not None, "
        "'paths': sorted(_loadeval.log_paths)}))"
    )
    res = json.loads(got["stdout"].strip().splitlines()[-1])
    assert res == {
        "kind": "PairResult",
        "contended": True,
        "split": True,
        "paths": ["contended", "ideal", "real"],
    }, res
    lines = kernel.state()["lines"]
    assert set(lines) == {"real", "ideal", "contended"}, lines
    (path,) = [p for p in os.listdir(out) if p.endswith("-contended.json")]
    assert 0 < lines["contended"] <= load_run(out / path).n_steps
