"""What every exploring result (pair, ladder, sweep) shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from .._facts import Reported
from .settings import RunSettings


@dataclass
class Result(Reported):
    """What every exploring result shares: its label, the user's loader's settings, the
    error that stopped it and which run failed, and the logs it wrote."""

    label: str
    loader_settings: dict[str, Any]
    error: Optional[BaseException] = None
    failed: Optional[str] = None
    """The run that failed: ``real``/``ideal``, a rung, or a sweep configuration's label."""
    log_paths: dict[str, str] = field(default_factory=dict)
    """Run name -> the JSON log written for it (under ``RunSettings.log_dir``)."""
    settings: Optional[RunSettings] = None
    """The settings it ran with."""

    @property
    def ok(self) -> bool:
        return self.error is None
