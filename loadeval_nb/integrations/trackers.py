"""Trackers: a pair's verdict written where the user's metrics already are (TensorBoard,
MLflow, Weights & Biases, or a framework trainer's own loggers).

``RunSettings(log_to=...)`` (``--log-to`` on the command line and in the magics) names
them, one entry a tracker:

* ``tensorboard:DIR``: an event file in ``DIR`` (``tensorboard`` alone: ``runs/``, as
  ``torch.utils.tensorboard.SummaryWriter`` makes by default);
* ``mlflow`` (``mlflow:TRACKING_URI``): a run of its own, nested under the active run
  when there is one;
* ``wandb`` (``wandb:PROJECT``): the active W&B run when there is one, else a run of its
  own;
* ``trainer``: a Lightning Trainer's loggers or a Hugging Face Trainer's ``report_to``
  (``fit_pair``, ``train_pair``, a ``%%loadeval`` cell that fits or trains one).

What is written, under ``loadeval/``: the verdict (text), the speedup, its interval, the
headroom and the mean steps (scalars), each side's steady step times by step index
(``loadeval/steps/real_s``, ``loadeval/steps/ideal_s``) and the configuration (the
loader's settings and the run's settings). :func:`check_log_to` refuses a bad entry or a
missing package in one sentence before a run starts; :func:`log_result` writes after it
and never raises for a tracker's failure: it returns one sentence per tracker that
failed, for the front end to show as a warning. Each tracker's package is imported only
here, when it is written to.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from dataclasses import dataclass, fields
from typing import Any, Optional

from ..core.errors import LoadEvalError
from ..core.verdict import Diagnosis

__all__ = ["TRACKERS", "Tracker", "TrackedPair", "check_log_to", "log_result", "parse_log_to"]

TRACKERS = ("tensorboard", "mlflow", "wandb", "trainer")
"""The trackers ``log_to`` may name."""

PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}
"""The package each tracker needs (``pip install`` name; mlflow-skinny also gives
``mlflow``)."""

PREFIX = "loadeval"


@dataclass(frozen=True)
class Tracker:
    """One ``log_to`` entry: which tracker, and where (a TensorBoard folder, an MLflow
    tracking URI, a W&B project; None: the tracker's default)."""

    kind: str
    where: Optional[str] = None

    def __str__(self) -> str:
        return f"{self.kind}:{self.where}" if self.where else self.kind


def parse_log_to(log_to: Any, option: str = "log_to") -> list[Tracker]:
    """``log_to`` (one entry or a sequence of them) as trackers; :class:`LoadEvalError`
    naming ``option`` for an entry that names no tracker."""
    if not log_to:
        return []
    entries = [log_to] if isinstance(log_to, str) else list(log_to)
    out: list[Tracker] = []
    for entry in entries:
        kind, _, where = str(entry).strip().partition(":")
        kind = kind.strip().lower()
        if kind not in TRACKERS or (kind == "trainer" and where):
            raise LoadEvalError(
                f"{option} takes tensorboard:DIR, mlflow, wandb or trainer, not {entry!r}."
            )
        out.append(Tracker(kind, where.strip() or None))
    return out


def check_log_to(
    log_to: Any,
    option: str = "log_to",
    *,
    trainer: Any = None,
    no_trainer: str = "this run does not train",
) -> list[Tracker]:
    """The trackers of ``log_to``, checked before a run starts: each entry names a tracker
    whose package is installed (looked up, not imported), and ``trainer`` is only asked
    for with a ``trainer`` (``no_trainer`` says why there is none).
    :class:`LoadEvalError`, one sentence, otherwise."""
    trackers = parse_log_to(log_to, option)
    for t in trackers:
        if t.kind == "trainer":
            if trainer is None:
                raise LoadEvalError(
                    f"{option} trainer writes to a Lightning or Hugging Face Trainer's own "
                    f"loggers, and {no_trainer}; name the tracker instead (tensorboard:DIR, "
                    "mlflow or wandb)."
                )
            continue
        package = PACKAGES[t.kind]
        if importlib.util.find_spec(package) is None:
            raise LoadEvalError(
                f"{option} {t.kind} needs the {package} package, which is not installed; "
                f"pip install {package}, or leave {option} {t.kind} out."
            )
    return trackers


# -- what is written ------------------------------------------------------------------
@dataclass(frozen=True)
class TrackedPair:
    """What a tracker gets from a result: plain data, the same for every tracker."""

    label: str
    verdict: str
    text: str
    """The verdict's plain text, as ``print(result)`` shows it."""
    scalars: dict[str, float]
    """``speedup``, ``speedup_ci_low``, ... (None values left out)."""
    series: dict[str, list[tuple[int, float]]]
    """``real_s`` / ``ideal_s``: (step index in its run, steady step time in seconds)."""
    config: dict[str, Any]
    """``loader/num_workers``, ``settings/steps``, ...: scalars and strings only."""


SCALARS = (
    "speedup",
    "headroom",
    "real_step_s",
    "ideal_step_s",
    "wait_share",
    "time_saved_per_epoch_s",
)


def tracked_pair(result: Any, settings: Any = None) -> Optional[TrackedPair]:
    """What ``result`` (a ``PairResult``, a ``ScriptResult`` or a ``Diagnosis``) gives a
    tracker; None when it has no verdict (a failed run writes nothing)."""
    real = ideal = None
    diagnosis: Optional[Diagnosis]
    if isinstance(result, Diagnosis):
        diagnosis = result
    else:
        diagnosis = getattr(result, "diagnosis", None)
        real, ideal = getattr(result, "real", None), getattr(result, "ideal", None)
        ranks = getattr(result, "ranks", None)
        if diagnosis is None and ranks is not None and ranks.slowest is not None:
            diagnosis = ranks.diagnosis()  # the slowest rank sets every rank's pace
            rank = ranks.ranks_by_number[ranks.slowest]
            real, ideal = rank.run("real"), rank.run("ideal")
    if not isinstance(diagnosis, Diagnosis):
        return None
    settings = settings if settings is not None else getattr(result, "settings", None)
    loader = getattr(result, "loader_settings", None) or (real.loader_settings if real else {})
    d = diagnosis
    scalars = {k: getattr(d, k) for k in SCALARS}
    scalars["speedup_ci_low"], scalars["speedup_ci_high"] = d.speedup_ci
    config = {f"loader/{k}": _plain(v) for k, v in sorted((loader or {}).items())}
    if settings is not None:
        for f in fields(settings):
            if f.name not in ("checked", "log_to"):
                config[f"settings/{f.name}"] = _plain(getattr(settings, f.name))
    label = getattr(result, "label", "") or ""
    return TrackedPair(
        label=label or "loadeval",
        verdict=d.verdict,
        text=d.text(),
        scalars={k: float(v) for k, v in scalars.items() if v is not None},
        series={f"{w}_s": _steady(r) for w, r in (("real", real), ("ideal", ideal)) if r},
        config=config,
    )


def _steady(run: Any) -> list[tuple[int, float]]:
    return [(i, run.step_ns[i] / 1e9) for i in run.steady_indices()]


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    try:
        return json.dumps(v, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return str(v)


# -- writing --------------------------------------------------------------------------
def log_result(
    result: Any, settings: Any = None, *, log_to: Any = None, trainer: Any = None
) -> list[str]:
    """Write ``result``'s verdict to the trackers of ``log_to`` (default:
    ``settings.log_to``, ``settings`` defaulting to ``result.settings``); ``trainer`` is
    the Lightning or Hugging Face Trainer that ``trainer`` writes to. Never raises for a
    tracker that fails: the sentences saying which failed and why, one each (empty when
    all were written). A result without a verdict writes nothing."""
    settings = settings if settings is not None else getattr(result, "settings", None)
    if log_to is None:
        log_to = getattr(settings, "log_to", None)
    try:
        trackers = parse_log_to(log_to)
    except LoadEvalError as e:
        return [str(e)]
    if not trackers:
        return []
    pair = tracked_pair(result, settings)
    if pair is None:
        return []
    failed: list[str] = []
    for t in trackers:
        try:
            if t.kind == "trainer":
                failed += _write_trainer(trainer, pair)
            else:
                WRITERS[t.kind](t.where, pair)
        except Exception as e:  # the run is measured: a tracker cannot undo it
            failed.append(_failed(str(t), e))
    return failed


def _failed(name: str, e: BaseException) -> str:
    why = f"{type(e).__name__}: {e}".strip().rstrip(".")
    if len(why) > 300:
        why = why[:297] + "..."
    return f"writing the verdict to {name} failed ({why}); the run and its logs are kept."


# TensorBoard
def write_tensorboard(where: Optional[str], pair: TrackedPair) -> None:
    """An event file in ``where`` (None: ``runs/<time>_<host>``, SummaryWriter's default)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=os.path.expanduser(where) if where else None)
    try:
        to_summary_writer(writer, pair)
    finally:
        writer.close()


def to_summary_writer(writer: Any, pair: TrackedPair) -> None:
    """``pair`` written with a SummaryWriter (ours, or a logger's own)."""
    for k, v in pair.scalars.items():
        writer.add_scalar(f"{PREFIX}/{k}", v, 0)
    for name, points in pair.series.items():
        for i, v in points:
            writer.add_scalar(f"{PREFIX}/steps/{name}", v, i)
    writer.add_text(
        f"{PREFIX}/verdict", f"**{pair.verdict}**\n\n    " + "\n    ".join(pair.text.splitlines())
    )
    rows = "\n".join(f"| {k} | {v} |" for k, v in pair.config.items())
    writer.add_text(f"{PREFIX}/config", f"| setting | value |\n|---|---|\n{rows}")
    writer.flush()


# MLflow
def write_mlflow(where: Optional[str], pair: TrackedPair) -> None:
    """A run of its own named after the pair; nested under the active run when there is
    one (and no tracking URI is given); ``where``: a tracking URI (default: MLflow's,
    ``MLFLOW_TRACKING_URI``)."""
    import mlflow
    from mlflow import MlflowClient

    if where is None:
        parent = mlflow.active_run()
        run = mlflow.start_run(run_name=pair.label, nested=parent is not None)
        try:
            to_mlflow(MlflowClient(), run.info.run_id, pair)
        except BaseException:
            mlflow.end_run("FAILED")
            raise
        mlflow.end_run()
        return
    client = MlflowClient(tracking_uri=where)
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "Default")
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(name)
    run = client.create_run(exp_id, run_name=pair.label)
    status = "FAILED"
    try:
        to_mlflow(client, run.info.run_id, pair)
        status = "FINISHED"
    finally:
        client.set_terminated(run.info.run_id, status)


def to_mlflow(client: Any, run_id: str, pair: TrackedPair) -> None:
    """``pair`` written into the MLflow run ``run_id`` (metrics, params and a tag)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    metrics = [Metric(f"{PREFIX}/{k}", v, now, 0) for k, v in pair.scalars.items()]
    for name, points in pair.series.items():
        metrics += [Metric(f"{PREFIX}/steps/{name}", v, now, i) for i, v in points]
    params = [Param(f"{PREFIX}/{k}", str(v)[:6000]) for k, v in pair.config.items()]
    tags = [RunTag(f"{PREFIX}/verdict", pair.verdict), RunTag(f"{PREFIX}/text", pair.text)]
    for k in range(0, len(metrics), 1000):  # MLflow's limits for one batch
        client.log_batch(run_id, metrics=metrics[k : k + 1000])
    for k in range(0, len(params), 100):
        client.log_batch(run_id, params=params[k : k + 100])
    client.log_batch(run_id, tags=tags)


# Weights & Biases
def write_wandb(where: Optional[str], pair: TrackedPair) -> None:
    """Into the active W&B run when there is one, else a run of its own (``where``: its
    project; default: ``WANDB_PROJECT``, else W&B's)."""
    import wandb

    run = wandb.run
    if run is not None:
        to_wandb(run, pair)
        return
    run = wandb.init(
        project=where, name=pair.label, job_type=PREFIX, config={PREFIX: _nested(pair.config)}
    )
    try:
        to_wandb(run, pair, config=False)
    finally:
        run.finish()


def to_wandb(run: Any, pair: TrackedPair, config: bool = True) -> None:
    """``pair`` written into the W&B run ``run``: the step series against their own x
    axis (``loadeval/step``, so the run's own steps are left alone), the rest in the
    summary and the config."""
    if config:
        run.config.update({PREFIX: _nested(pair.config)}, allow_val_change=True)
    run.define_metric(f"{PREFIX}/step")
    run.define_metric(f"{PREFIX}/steps/*", step_metric=f"{PREFIX}/step")
    by_step: dict[int, dict[str, float]] = {}
    for name, points in pair.series.items():
        for i, v in points:
            by_step.setdefault(i, {})[f"{PREFIX}/steps/{name}"] = v
    for i in sorted(by_step):
        run.log({f"{PREFIX}/step": i, **by_step[i]})
    run.summary.update(
        {
            **{f"{PREFIX}/{k}": v for k, v in pair.scalars.items()},
            f"{PREFIX}/verdict": pair.verdict,
            f"{PREFIX}/text": pair.text,
        }
    )


def _nested(config: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in config.items():
        group, _, name = k.partition("/")
        out.setdefault(group, {})[name] = v
    return out


WRITERS = {"tensorboard": write_tensorboard, "mlflow": write_mlflow, "wandb": write_wandb}


# A trainer's own loggers
def _write_trainer(trainer: Any, pair: TrackedPair) -> list[str]:
    """``pair`` written to ``trainer``'s loggers (Lightning) or ``report_to`` (Hugging
    Face); the sentences for those that failed or that loadeval_nb cannot write."""
    if trainer is None:
        return ["log_to trainer found no Trainer to write to, so nothing was written to it."]
    targets: list[tuple[str, Any]] = []
    from ._lightning import is_lightning_trainer, lightning_loggers

    if is_lightning_trainer(trainer):
        for name, kind, handle in lightning_loggers(trainer):
            targets.append((name, _logger_writer(kind, handle)))
        if not targets:
            return [
                "the Trainer has no logger (logger=False), so the verdict was not written to it."
            ]
    else:
        from ._huggingface import report_to

        for name, kind, where in report_to(trainer):
            targets.append((name, _writer(kind, where) if kind in WRITERS else _cannot(kind)))
        if not targets:
            return [
                "the Trainer reports to nothing (report_to none), so the verdict was not written to it."
            ]
    failed: list[str] = []
    for name, write in targets:
        try:
            write(pair)
        except Exception as e:
            failed.append(_failed(name, e))
    return failed


def _writer(kind: str, where: Optional[str]) -> Any:
    write = WRITERS[kind]
    return lambda pair: write(where, pair)


def _cannot(name: str) -> Any:
    def write(pair: TrackedPair) -> None:
        raise LoadEvalError(f"loadeval_nb writes to tensorboard, mlflow and wandb, not {name}")

    return write


def _logger_writer(kind: str, handle: Any) -> Any:
    if kind == "summary_writer":

        def write(pair: TrackedPair) -> None:
            to_summary_writer(handle, pair)
            # the logger closed it when the fit ended; a write opened it again (and its
            # thread): closed as it was (a later fit opens it again, as a write did)
            handle.close()

        return write
    if kind == "mlflow":
        return lambda pair: to_mlflow(handle[0], handle[1], pair)
    if kind == "wandb":
        return lambda pair: to_wandb(handle, pair)
    return lambda pair: to_logger(handle, pair)


def to_logger(logger: Any, pair: TrackedPair) -> None:
    """``pair`` written through a Lightning logger's own interface (hyperparameters and
    metrics), for a logger with no experiment we know."""
    logger.log_hyperparams(
        {**{f"{PREFIX}/{k}": v for k, v in pair.config.items()}, f"{PREFIX}/verdict": pair.verdict}
    )
    logger.log_metrics({f"{PREFIX}/{k}": v for k, v in pair.scalars.items()}, step=0)
    by_step: dict[int, dict[str, float]] = {}
    for name, points in pair.series.items():
        for i, v in points:
            by_step.setdefault(i, {})[f"{PREFIX}/steps/{name}"] = v
    for i in sorted(by_step):
        logger.log_metrics(by_step[i], step=i)
    logger.save()
