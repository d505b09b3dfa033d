"""The kernel's busy status while ``%%loadeval`` runs, in a real kernel (jupyter_client)
talking to a stand-in for JupyterLab 4.6.

JupyterLab shows the kernel's state from the last ``status`` message on IOPub, whatever
request it answers. It sends widget traffic over a kernel subshell ("comms over
subshells", one per comm target) and asks for that subshell on the control channel
when the first widget appears. So the stand-in does what JupyterLab and jupyter_bokeh
do: it asks for a subshell when the first widget opens, echoes every plot update back
(as BokehJS does), moves a slider of the user's during the run, and clicks "Rerun
pair". The tests replay JupyterLab's rule over what the kernel published and check
that it reads busy until the cell (or the click) ends.
"""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any, Callable, Optional

import pytest

jupyter_client = pytest.importorskip("jupyter_client")

pytestmark = pytest.mark.slow

SETUP = textwrap.dedent(
    """
    import threading, time, torch, ipywidgets
    from torch.utils.data import DataLoader, Dataset
    from loadeval_nb.magic import latest_session
    %load_ext loadeval_nb

    class Slow(Dataset):
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(0.003)
            return torch.full((2,), float(i))

    train_loader = DataLoader(Slow(), batch_size=4)
    slider = ipywidgets.IntSlider()
    threads = set()
    """
)
CELL = (
    "%%loadeval train_loader --steps 60 --warmup 2 --cache 4\n"
    "for batch in train_loader:\n"
    "    time.sleep(0.02)\n"
    "    threads.add(threading.current_thread().name)\n"
)
ECHO = {  # what jupyter_bokeh's browser side sends back after applying a patch
    "method": "custom",
    "content": {"event": "jsevent", "kind": "ModelChanged", "model": {"id": "x"}, "attr": "end"},
}


class Frontend:
    """A kernel client that sends widget traffic the way JupyterLab 4.6 does."""

    def __init__(self, cwd: str) -> None:
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.subshell: Optional[str] = None
        self.echoed: set[str] = set()  # msg_ids of the echoes sent

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def control(self, msg_type: str) -> str:
        msg = self.kc.session.msg(msg_type, {})
        self.kc.control_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def create_subshell(self) -> str:
        msg_id = self.control("create_subshell_request")
        while True:
            reply = self.kc.get_control_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg_id:
                return str(reply["content"]["subshell_id"])

    def comm_msg(self, comm_id: str, data: dict[str, Any]) -> str:
        """A message from the browser to a widget, over the widgets' subshell."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        msg["header"]["subshell_id"] = self.subshell
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def value(self, expr: str) -> Any:
        """Evaluate ``expr`` in the kernel (between runs) and return it, JSON-decoded."""
        msg_id = self.kc.execute(f"import json as _j; print(_j.dumps({expr}))")
        out = self.until_idle(msg_id)
        texts = [m["content"]["text"] for m in out if m["msg_type"] == "stream"]
        return json.loads("".join(texts).strip().splitlines()[-1])

    def until_idle(
        self, msg_id: str, react: Optional[Callable[[dict[str, Any]], None]] = None
    ) -> list[dict[str, Any]]:
        """Every IOPub message until the request ``msg_id`` is idle, in arrival order."""
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            seen.append(msg)
            if react is not None:
                react(msg)
            if (
                msg["msg_type"] == "status"
                and msg["parent_header"].get("msg_id") == msg_id
                and msg["content"]["execution_state"] == "idle"
            ):
                return seen

    def echo_plot_updates(self, bokeh_comms: set[str]) -> Callable[[dict[str, Any]], None]:
        def react(msg: dict[str, Any]) -> None:
            content = msg["content"]
            model = content.get("data", {}).get("state", {}).get("_model_name")
            if msg["msg_type"] == "comm_open" and model == "BokehModel":
                bokeh_comms.add(content["comm_id"])
            if msg["msg_type"] == "comm_msg" and content["comm_id"] in bokeh_comms:
                self.echoed.add(self.comm_msg(content["comm_id"], ECHO))

        return react


def parent_id(msg: dict[str, Any]) -> Optional[str]:
    return msg["parent_header"].get("msg_id")


def statuses(msgs: list[dict[str, Any]]) -> list[tuple[str, Optional[str]]]:
    return [
        (m["content"]["execution_state"], parent_id(m)) for m in msgs if m["msg_type"] == "status"
    ]


def assert_reads_busy(msgs: list[dict[str, Any]], request: str) -> None:
    """JupyterLab's rule (the last status message wins) replayed over ``msgs``: from the
    request's busy to its idle, an idle for any other request is followed at once by busy."""
    seq = statuses(msgs)
    start = seq.index(("busy", request))
    during = seq[start + 1 : -1]
    assert seq[-1] == ("idle", request)
    for k, (state, parent) in enumerate(during):
        if state == "idle" and parent != request:
            assert k + 1 < len(during) and during[k + 1] == ("busy", request), (
                f"the kernel read idle (after {parent}) while {request} ran: {seq}"
            )


@pytest.fixture(scope="module")
def frontend(tmp_path_factory):
    fe = Frontend(str(tmp_path_factory.mktemp("kernel")))
    try:
        setup = fe.kc.execute(SETUP)
        assert all(m["msg_type"] != "error" for m in fe.until_idle(setup))
        # JupyterLab's "comms over subshells": the slider's first update comes over the
        # widgets' subshell; ipykernel sends the slider's later browser messages there
        fe.subshell = fe.create_subshell()
        slider = fe.value("slider.comm.comm_id")
        fe.comm_msg(slider, {"method": "update", "state": {"value": 1}, "buffer_paths": []})
        assert fe.value("slider.value") == 1
        yield fe
    finally:
        fe.stop()


def test_the_kernel_reads_busy_for_the_whole_cell(frontend):
    fe = frontend
    slider = fe.value("slider.comm.comm_id")
    bokeh: set[str] = set()
    echo = fe.echo_plot_updates(bokeh)
    sent: dict[str, str] = {}

    def react(msg: dict[str, Any]) -> None:
        echo(msg)
        if msg["msg_type"] == "comm_open" and "subshell" not in sent:
            # JupyterLab asks for a subshell when a comm target's first widget opens
            sent["subshell"] = fe.control("create_subshell_request")
        if msg["msg_type"] == "comm_msg" and len(fe.echoed) >= 2 and "slider" not in sent:
            # the user moves a slider of theirs while the run goes: handled at once, on
            # the subshell, with its own busy and idle
            sent["slider"] = fe.comm_msg(
                slider, {"method": "update", "state": {"value": 2}, "buffer_paths": []}
            )

    cell = fe.kc.execute(CELL)
    msgs = fe.until_idle(cell, react)
    assert not [m for m in msgs if m["msg_type"] == "error"]
    assert {"subshell", "slider"} <= set(sent) and bokeh and len(fe.echoed) >= 3
    answered = {p for _, p in statuses(msgs)}
    assert sent["subshell"] in answered and sent["slider"] in answered  # both ran mid-cell
    assert_reads_busy(msgs, cell)
    # the pusher thread sent its updates under the cell's parent header, not under the
    # slider's (the last request another thread handled)
    ours = [m for m in msgs if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] != slider]
    assert ours and {parent_id(m) for m in ours} == {cell}
    # the plots' echoes wait for the main shell: none is answered while the cell runs
    assert not (answered & fe.echoed)
    assert fe.value("sorted(threads)") == ["MainThread"]


def test_reruns_from_the_panel_run_on_the_main_thread_and_read_busy(frontend):
    fe = frontend
    button = fe.value("latest_session().panel.button.comm.comm_id")
    fe.value("threads.clear() or 0")
    bokeh = set(fe.value("[w.comm.comm_id for w in (latest_session().dashboard.live_view,)]"))
    for _ in range(2):  # the second click comes after the first set the button's state
        fe.echoed.clear()
        click = fe.comm_msg(button, {"method": "custom", "content": {"event": "click"}})
        msgs = fe.until_idle(click, fe.echo_plot_updates(bokeh))
        assert fe.echoed, "no plot update reached the browser during the rerun"
        assert_reads_busy(msgs, click)
        assert not ({p for _, p in statuses(msgs)} & fe.echoed)
    # the user's loop ran where a kernel interrupt (the stop button) reaches it
    assert fe.value("sorted(threads)") == ["MainThread"]
    assert fe.value("len(latest_session().dashboard.rows)") == 3
