"""The straggler proof as the script runner keeps it (a file beside the ranks' logs, read
back by ``gather_logs`` into the ranks' report), its plan after the pair's, its pass
stopped after its last batch, and a pair's contended arm gathered per rank (no
processes: runs and blocks whose times are known)."""

from __future__ import annotations

import json
import re

import pytest

from loadeval_nb import LoadEvalError
from loadeval_nb.core.errors import RunLogError
from loadeval_nb.core.ranks import load_proof, plan_proof_after, proof_path
from loadeval_nb.core.ranks.proof import straggler_proof
from loadeval_nb.ranks import gather_logs
from tests.core.ranks.test_ranks import MS, _blocks, run_of, write_job

JOB = "loadeval-job1-train"


def _proof(proven: bool = True):
    if proven:
        blocks = {0: _blocks(45, 13, 45), 1: _blocks(45, 13, 45, seed=1)}
    else:
        blocks = {0: _blocks(20, 20, 20), 1: _blocks(20, 20, 20, seed=1)}
    return straggler_proof(blocks, 1, 0, named_by_skew=proven)


def test_a_proof_saved_reads_back_the_same(tmp_path):
    proof = _proof()
    path = proof.save(tmp_path / "p.json")
    back = load_proof(path)
    assert back == proof
    assert back.text() == proof.text()
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["kind"] == "loadeval_nb.straggler_proof" and doc["schema_version"] == 1


def test_a_proof_from_a_newer_version_or_another_file_is_one_sentence(tmp_path):
    doc = _proof().to_dict()
    (tmp_path / "new.json").write_text(json.dumps({**doc, "schema_version": 2}))
    with pytest.raises(RunLogError, match="proof schema 2, not one this loadeval_nb reads"):
        load_proof(tmp_path / "new.json")
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(RunLogError, match="is not a straggler proof"):
        load_proof(tmp_path / "other.json")


def test_the_proof_goes_beside_rank_0s_real_log():
    assert proof_path(f"/logs/{JOB}-real-rank0.json") == f"/logs/{JOB}-proof.json"
    assert proof_path(f"/logs/{JOB}-real-rank0-2.json") == f"/logs/{JOB}-2-proof.json"
    with pytest.raises(LoadEvalError, match="not a rank's run log"):
        proof_path("/logs/run-real.json")


@pytest.mark.parametrize("how", ["folder", "listed", "beside"])
def test_gather_logs_puts_the_jobs_proof_in_the_ranks_report(tmp_path, how):
    write_job(tmp_path, "loadeval-job0-train", [0.2, 0.2])  # an older job: not its proof
    write_job(tmp_path, JOB, [0.2, 32.0])
    _proof().save(proof_path(tmp_path / f"{JOB}-real-rank0.json"))
    logs = sorted(str(p) for p in tmp_path.glob(f"{JOB}-*-rank*.json"))
    where = {
        "folder": tmp_path,
        "listed": [*logs, str(tmp_path / f"{JOB}-proof.json")],
        "beside": logs,  # (a notebook's watch lists the run logs only)
    }[how]
    rep = gather_logs(where)
    assert rep.proof is not None and rep.proof.proven and rep.proof.suspect == 1
    assert rep.proof.control == 0 and rep.proof.gain_s == pytest.approx(0.032, abs=0.001)
    text = rep.text()
    assert text.startswith("2 ranks: rank 1 is a straggler, proven: with rank 1's loader free")
    # the proof's facts and its arms' columns, among the ranks'
    facts = rep.facts()
    assert [f.key for f in facts.facts if f.key.startswith("proof_")] == [
        "proof_gain",
        "proof_control",
        "proof_blocks",
    ]
    assert facts.columns[-4:] == ("proof: all real", "rank 1 free", "rank 0 free", "verdict")
    row = next(line for line in text.splitlines() if line.strip().startswith("1 (straggler)"))
    assert "45.0 ms" in row and "13.0 ms" in row  # the suspect's arms, per rank
    other = gather_logs([str(p) for p in sorted(tmp_path.glob("loadeval-job0-*"))])
    assert other.proof is None and "proof" not in other.text()


def test_a_proof_that_clears_the_suspect_is_the_headline(tmp_path):
    write_job(tmp_path, JOB, [0.2, 0.3])
    _proof(proven=False).save(tmp_path / f"{JOB}-proof.json")
    rep = gather_logs(tmp_path)
    assert rep.proof is not None and not rep.proof.proven and not rep.proof.named_by_skew
    assert rep.headline() == rep.proof.headline()  # the proof's word, over the skew's
    assert rep.headline().startswith("rank 1 is not a straggler (the rank that waits most)")
    assert rep.proof.gain_ci[0] <= 0  # no recovery


def test_gather_logs_reads_each_ranks_contended_arm_and_shows_its_split(tmp_path):
    write_job(tmp_path, JOB, [30.0, 30.0])
    for r in (0, 1):  # the contended arm: 20 ms a step, real 45 and ideal 12
        run = run_of(20.0, 0, mode="replay", seed=20 + r)
        run.save(tmp_path / f"{JOB}-contended-rank{r}.json")
    for where in (tmp_path, sorted(str(p) for p in tmp_path.iterdir())):
        rep = gather_logs(where)
        for r in (0, 1):
            d = rep.diagnoses[r]
            assert d.waiting_s == pytest.approx(0.025, abs=0.002)
            assert d.contention_s == pytest.approx(0.008, abs=0.002)
        text = rep.text()
        assert "waiting / CPU taken" in text
        row = next(line for line in text.splitlines() if line.strip().startswith("0 "))
        assert re.search(r"  2\d\.\d ms / [78]\.\d ms  ", row), text


def test_the_proof_plan_fits_after_the_pair_in_the_epoch():
    from loadeval_nb import RunSettings
    from loadeval_nb.core.measure.blocks import plan_blocks

    pair = plan_blocks(60, 5, 5, depth=0, loader_len=400)
    settings = RunSettings(steps=60, warmup=5, num_cached_batches=5)
    plan = plan_proof_after(pair, 400, settings)
    assert plan.arms == ("real", "free", "control") and plan.blocks >= 2
    assert pair.total_steps + plan.total_steps <= 400
    assert plan_proof_after(pair, None, settings).total_steps == plan.total_steps
    with pytest.raises(LoadEvalError, match="Cannot prove a straggler"):
        plan_proof_after(pair, pair.total_steps + 20, settings)


def test_a_pass_stopped_after_its_last_batch_keeps_its_last_block(clock):
    """The script runner stops the script at the optimizer step after the last batch
    (the loop never asks for one more): the last block ends there."""
    from loadeval_nb.core.explore.straggler import StragglerPass
    from tests.core.ranks.test_ranks import _plan

    sp = StragglerPass(list(range(100)), _plan(), replay_in="free", num_cached_batches=2)
    sp.clock = clock
    it = iter(sp)
    for _ in range(len(sp)):
        next(it)
        clock.advance(2 * MS)
    assert len(sp.blocks) == 5  # the last block ends at the next next(), never asked for
    it.close()
    assert [b.arm for b in sp.blocks][-1] == "real" and len(sp.blocks) == 6
    assert sp.blocks[-1].steps == 4 and sp.blocks[-1].step_s == pytest.approx(0.002)


def test_a_pass_left_inside_a_block_keeps_only_the_whole_ones(clock):
    from loadeval_nb.core.explore.straggler import StragglerPass
    from tests.core.ranks.test_ranks import _plan

    sp = StragglerPass(list(range(100)), _plan(), replay_in=None, num_cached_batches=2)
    it = iter(sp)
    for _ in range(len(sp) - 2):
        next(it)
    it.close()
    assert len(sp.blocks) == 5
