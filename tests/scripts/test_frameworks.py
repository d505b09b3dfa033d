"""``python -m loadeval_nb run`` on a Lightning script and a Hugging Face Trainer script:
the training loader found inside ``Trainer.fit`` / ``Trainer.train()`` (accelerate's
prepared loader included), never the validation one, and the run stopped cleanly.
One run each: the frameworks take seconds to import."""

from __future__ import annotations

import pytest

from loadeval_nb import diagnose
from loadeval_nb.verdict import INPUT_BOUND
from tests.timing import excused_if_busy, retry_once

from .cli import fixture, fresh, leftovers, loadeval, runs

pytestmark = pytest.mark.slow
# a fresh child per side (the real run, then the ideal run): what these tests check;
# the default, both sides interleaved in one child, is test_run.py's own test
QUICK = ["--steps", "40", "--warmup", "5", "--cache", "5", "--sequential"]


@retry_once
def test_a_lightning_fit(tmp_path):
    tmp_path = fresh(tmp_path)
    # 8 items x 5 ms = 40 ms a batch per worker, 2 workers: a batch every 20 ms; the step 10 ms
    marker = tmp_path / "marker"
    p = loadeval(
        "run", *QUICK, "--log-dir", str(tmp_path),
        fixture("lightning_fit.py"), "--marker", str(marker),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    real, ideal = runs(tmp_path)
    d = diagnose(real, ideal)
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 0.0175 <= d.real_step_s <= 0.029, d
        assert 0.0095 <= d.ideal_step_s <= 0.016, d  # Lightning adds a little to each step
    # the training loader (100 batches), not the sanity check's or validation's (8)
    assert real.loader_settings["len"] == ideal.loader_settings["len"] == 100
    assert real.n_steps == ideal.n_steps == 40
    # Lightning let our stop through: its fit did not end, the script's finally ran
    assert marker.read_text() == "finally\n" * 2
    assert "Traceback" not in p.stderr and leftovers() == []


@retry_once
def test_a_hugging_face_trainer(tmp_path):
    tmp_path = fresh(tmp_path)
    out = tmp_path / "out"
    p = loadeval("run", *QUICK, "--log-dir", str(tmp_path), fixture("hf_trainer.py"), str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    real, ideal = runs(tmp_path)
    d = diagnose(real, ideal)
    with excused_if_busy(d):
        assert d.verdict == INPUT_BOUND, d
        assert 0.0175 <= d.real_step_s <= 0.029, d
        assert 0.0095 <= d.ideal_step_s <= 0.017, d
    # the DataLoader inside accelerate's DataLoaderShard (its batches made by accelerate's
    # batch sampler): 100 batches of the 800 training items, not the evaluation set's 64
    assert real.loader_settings["len"] == 100 and real.loader_settings["dataset_len"] == 800
    assert real.n_steps == ideal.n_steps == 40
    assert "Traceback" not in p.stderr and leftovers() == []
