"""What the script sees and what the command reports (issue 26): the script's epoch stays
its own, a failure is a failure on any rank, Lightning stops after the measured pass, a
short loader just works, and ranks whose loaders differ hold one plan and never hang."""

from __future__ import annotations

import json
import re

import pytest

from .cli import fixture, fresh, leftovers, loadeval

DDP = fixture("ddp_train.py")
PLAIN = fixture("plain_loop.py")


def test_the_script_is_handed_no_more_batches_than_its_epoch_holds(tmp_path):
    """94 batches, the default 200 steps a side, interleaved: before, the pass handed the
    loop 156 batches and a OneCycleLR sized from len(loader) raised at its 95th step."""
    tmp_path = fresh(tmp_path)
    seen = tmp_path / "seen"
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--log-dir", str(tmp_path / "logs"),
        PLAIN, "--batches", "94", "--workers", "2", "--item-ms", "1", "--step-ms", "2",
        "--onecycle", "--seen", str(seen),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    n, of = map(int, re.fullmatch(r"(\d+) of (\d+)\n", seen.read_text()).groups())
    assert of == 94 and n <= 94
    assert "Traceback" not in p.stderr
    logs = sorted((tmp_path / "logs").glob("*-real.json"))
    plan = json.loads(logs[0].read_text())["settings"]["interleaved"]
    assert plan["pass_steps"] <= 94 and plan["epoch"] == 94


def test_a_variant_is_measured_in_the_same_pass_and_the_script_keeps_its_epoch(tmp_path):
    """--try num_workers=4 on a 1-worker loader: the variant's blocks take real batches'
    places (a OneCycleLR sized from len(loader) never raises), its log is written beside
    the others, its workers are gone after the run, and the verdict says what it bought."""
    tmp_path = fresh(tmp_path)
    seen = tmp_path / "seen"
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--try", "num_workers=4",
        "--log-dir", str(tmp_path / "logs"), PLAIN, "--batches", "300", "--workers", "1",
        "--item-ms", "3", "--step-ms", "2", "--onecycle", "--seen", str(seen),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    n, of = map(int, re.fullmatch(r"(\d+) of (\d+)\n", seen.read_text()).groups())
    assert of == 300 and n <= 300
    (variant,) = (tmp_path / "logs").glob("*-variant.json")
    log = json.loads(variant.read_text())
    assert log["settings"]["variant"] == {"num_workers": 4}
    assert log["loader_settings"]["num_workers"] == 4
    assert log["loader_settings"]["batch_size"] == 8  # the real loader's, carried over
    assert "real" in log["settings"]["interleaved"]["arms"]
    assert "variant" in log["settings"]["interleaved"]["arms"]
    assert re.search(r"with num_workers=4: .*measured in this pass", p.stdout), p.stdout
    assert leftovers() == []


def test_a_bad_variant_is_one_sentence_in_the_commands_words(tmp_path):
    p = loadeval("run", "--try", "batch_size=64", PLAIN)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines()[-1].startswith("loadeval_nb: --try: 'batch_size'"), (
        p.stderr
    )


@pytest.mark.parametrize(
    "tries, says",
    [
        ([""], "--try names no setting to try"),  # before: silently no variant
        (["num_workers=1", "num_workers=2"], "--try holds 2 variants"),  # before: the last won
        (["num_workers=100000"], "--try: num_workers=100000 is more worker processes"),
    ],
)
def test_a_try_that_cannot_run_is_a_usage_error_before_the_script_starts(tmp_path, tries, says):
    # before: '' and a second --try were taken silently; 100000 workers started the script
    # and failed after 4 s with exit 1
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    args = [a for t in tries for a in ("--try", t)]
    p = loadeval("run", *args, str(script))
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith(f"loadeval_nb: {says}"), p.stderr
    assert not marker.exists()  # the script never started


NO_WORKERS = """
import torch
from torch.utils.data import DataLoader
for x in DataLoader(torch.arange(1600.0).reshape(-1, 4), batch_size=4):
    x.sum()
"""
"""A loop over 400 batches of a DataLoader without workers, nothing else."""


def test_a_variant_that_cannot_differ_is_refused_before_it_costs_a_pass(tmp_path):
    # persistent_workers=True on a loader without workers measured, then said "no
    # difference": it cannot make one
    script = tmp_path / "train.py"
    script.write_text(NO_WORKERS)
    logs = tmp_path / "logs"
    p = loadeval("run", "--try", "persistent_workers=True", "--log-dir", str(logs), str(script))
    assert p.returncode != 0 and p.stdout == ""
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("loadeval_nb: --try: persistent_workers=True changes nothing"), last
    assert not list(logs.glob("*.json"))  # no pass was measured


def test_a_script_that_raises_inside_the_measured_pass_is_a_failure(tmp_path):
    """It raised at its step 20 (past the warm-up): before, exit 0 and a verdict."""
    tmp_path = fresh(tmp_path)
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--log-dir", str(tmp_path),
        PLAIN, "--batches", "94", "--fail-at", "20",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    assert "ValueError: step 20 failed on purpose" in p.stderr
    assert "Traceback" in p.stderr and p.stdout == ""  # no verdict
    last = p.stderr.splitlines()[-1]
    assert re.match(
        r"loadeval_nb: plain_loop\.py failed after step 21 of the pass being measured \(the "
        r"(real|ideal) side, block \d\) ",
        last,
    ), last
    assert "(ValueError: step 20 failed on purpose); its traceback is above; the partial run " in (
        last
    )
    for path in re.findall(r"(/\S+?\.json)", last):  # the partial logs it names are there
        assert json.loads(open(path).read())["steps"] is not None


def test_a_rank_that_raises_inside_the_measured_pass_fails_the_job(tmp_path):
    p = loadeval(
        "run", "--steps", "40", "--warmup", "5", "--cache", "5", "--sequential",
        "--nproc-per-node", "2", DDP, "--fail-rank", "1", "--fail-step", "20",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    assert "RuntimeError: rank 1 failed on purpose" in p.stderr
    assert p.stderr.splitlines()[-1].startswith(
        "loadeval_nb: ddp_train.py (rank 1) failed after step 21 of the pass being measured"
    )
    assert p.stdout == "" and leftovers() == []


def test_lightning_stops_after_the_measured_pass(tmp_path):
    """A pass of exactly len(loader) batches (Lightning stops asking there): before, the
    validation and the whole next epoch ran after it."""
    tmp_path = fresh(tmp_path)
    hooks = tmp_path / "hooks"
    p = loadeval(
        "run", "--steps", "100", "--warmup", "5", "--cache", "5", "--sequential",
        fixture("lightning_fit.py"), "--batches", "30", "--item-ms", "0", "--step-ms", "1",
        "--hooks", str(hooks),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    # each side's child: one epoch started, no validation after it, no second epoch
    assert hooks.read_text() == "epoch 0\n" * 2
    assert "Traceback" not in p.stderr


def test_the_hugging_face_trainer_stops_after_the_measured_pass(tmp_path):
    tmp_path = fresh(tmp_path)
    hooks = tmp_path / "hooks"
    p = loadeval(
        "run", "--steps", "100", "--warmup", "5", "--cache", "5", "--sequential",
        fixture("hf_trainer.py"), str(tmp_path / "out"), "--batches", "30", "--workers", "0",
        "--item-ms", "0", "--step-ms", "1", "--hooks", str(hooks),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert hooks.read_text() == "epoch 0\n" * 2  # no evaluation, no second epoch
    assert "Traceback" not in p.stderr


def test_a_short_loader_is_measured_one_side_after_the_other_with_a_note(tmp_path):
    """32 batches with 2 workers: too few for blocks. Before, exit 1 and "pass more steps";
    and a glance at the short validation loader first refused the whole run."""
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5",
        PLAIN, "--batches", "32", "--workers", "2", "--step-ms", "2",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Verdict:" in p.stdout
    note = [line for line in p.stderr.splitlines() if "note:" in line]
    assert any("an epoch of the loader has 32 batches" in line for line in note), p.stderr
    assert not any("more steps" in line for line in note), note


def test_a_short_loader_over_several_epochs_is_measured_on_its_epochs_in_one_process(tmp_path):
    """32 batches with 2 workers, 12 epochs: too few for blocks within an epoch, so the
    loop's own epochs are the blocks, real and ideal in A B B A order in one process (a
    child per side gave confident wrong answers: issue 36). Every epoch hands the loop its
    32 batches (OneCycleLR sized from len() holds), and the script stops after the
    schedule's last: --steps 160 asks for 5 epochs a side, 10 in all."""
    logs, watch, marker = tmp_path / "logs", tmp_path / "watch", tmp_path / "marker"
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--log-dir", str(logs), "--steps", "160",
        PLAIN, "--batches", "32", "--workers", "2", "--step-ms", "2", "--epochs", "12",
        "--onecycle", "--stopwatch", str(watch), "--marker", str(marker),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Verdict:" in p.stdout
    assert "a child per side" not in p.stderr
    assert "each run holds 5 epochs" in p.stdout, p.stdout
    assert len(json.loads(watch.read_text())) == 10 * 32  # 10 whole epochs, then stopped
    assert "trained to the end" not in marker.read_text()
    real = json.loads(next(logs.glob("*-real.json")).read_text())
    ideal = json.loads(next(logs.glob("*-ideal.json")).read_text())
    assert [len(b) for b in (real["blocks"], ideal["blocks"])] == [5, 5]
    assert real["settings"]["epoch_pair"] == {"epochs": 10, "order": "ABBA"}
    assert real["mode"] == "log" and ideal["mode"] == "replay"
    assert leftovers() == []


DCGAN = """
import os, sys, torch
from torch.utils.data import DataLoader
niter, out = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
loader = DataLoader(torch.randn(128, 8), batch_size=4, shuffle=True)  # 32 batches
D, G = torch.nn.Linear(8, 1), torch.nn.Linear(8, 8)
opt_d = torch.optim.SGD(D.parameters(), lr=0.01)
opt_g = torch.optim.SGD(G.parameters(), lr=0.01)
for epoch in range(niter):
    for i, x in enumerate(loader):
        opt_d.zero_grad(); D(x).sum().backward(); opt_d.step()  # two optimizers a step
        opt_g.zero_grad(); D(G(x)).sum().backward(); opt_g.step()
        with open(os.path.join(out, "progress.txt"), "a") as f:
            f.write(f"{epoch} {i}\\n")
    torch.save(D.state_dict(), os.path.join(out, f"netD_epoch_{epoch}.pth"))
"""


@pytest.mark.parametrize("niter", [8, 12])
def test_the_loops_epochs_run_to_their_end_and_the_script_stops_at_the_next(tmp_path, niter):
    # pytorch/examples dcgan, --niter 8: the 8th epoch stopped at batch 31 of 32 (at the
    # discriminator's optimizer step) and its end-of-epoch checkpoint was never written
    script, out = tmp_path / "dcgan.py", tmp_path / "out"
    script.write_text(DCGAN)
    out.mkdir()
    p = loadeval("run", "--warmup", "5", "--cache", "5", str(script), str(niter), str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    lines = (out / "progress.txt").read_text().split()
    assert len(lines) == 2 * 8 * 32  # 8 whole epochs (the pair's), never a batch more
    assert sorted(f.name for f in out.glob("*.pth")) == [f"netD_epoch_{e}.pth" for e in range(8)]
    said = "at the start of the training loader's pass 9, after the 8 epochs measured"
    assert (said in p.stderr) == (niter > 8), p.stderr


def test_a_script_with_too_few_epochs_to_pair_runs_twice_and_says_so(tmp_path):
    # dcgan --niter 1: the script ran three times (a whole epoch interleaved and thrown
    # away, then a child per side) and the note said only that a child per side measured
    script, out, logs = tmp_path / "dcgan.py", tmp_path / "out", tmp_path / "logs"
    script.write_text(DCGAN)
    out.mkdir()
    p = loadeval("run", "--warmup", "5", "--cache", "5", "--log-dir", str(logs), str(script),
                 "1", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: ")
    epochs = [line.split()[0] for line in (out / "progress.txt").read_text().splitlines()]
    assert len(epochs) < 2 * 32 and epochs[:32] == ["0"] * 32  # its epoch, then one side
    assert "ran twice" in p.stderr and "ran three times" not in p.stderr, p.stderr
    real = json.loads(next(logs.glob("*-real.json")).read_text())
    assert "epoch_pair" not in real["settings"]  # the first run's epoch, paired with none
    assert real["mode"] == "log" and len(list(logs.glob("*-ideal.json"))) == 1


def test_a_variant_of_a_short_loader_is_a_third_side_of_the_loops_epochs(tmp_path):
    """--try on a loader too short for blocks: the variant's epochs are a third side of the
    loop's own epochs (real, ideal, variant, variant, ideal, real), 4 a side, in one
    process; each epoch whole (OneCycleLR holds), the script stopped after the twelfth.
    Before, the variant was left unmeasured with a note."""
    logs, watch = tmp_path / "logs", tmp_path / "watch"
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--log-dir", str(logs), "--try",
        "num_workers=1", PLAIN, "--batches", "32", "--workers", "2", "--item-ms", "1",
        "--step-ms", "2", "--epochs", "14", "--onecycle", "--stopwatch", str(watch),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert "was not measured" not in p.stderr + p.stdout
    assert re.search(r"with num_workers=1: .*measured in this pass", p.stdout), p.stdout
    assert len(json.loads(watch.read_text())) == 12 * 32  # 12 whole epochs, then stopped
    (variant,) = logs.glob("*-variant.json")
    log = json.loads(variant.read_text())
    assert log["settings"]["variant"] == {"num_workers": 1}
    assert log["settings"]["epoch_pair"] == {"epochs": 12, "order": "ABCCBA"}
    assert log["loader_settings"]["num_workers"] == 1 and len(log["blocks"]) == 4
    assert leftovers() == []


def test_a_failure_in_the_first_of_the_loops_epochs_keeps_and_names_its_partial_logs(tmp_path):
    """The loop's epochs are the pair's blocks, and the script raises at step 20 of the
    first (the real side's, past the warm-up): a failure whose sentence names the partial
    logs, as a pass in blocks does; before, they were removed as a glance's would be."""
    logs = tmp_path / "logs"
    p = loadeval(
        "run", "--warmup", "5", "--cache", "5", "--log-dir", str(logs),
        PLAIN, "--batches", "32", "--workers", "2", "--step-ms", "2", "--epochs", "12",
        "--fail-at", "20",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr[-3000:]
    assert "ValueError: step 20 failed on purpose" in p.stderr and p.stdout == ""
    last = p.stderr.splitlines()[-1]
    assert "failed after step 21 of the pass being measured (the real side, block 1)" in last
    named = re.findall(r"(/\S+?\.json)", last)
    assert any(path.endswith("-real.json") for path in named), last
    for path in named:
        assert json.loads(open(path).read())["steps"] is not None
    assert leftovers() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "workers,jitter", [("1,2", "0"), ("2,0", "0"), ("0,2", "3")], ids=["1v2", "2v0", "jitter"]
)
def test_ranks_whose_loaders_differ_hold_one_plan_and_never_hang(tmp_path, workers, jitter):
    """Before, each rank planned its blocks from its own queue depth: rank 0 waited in the
    gathering while rank 1 was still in DDP's all-reduce, for ever."""
    tmp_path = fresh(tmp_path)
    # one launch a case: the queue depths differ by construction (bench/ranks_plan.py
    # launches each case 10 times, the jitter's too)
    logs = fresh(tmp_path)
    p = loadeval(
        "run", "--steps", "60", "--warmup", "5", "--cache", "5", "--log-dir", str(logs),
        "--nproc-per-node", "2", "--timeout", "120", DDP, "--workers", workers,
        "--jitter-ms", jitter, "--batches", "80", "--step-ms", "2",
        timeout=180,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    plans = [
        json.loads(path.read_text())["settings"]["interleaved"]
        for path in sorted(logs.glob("*-real-rank*.json"))
    ]
    assert len(plans) == 2 and plans[0] == plans[1] and plans[0]["ranks"] == 2
    assert leftovers() == []


LEAVES = """
import sys, torch
from torch.utils.data import DataLoader
leave_at = int(sys.argv[1])
loader = DataLoader(torch.randn(128, 8), batch_size=4)  # 32 batches
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(8):
    for i, x in enumerate(loader):
        if i == leave_at:  # the script's own step limit an epoch
            break
        opt.zero_grad(); model(x).sum().backward(); opt.step()
"""


def test_a_loop_that_leaves_every_epoch_early_is_measured_on_its_own_epochs(tmp_path):
    # every epoch left at batch 20 of 32: refused before, with one sentence repeated 8
    # times ("ended before any DataLoader pass ... drew more than the 10 warm-up batches")
    script = tmp_path / "leaves.py"
    script.write_text(LEAVES)
    p = loadeval("run", str(script), "20")
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: ")
    assert "each run holds 4 epochs" in p.stdout, p.stdout


def test_a_loop_that_leaves_inside_the_warm_up_is_one_sentence_whose_advice_works(tmp_path):
    script = tmp_path / "leaves.py"
    script.write_text(LEAVES)
    p = loadeval("run", str(script), "5")  # 6 batches an epoch: inside the 10 of the warm-up
    assert p.returncode == 1 and p.stdout == ""
    last = p.stderr.strip().splitlines()[-1]
    assert "passes 1–8 were left after 6 batches" in last and last.count("left after") == 1, last
    assert "--warmup" in last
    p = loadeval("run", "--warmup", "2", str(script), "5")  # what the sentence advises
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("Verdict: ")


def test_a_full_log_disk_after_the_measured_pass_is_named(tmp_path):
    # the steps were measured and the logs could not be written: exit 2 and "No run log at
    # ...; check the path or record the run first", a usage error for a full disk
    import subprocess as sp

    small = tmp_path / "small"
    small.mkdir()
    if sp.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(small)],
              capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("no tmpfs can be mounted here (root only)")
    try:
        script = tmp_path / "train.py"
        script.write_text(NO_WORKERS)
        p = loadeval("run", "--log-dir", str(small / "logs"), str(script))
    finally:
        sp.run(["umount", str(small)], capture_output=True)
    assert p.returncode == 1 and p.stdout == "", p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert "steps were measured, but its run logs could not be written" in last, last
    assert f"the disk holding {small / 'logs'} is full" in last, last
