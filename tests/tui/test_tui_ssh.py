"""A walk in the TUI over real SSH: a loopback sshd fleet replaying a GPU that fell off the bus.

Skipped where sshd cannot run (not root, no openssh-server) — unless DIAG_REQUIRE_SSHD is set,
as in CI, where a skip is a failure.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from assistant.tui import messages as m
from assistant.tui.app import DiagApp
from assistant.tui.context import DiagContext, FleetOptions
from tests.tui import tui_sshfleet
from tests.tui.tui_support import Messages, status, wait_for

pytestmark = pytest.mark.ssh

HOSTS = [f"node{i:03d}" for i in range(1, 9)]
XID_HOST = "node003"


@pytest.fixture(scope="module")
def fleet() -> Iterator[tui_sshfleet.sshfleet.SSHFleet]:
    reason = tui_sshfleet.unavailable_reason()
    if reason:
        tui_sshfleet.sshfleet.skip_or_fail(reason)
    outputs = {XID_HOST: {"gpu": tui_sshfleet.XID_OUTPUT.read_text()}}
    with tui_sshfleet.replay_fleet(HOSTS, outputs, log_level="INFO") as started:
        yield started


async def test_walk_over_the_loopback_ssh_fleet(fleet: tui_sshfleet.sshfleet.SSHFleet) -> None:
    options = FleetOptions(inventory=str(fleet.inventory), timeout=5, deadline=20,
                           connect_timeout=5)
    ctx = DiagContext(options, session_id=lambda: "ssh-session")
    assert ctx.target is not None and ctx.target.transport.name == "ssh"
    app = DiagApp(ctx, still=True)
    seen = Messages()
    async with app.run_test(size=(80, 24), message_hook=seen) as pilot:
        assert "inventory" in str(app.screen.query_one("#fleet").render())
        app.post_message(m.RunbookChosen("hang", "training hangs"))
        await wait_for(pilot, lambda: seen.of(m.ConfirmationRequested),
                       what="the drain confirmation")
        request = seen.of(m.ConfirmationRequested)[0]
        assert (request.node, request.hosts) == ("drain-gpu-node", (XID_HOST,))
        await pilot.press("escape")
        await status(pilot, "concluded")
        assert seen.nodes(m.ConclusionReached) == ["gpu-hardware-fault"]
        evidence = seen.of(m.ConclusionReached)[0].event.evidence
        assert {h for f in evidence for h in f.hosts} == {XID_HOST}
        # every host answered every probe over SSH, live, exactly once per probe
        finished = seen.of(m.ProbeFinished)
        per_probe: dict[str, list[str]] = {}
        for f in finished:
            assert f.event.state == "ok", (f.event.host, f.event.reason)
            per_probe.setdefault(f.event.probe, []).append(f.event.host)
        # (the gpu step reuses what the evidence sweep read: it is finished, not asked again)
        assert {p: sorted(h) for p, h in per_probe.items()} == {"sweep": HOSTS, "ranks": HOSTS,
                                                                 "gpu": HOSTS}
        assert app.screen.driver.walk.path() == ["check-ranks", "check-gpu", "drain-gpu-node",
                                                 "gpu-hardware-fault"]
