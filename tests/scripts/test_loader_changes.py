"""``run_script(loader_changes=...)``: the notebook's rerun panel measures the script's
training loader with other settings; the child measures a copy rebuilt with them (the
kernel test, ``tests/magic/test_run_watch_kernel.py``, reruns a script so end to end)."""

from __future__ import annotations

import pytest

from loadeval_nb import LoadEvalError
from loadeval_nb.integrations import run_script

from .cli import fixture


def test_only_the_loader_s_tunable_settings_can_change():
    with pytest.raises(LoadEvalError, match=r"^Cannot change batch_size on a script's loader; only num_workers, pin_memory, prefetch_factor, persistent_workers can be changed\.$"):  # fmt: skip
        run_script([fixture("plain_loop.py")], loader_changes={"batch_size": 4})


@pytest.mark.slow
def test_the_measured_loader_is_a_copy_with_the_changes(tmp_path):
    from loadeval_nb import RunSettings

    settings = RunSettings(steps=12, warmup=2, num_cached_batches=3, log_dir=str(tmp_path))
    result = run_script(
        [fixture("plain_loop.py"), "--step-ms", "2", "--batches", "30"],
        settings,
        loader_changes={"num_workers": 1, "pin_memory": False},
        timeout_s=120,
    )
    assert result.ok, result.error
    assert result.real.loader_settings["num_workers"] == 1  # the script's own has 0
    assert result.ideal.loader_settings["num_workers"] == 1
    assert result.real.n_steps == result.ideal.n_steps == 12
