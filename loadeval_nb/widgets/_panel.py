"""The rerun panel: other cache size / num_workers / pin_memory / prefetch / persistence /
torch threads."""

from __future__ import annotations

import html
import os
from typing import Any, Callable, Optional

import ipywidgets as W

from ..core._shared import Action
from ..core.verdict import Facts
from ._comms import on_main_shell


class RerunPanel:
    """Controls and a "Rerun pair" button.

    ``on_rerun(changes, cache)`` is called with the DataLoader settings to change
    (only those that differ from the loader's) and the cache size.
    """

    def __init__(
        self,
        knobs: dict[str, Any],
        cache: int,
        on_rerun: Callable[[dict[str, Any], int], None],
        rebuildable: bool = True,
        on_sweep: Optional[Callable[[str], None]] = None,
        fixed_note: str = "The loader is not a torch DataLoader: only the cache size can change.",
    ) -> None:
        self._knobs = dict(knobs)
        self._on_rerun = on_rerun
        self._on_sweep = on_sweep
        style = {"description_width": "initial"}
        lay = W.Layout(width="170px")
        self.cache = W.BoundedIntText(
            value=cache, min=1, max=100_000, description="cache batches", style=style, layout=lay
        )
        self.num_workers = W.BoundedIntText(
            value=int(knobs.get("num_workers") or 0),
            min=0,
            max=256,
            description="num_workers",
            style=style,
            layout=lay,
        )
        self.pin_memory = W.Checkbox(
            value=bool(knobs.get("pin_memory")),
            description="pin_memory",
            indent=False,
            layout=W.Layout(width="120px"),
        )
        self.prefetch_factor = W.BoundedIntText(
            value=int(knobs.get("prefetch_factor") or 2),
            min=1,
            max=64,
            description="prefetch_factor",
            style=style,
            layout=lay,
        )
        cores = os.cpu_count() or 1
        self.num_threads = W.BoundedIntText(
            value=int(knobs.get("num_threads") or 1),
            min=1,
            max=4 * cores,
            description="torch threads",
            tooltip="torch.set_num_threads for both runs: on CPU training, the cores the "
            "training step uses compete with the loader's workers",
            style=style,
            layout=lay,
        )
        self.persistent_workers = W.Checkbox(
            value=bool(knobs.get("persistent_workers")),
            description="persistent_workers",
            indent=False,
            layout=W.Layout(width="160px"),
        )
        self.button = W.Button(description="Rerun pair", button_style="primary", icon="refresh")
        self.button.add_class("loadeval-rerun")
        self.note = W.HTML("")
        self.busy_note = W.HTML("")
        loader_controls = [
            self.num_workers,
            self.pin_memory,
            self.prefetch_factor,
            self.persistent_workers,
        ]
        if not rebuildable:
            for c in loader_controls:
                c.disabled = True
            self.note.value = f"<span style='color:#777'>{html.escape(fixed_note)}</span>"
        self.num_workers.observe(self._workers_changed, names="value")
        self._workers_changed({"new": self.num_workers.value})
        self.button.on_click(self._clicked)
        cores = _cores()
        self._default_sweep = (
            f"num_workers={sweep_default(int(knobs.get('num_workers') or 0), cores)}"
        )
        self._suggested = self._default_sweep
        self.sweep_spec = W.Text(
            value=self._default_sweep,
            description="sweep",
            placeholder="num_workers=0,2,4; pin_memory=False,True",
            style=style,
            layout=W.Layout(width="420px"),
        )
        self.sweep_button = W.Button(description="Run sweep", icon="th-list")
        self.sweep_button.add_class("loadeval-sweep-button")
        self.sweep_button.on_click(self._sweep_clicked)
        for b in (self.button, self.sweep_button):
            on_main_shell(b)  # their callbacks run the user's loop: on the main thread
        rows: list[Any] = [
            W.HTML("<b>Try other settings</b>"),
            W.HBox([self.cache, self.num_workers, self.prefetch_factor]),
            W.HBox([self.pin_memory, self.persistent_workers, self.num_threads, self.button]),
        ]
        if on_sweep is not None and rebuildable:
            rows.append(W.HBox([self.sweep_spec, self.sweep_button]))
        rows += [self.busy_note, self.note]
        self.widget = W.VBox(rows)
        self.widget.add_class("loadeval-panel")
        # the dashboard the view is put in reaches the panel through it, to fill the sweep
        # box with what its verdict card recommends (:meth:`suggest_sweep`)
        self.widget.rerun_panel = self
        self._rebuildable = rebuildable

    def suggest_sweep(self, spec: Optional[str]) -> None:
        """Fill the sweep box with ``spec`` (what the verdict card recommends; None: the
        default workers sweep), unless the user has typed a sweep of their own."""
        if self.sweep_spec.value != self._suggested:
            return
        self._suggested = spec or self._default_sweep
        self.sweep_spec.value = self._suggested
        self.sweep_spec.tooltip = (
            "the sweep the verdict card recommends" if spec else "a first num_workers sweep"
        )

    def _workers_changed(self, change: dict[str, Any]) -> None:
        no_workers = not change["new"]
        self.prefetch_factor.disabled = no_workers or not getattr(self, "_rebuildable", True)
        self.persistent_workers.disabled = no_workers or not getattr(self, "_rebuildable", True)

    def changes(self) -> dict[str, Any]:
        """The loader settings that differ from the loader's own."""
        threads = (
            {"num_threads": self.num_threads.value}
            if "num_threads" in self._knobs and self.num_threads.value != self._knobs["num_threads"]
            else {}
        )
        if not self._rebuildable:
            return threads
        want = {
            "num_workers": self.num_workers.value,
            "pin_memory": self.pin_memory.value,
            "prefetch_factor": self.prefetch_factor.value if self.num_workers.value else None,
            "persistent_workers": self.persistent_workers.value
            if self.num_workers.value
            else False,
        }
        return {**{k: v for k, v in want.items() if v != self._knobs.get(k)}, **threads}

    def set_busy(self, busy: bool, what: str = "the pair") -> None:
        """While a rerun or a sweep from the panel runs: the buttons are off, the panel says
        so (the kernel reads busy too: the button's message is a request like a cell)."""
        self.button.disabled = busy
        self.sweep_button.disabled = busy
        self.button.description = "Running…" if busy else "Rerun pair"
        self.busy_note.value = (
            f"<span class='loadeval-busy-note' style='color:#1565c0'>Running {what}: the "
            "kernel is busy until it is done (interrupt the kernel to stop it).</span>"
            if busy
            else ""
        )
        if busy:
            self.widget.add_class("loadeval-busy")
        else:
            self.widget.remove_class("loadeval-busy")

    def _sweep_clicked(self, _button: Any) -> None:
        if self._on_sweep is None:
            return
        self.set_busy(True, "the sweep")
        try:
            self._on_sweep(self.sweep_spec.value)
        finally:
            self.set_busy(False)

    def _clicked(self, _button: Any) -> None:
        self.set_busy(True)
        try:
            self._on_rerun(self.changes(), self.cache.value)
        finally:
            self.set_busy(False)


def _cores() -> int:
    """The CPUs this process may run on (its affinity), as the core counts them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def sweep_default(nw: int, cores: int) -> str:
    """A first sweep to offer: none, the current num_workers, half and double it, never
    more workers than ``cores`` (the current setting stays: it is the reference)."""
    vals = sorted({0, max(nw // 2, 1), nw, max(nw * 2, 2)})
    return ",".join(str(v) for v in vals if v <= cores or v == nw)


def advised_sweep(facts: Facts, cores: Optional[int] = None) -> Optional[str]:
    """The sweep a verdict card's advice names (its first sweep action), trimmed to what
    ``cores`` CPUs (default: this process's) can run: no more workers or intra-op threads
    than cores. None when the advice names none."""
    cores = cores or _cores()
    spec = next(
        (
            p.value
            for f in facts.facts
            if f.key == "advice"
            for p in f.pieces
            if isinstance(p, Action) and p.setting == "sweep"
        ),
        None,
    )
    if not isinstance(spec, str):
        return None
    parts = []
    for part in spec.split(";"):
        key, _, values = part.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if key in ("num_workers", "num_threads"):
            fit = [v for v in vals if not v.isdigit() or int(v) <= cores]
            vals = fit or [min(vals, key=lambda v: int(v) if v.isdigit() else 0)]
        parts.append(f"{key}={','.join(vals)}")
    return "; ".join(parts)
