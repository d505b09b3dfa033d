"""What other loader settings would buy: the DataLoader worker/queue model
(``simulator``), its predictions over a range of settings (``predict``) and the model
fed from a measured pair (``from_runs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._face import lazy_face

if TYPE_CHECKING:  # where each name lives; imported on its first use
    from .from_runs import predict_from_runs
    from .predict import Prediction, predict
    from .simulator import SimResult, simulate

__all__ = [
    "Prediction",
    "SimResult",
    "predict",
    "predict_from_runs",
    "simulate",
]
__getattr__, __dir__ = lazy_face(__name__)
