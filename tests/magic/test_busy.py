"""reads_busy with a stand-in kernel: what it publishes, and that it puts the kernel back."""

from __future__ import annotations

from loadeval_nb.magic._busy import reads_busy


def parent(msg_id):
    return {"header": {"msg_id": msg_id}}


class Kernel:
    """What reads_busy uses of ipykernel's Kernel: _publish_status and get_parent."""

    def __init__(self):
        self.sent = []
        self.parents = {"shell": parent("cell"), "control": parent("subshell request")}

    def _publish_status(self, status, channel, parent=None):
        self.sent.append((status, (parent or self.get_parent(channel))["header"]["msg_id"]))

    def get_parent(self, channel="shell"):
        return self.parents[channel]


class Shell:
    def __init__(self, kernel):
        self.kernel = kernel


def test_an_idle_for_another_request_is_followed_by_busy_for_the_cell():
    k = Kernel()
    with reads_busy(Shell(k)):
        k._publish_status("busy", "control")  # JupyterLab asks for a subshell
        k._publish_status("idle", "control")
        k._publish_status("idle", "shell", parent("a slider moved"))  # on a subshell
        k._publish_status("busy", "shell")  # the cell's own: untouched
    assert k.sent == [
        ("busy", "subshell request"),
        ("idle", "subshell request"),
        ("busy", "cell"),
        ("idle", "a slider moved"),
        ("busy", "cell"),
        ("busy", "cell"),
    ]
    assert "_publish_status" not in vars(k)  # put back
    k._publish_status("idle", "control")
    assert k.sent[-1] == ("idle", "subshell request")  # nothing follows it any more


def test_nested_blocks_and_failures_put_back_what_was_there():
    k = Kernel()
    try:
        with reads_busy(Shell(k)):
            outer = k._publish_status
            with reads_busy(Shell(k)):
                pass
            assert k._publish_status is outer
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert "_publish_status" not in vars(k)


def test_outside_a_kernel_it_does_nothing():
    with reads_busy(object()):  # a terminal IPython shell has no kernel
        pass
    k = Kernel()
    k.parents["shell"] = {}  # no request being handled
    with reads_busy(Shell(k)):
        assert "_publish_status" not in vars(k)
