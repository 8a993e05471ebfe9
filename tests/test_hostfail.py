"""Hosts that could not be probed: diag's own trouble, a host that did not let diag in, and a
host that let diag in and then hung are three different verdicts (assistant/runbook/hostfail)."""

from __future__ import annotations

import pytest

from assistant.runbook.hostfail import add_host_failure_findings, failure_family, fleet_unreachable
from probes.base import default_thresholds, running_section
from probes.model import HostResult, ProbeOutcome

DNS = "DNS lookup failed: Name or service not known"


def outcome(probe: str = "gpu", /, **hosts: HostResult) -> ProbeOutcome:
    return ProbeOutcome(probe, hosts=dict(hosts))


def fleet_of(hosts: dict[str, HostResult]) -> ProbeOutcome:
    return ProbeOutcome("gpu", hosts=hosts)


def ok(host: str) -> HostResult:
    return HostResult(host, "ok")


def down(host: str, reason: str, state: str = "unreachable", phase: str = "connect"
         ) -> HostResult:
    return HostResult(host, state, reason=reason, phase=phase)


def hung(host: str, section: str) -> HostResult:
    return HostResult(host, "timeout", reason="command did not finish in 30s", phase="command",
                      section=section)


def codes(o: ProbeOutcome, fleet_size: int = 0) -> dict[str, tuple[str, ...]]:
    add_host_failure_findings(o, default_thresholds(), fleet_size)
    return {f.code: f.hosts for f in o.findings}


@pytest.mark.parametrize(("result", "family"), [
    (down("a", DNS), "name"),
    (down("a", "ssh: Could not resolve hostname a: Name or service not known"), "name"),
    (down("a", "connection refused"), "refused"),
    (down("a", "no route to host"), "network"),
    (down("a", "ssh: connect to host gpu011 port 22: No route to host"), "network"),
    (down("a", "connect timeout after 5s"), "network"),
    (down("a", "no SSH banner in 5s (TCP accepted, server silent)", "timeout"), "ssh"),
    (down("a", "via jump host bastion: connection refused"), "jump"),
    (down("a", "authentication failed", "auth-failed"), "login"),
    (down("a", "host key changed", "host-key-refused"), "host-key"),
    (down("a", "deadline", "timeout", ""), "deadline"),
    (down("a", "connection lost during the command", phase="command"), "lost"),
    (hung("a", "query"), None),
    (HostResult("a", "parse-error", reason="garbled"), None),
    (HostResult("a", "cancelled", reason="cancelled"), None),
])
def test_failure_families(result: HostResult, family: str | None) -> None:
    assert failure_family(result) == family


def test_every_host_failing_dns_is_diag_not_the_fleet() -> None:
    o = outcome(a=down("a", DNS), b=down("b", DNS))
    found = codes(o)
    assert found == {"fleet-unreachable": ("a", "b")}  # nobody is host-unreachable
    finding = o.findings[0]
    assert finding.evidence["family"] == "name"
    assert finding.evidence["reasons"] == {"a": f"unreachable: {DNS}", "b": f"unreachable: {DNS}"}
    assert DNS in finding.message and "the host names" in finding.message


def test_most_hosts_refused_is_the_fleet_verdict_and_the_rest_stay_per_host() -> None:
    hosts = {f"n{i}": down(f"n{i}", "connection refused") for i in range(9)}
    hosts["n9"] = down("n9", "no route to host")
    found = codes(fleet_of(hosts))
    assert found["fleet-unreachable"] == tuple(f"n{i}" for i in range(9))
    assert found["host-unreachable"] == ("n9",)


def test_a_minority_refused_is_a_per_host_verdict() -> None:
    hosts = {f"n{i}": ok(f"n{i}") for i in range(12)}
    hosts.update({f"d{i}": down(f"d{i}", "no route to host") for i in range(4)})
    assert codes(fleet_of(hosts)) == {"host-unreachable": ("d0", "d1", "d2", "d3")}


def test_one_host_down_of_one_is_a_host_but_one_unresolvable_name_is_diag() -> None:
    assert codes(outcome(a=down("a", "connection refused"))) == {"host-unreachable": ("a",)}
    assert codes(outcome(a=down("a", DNS))) == {"fleet-unreachable": ("a",)}


def test_a_name_that_does_not_resolve_among_answering_peers_is_access_not_a_dead_node() -> None:
    hosts = {f"n{i}": ok(f"n{i}") for i in range(7)}
    hosts["typo"] = down("typo", DNS)
    assert codes(fleet_of(hosts)) == {"host-access-failed": ("typo",)}


def test_hosts_the_steps_deadline_ended_are_not_measured_never_unreachable() -> None:
    # 512 hosts on a loaded client: the step's deadline came before diag reached the last
    # hundred. diag's own limit, not the hosts': "not measured", nobody accused.
    hosts = {f"n{i:03d}": ok(f"n{i:03d}") for i in range(400)}
    hosts.update({f"late{i:03d}": HostResult(f"late{i:03d}", "timeout", reason="deadline")
                  for i in range(112)})
    found = fleet_of(hosts)
    assert codes(found) == {"not-measured": tuple(f"late{i:03d}" for i in range(112))}
    assert "deadline" in found.findings[0].message and "not the hosts'" in \
        found.findings[0].message


def test_logins_that_ran_out_while_diag_was_behind_are_not_measured_never_unreachable() -> None:
    # A client busy with its own work left the hosts' banners unread (assistant/fleet/
    # lagclock.py): diag's limit, not the hosts', even when it is most of the fleet.
    behind = ("no SSH banner in 10s (TCP accepted, server silent); diag's client was behind "
              "by 21.4s of 30.0s (busy or starved of CPU): diag's own, not the host's, twice "
              "(a second try confirmed it)")
    hosts = {f"n{i:02d}": ok(f"n{i:02d}") for i in range(4)}
    hosts.update({f"s{i:02d}": down(f"s{i:02d}", behind, "timeout") for i in range(12)})
    hosts["dead"] = down("dead", "no SSH banner in 10s (TCP accepted, server silent), twice "
                         "(a second try confirmed it)", "timeout")
    found = fleet_of(hosts)
    assert failure_family(hosts["s00"]) == "client"
    assert codes(found) == {"not-measured": tuple(f"s{i:02d}" for i in range(12)),
                            "host-unreachable": ("dead",)}
    assert fleet_unreachable(hosts, 0.5) is None


def test_a_step_on_two_suspects_does_not_speak_for_the_fleet() -> None:
    # Two drained nodes of a 16-host walk, both powered off: they are down, diag is fine.
    o = outcome(a=down("a", "no route to host"), b=down("b", "no route to host"))
    assert codes(o, fleet_size=16) == {"host-unreachable": ("a", "b")}
    assert fleet_unreachable(o.hosts, 0.8, 2) == ("network", ["a", "b"])


def test_hung_after_login_is_evidence_about_the_host_by_section() -> None:
    o = outcome("gpu", a=ok("a"), b=hung("b", "query"), c=hung("c", "clock"))
    found = codes(o)
    assert found == {"gpu-driver-hung": ("b",), "probe-hung": ("c",)}
    message = next(f.message for f in o.findings if f.code == "gpu-driver-hung")
    assert "nvidia-smi (section 'query') on b" in message


def judged(host: str, section: str, verdict: str) -> HostResult:
    """A hung command as probes/hangstate.py read it."""
    result = hung(host, section)
    result.facts = {"hang_verdict": verdict}
    return result


def test_a_command_only_slow_or_started_late_is_not_measured_never_a_hang() -> None:
    o = outcome("gpu", a=judged("a", "query", "starved"), b=judged("b", "query", "late"),
                c=judged("c", "query", "blocked"), d=judged("d", "query", "unknown"))
    assert codes(o) == {"not-measured": ("a", "b"), "gpu-driver-hung": ("c", "d")}
    message = next(f.message for f in o.findings if f.code == "not-measured")
    assert "none of its processes stayed blocked in the kernel" in message


def test_a_load_test_that_did_not_finish_fails_its_level_whatever_the_reason() -> None:
    # acceptance stops a node on an unfinished active test; "slow, not stuck" never resumes it
    o = outcome("gpu-burn", a=judged("a", "burn", "starved"), b=judged("b", "burn", "late"))
    assert codes(o) == {"active-test-ended": ("a", "b")}


def test_storage_hangs_are_the_filesystem_and_never_the_fleet_verdict() -> None:
    o = outcome("storage", **{h: hung(h, "df") for h in ("a", "b", "c")})
    assert codes(o) == {"filesystem-hung": ("a", "b", "c")}


def test_running_section_names_the_section_that_never_closed() -> None:
    text = ("=== diag:section clock\n1 2\n=== diag:rc clock 0\n"
            "=== diag:section query\nindex, name\n")
    assert running_section(text) == "query"
    assert running_section(text + "=== diag:rc query 0\n") is None
    assert running_section("=== diag:missing ioping\n=== diag:section df\n") == "df"
    assert running_section("") is None


def test_the_provider_names_the_hung_section_from_the_partial_output() -> None:
    from assistant.fleet.replay import ReplayTransport
    from assistant.fleet.scenario import load_scenario
    from assistant.runbook.provider import FleetProvider

    provider = FleetProvider(ReplayTransport(load_scenario("hang-gpu-driver-hung")))
    gpu = provider.run_probe("gpu", ["gpu006", "gpu007"], {}, lambda event: None)
    hung = gpu.hosts["gpu007"]
    assert (hung.state, hung.phase, hung.section) == ("timeout", "command", "query")
    assert hung.reason == ("logged in, then the gpu probe hung in nvidia-smi (section 'query'): "
                           "command did not finish in 75s")
    assert gpu.hosts["gpu006"].state == "ok"
    # The scenario's hang is the gpu probe's: the log reader on the same host answers.
    assert provider.run_probe("ranks", ["gpu007"], {}, lambda e: None).hosts["gpu007"].state \
        == "ok"
