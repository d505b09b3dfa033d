"""The ranks' pairs gathered from the run logs they wrote (and the job's proof), where
no process group joins the reader to them (``python -m loadeval_nb ranks DIR``, the watch)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Union

from .._files import expand_path
from ..errors import LoadEvalError
from ..record.lognames import is_proof_name, parse_log_name, proof_name
from ..record.runlog import load_run
from .proof import load_proof
from .skew import RankResult, RanksResult, _payload, ranks_result


def _by_job(paths: Sequence[str]) -> dict[str, dict[int, dict[str, str]]]:
    """Per-rank log paths by job (the names' common start), rank and side; other paths
    are left out."""
    jobs: dict[str, dict[int, dict[str, str]]] = {}
    for path in paths:
        name = parse_log_name(os.path.basename(path))
        if name is not None and name.rank is not None:
            jobs.setdefault(name.job, {}).setdefault(name.rank, {})[name.side] = path
    return jobs


def gather_logs(
    where: Union[str, os.PathLike[str], Sequence[Union[str, os.PathLike[str]]]],
) -> RanksResult:
    """Every rank's pair read from the run logs the ranks wrote, for a process outside
    their process group (the launcher that started them, a notebook, a job's last step):
    the same :class:`RanksResult` as :func:`gather_pair`.

    ``where`` is a folder holding per-rank logs (``...-real-rank0.json``,
    ``...-ideal-rank0.json``, ...; on several nodes, the shared ``log_dir`` every node
    wrote to), or a list of such files. A folder holding several jobs' logs gives the
    newest job (the one whose logs were written last); ``left_out`` names the others.
    A rank's contended arm (``...-contended-rank0.json``, a pair run with
    ``contention``) goes into its diagnosis (the headroom split); the job's straggler
    proof (``...-proof.json``, beside the logs, listed or not) into ``proof``.

    Raises :class:`~loadeval_nb.LoadEvalError` when there is no per-rank log to gather,
    and :class:`~loadeval_nb.errors.RunLogError` for a log that cannot be read.
    """
    if isinstance(where, (str, os.PathLike)):
        folder = expand_path(where)
        if not os.path.isdir(folder):
            raise LoadEvalError(
                f"{folder!r} is not a folder; pass the folder the ranks wrote their run logs to "
                "(--log-dir, RunSettings(log_dir=...))."
            )
        jobs = _by_job([os.path.join(folder, n) for n in sorted(os.listdir(folder))])
        if not jobs:
            raise LoadEvalError(
                f"No per-rank run logs (names ending -real-rank0.json, -ideal-rank0.json, ...) "
                f"in {folder!r}; pass the folder the ranks wrote to."
            )
    else:
        paths = [os.fspath(p) for p in where]
        jobs = _by_job(paths)
        named = {p for r in jobs.values() for s in r.values() for p in s.values()}
        stray = [p for p in paths if p not in named and not is_proof_name(os.path.basename(p))]
        if stray or not jobs:
            raise LoadEvalError(
                f"{stray[0]!r} is not a per-rank run log (a name ending -real-rank0.json or "
                "-ideal-rank0.json, or a job's -proof.json)."
                if stray
                else "No run logs given; pass the per-rank logs to gather."
            )

    def mtime(path: str) -> float:
        try:
            return os.path.getmtime(path)
        except OSError as e:  # a broken link, a loop of links: read, never written here
            raise LoadEvalError(
                f"Cannot read the run log {path!r} ({e.strerror or e}); remove it or pass the "
                "logs to gather one by one."
            ) from None

    def written(job: str) -> float:
        return max(mtime(p) for r in jobs[job].values() for p in r.values())

    newest = sorted(jobs, key=lambda j: (written(j), j))
    job = newest[-1]
    ranks = []
    for rank, files in sorted(jobs[job].items()):
        runs = {side: load_run(path) for side, path in files.items()}
        host = next(
            (str(r.environment["host"]) for r in runs.values() if r.environment.get("host")), ""
        )
        missing = [s for s in ("real", "ideal") if s not in runs]
        ranks.append(
            RankResult(
                rank=rank,
                host=host or "?",
                real=_payload(runs.get("real")),
                ideal=_payload(runs.get("ideal")),
                error=f"no {missing[0]} run log" if len(missing) == 1 else None,
                contended=_payload(runs.get("contended")),
                variant=_payload(runs.get("variant")),
            )
        )
    out = ranks_result(ranks)
    folders = {os.path.dirname(p) for r in jobs[job].values() for p in r.values()}
    proofs = [os.path.join(f, proof_name(job)) for f in sorted(folders)]
    found = [p for p in proofs if os.path.isfile(p)]
    if found:
        out.proof = load_proof(found[0])
    out.job = job
    out.left_out = tuple(newest[:-1][::-1])
    return out
