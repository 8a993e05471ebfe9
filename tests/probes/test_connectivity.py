"""The connectivity probe: peer name resolution and TCP reachability of MASTER_ADDR:PORT."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest

from probes.base import get_probe
from probes.connectivity import command, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, by_code, codes, context, edit, replace, sh_accepts

PROBE = get_probe("connectivity")
BASE = baseline("connectivity")
PEERS = [f"gpu{i:03d}" for i in range(1, 17)]


def run(text: str, host: str = "gpu001", **params):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context(params=params))


def test_command_is_valid_sh():
    # with no params, and with peers and a master, the script is accepted by sh -n
    assert sh_accepts(command({})).returncode == 0
    script = command({"peers": PEERS, "master_addr": "gpu001", "master_port": 29500})
    assert sh_accepts(script).returncode == 0
    assert "gpu016" in script


def test_command_drops_names_that_are_not_host_names():
    # a peer "name" carrying shell syntax never reaches the script
    script = command({"peers": ["gpu001", "x;reboot", "$(id)"], "master_addr": "gpu001"})
    assert "reboot" not in script and "$(id)" not in script
    assert sh_accepts(script).returncode == 0


@pytest.mark.skipif(not all(shutil.which(t) for t in ("bash", "timeout", "getent")),
                    reason="needs bash, timeout and getent")
def test_script_on_this_host_tells_open_from_closed_port():
    # run for real against a listening socket and a closed port on localhost
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        out = subprocess.run(
            ["sh", "-c", command({"peers": ["localhost", "no-such-host.invalid"],
                                  "master_addr": "127.0.0.1", "master_port": port})],
            capture_output=True, text=True, timeout=60).stdout
    facts = parse(out)
    assert facts["master_reachable"] is True and facts["method"] == "bash /dev/tcp"
    assert facts["unresolved_peers"] == ["no-such-host.invalid"]
    assert facts["resolved"]["localhost"]
    with socket.socket() as closed:  # bound, not listening: connection refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        out = subprocess.run(["sh", "-c", command({"master_addr": "127.0.0.1",
                                                   "master_port": port})],
                             capture_output=True, text=True, timeout=60).stdout
    assert parse(out)["master_reachable"] is False


def test_parse_baseline():
    # 16 peers resolved, master gpu001:29500 from the training processes' environment
    f = parse(BASE)
    assert f["master_addr"] == "gpu001" and f["master_port"] == 29500
    assert f["master_source"] == "environ" and f["method"] == "bash /dev/tcp"
    assert f["master_reachable"] is True
    assert f["unresolved_peers"] == []
    assert f["resolved"]["gpu007"] == "10.12.4.27" and len(f["resolved"]) == 16


def test_baseline_raises_nothing():
    # healthy host alone and in a fleet of identical hosts
    _, findings = run(BASE, peers=PEERS)
    assert findings == []
    facts = parse(BASE)
    assert PROBE.check_fleet({h: facts for h in PEERS[:4]}, context()) == []


def test_garbage_is_a_parse_error():
    # foreign text and another probe's output are refused
    with pytest.raises(ParseError):
        parse("ssh: connect to host gpu001 port 22: Connection refused\n")
    with pytest.raises(ParseError):
        parse(baseline("nccl"))


def test_peer_does_not_resolve():
    # getent exits 2 for gpu007 on this host
    text = edit(BASE, "resolve", "name gpu007 rc=0 10.12.4.27 ", "name gpu007 rc=2  ")
    f, findings = run(text)
    assert f["unresolved_peers"] == ["gpu007"]
    assert codes(findings) == ["name-resolution-failed"]
    assert by_code(findings, "name-resolution-failed")[0].evidence["names"] == ["gpu007"]


def test_lookup_timeout_counts_as_unresolved():
    # a DNS server that does not answer: timeout's 124
    text = edit(BASE, "resolve", "name gpu003 rc=0 10.12.4.23 ", "name gpu003 rc=124  ")
    _, findings = run(text)
    assert codes(findings) == ["name-resolution-failed"]


def test_master_refused():
    # the TCP connection to gpu001:29500 fails
    text = edit(BASE, "master", "tcp_rc 0",
                "_: connect: Connection refused\n"
                "_: line 1: /dev/tcp/gpu001/29500: Connection refused\ntcp_rc 1")
    f, findings = run(text)
    assert f["master_reachable"] is False
    [m] = findings
    assert m.code == "master-unreachable" and m.severity == "critical"
    assert m.evidence == {"master_addr": "gpu001", "master_port": 29500,
                          "method": "bash /dev/tcp", "rc": 1}


def test_master_silent_firewall():
    # no answer within 5 s (a dropping firewall): exit status 124 is named in the message
    text = edit(BASE, "master", "tcp_rc 0", "tcp_rc 124")
    _, findings = run(text)
    assert codes(findings) == ["master-unreachable"] and "124" in findings[0].message


def test_master_checked_with_nc():
    # no bash on the host: nc -z is used and reported as the method
    text = edit(BASE, "master", "method bash /dev/tcp", "method nc -z")
    f, findings = run(text)
    assert f["method"] == "nc -z" and findings == []


def test_no_master_known_is_not_measured():
    # no params and no training process exporting MASTER_ADDR
    text = replace(BASE, master="source none\nmaster_addr \nmaster_port \n")
    f, findings = run(text)
    assert f["master_addr"] is None and f["master_reachable"] is None
    assert codes(findings) == ["not-measured"]


def test_no_tcp_tool_is_not_measured():
    # neither bash nor nc on the host
    text = edit(BASE, "master", "method bash /dev/tcp\ntcp_rc 0", "method none\ntcp_rc ")
    _, findings = run(text)
    assert codes(findings) == ["not-measured"]


def test_missing_tools_are_not_measured():
    # no getent and no timeout: both checks say what they could not measure
    text = replace(BASE, master=None, resolve=None)
    f, findings = run(text)
    assert f["missing"] == ["timeout", "getent"]
    assert codes(findings) == ["not-measured", "not-measured"]


def test_inconsistent_resolution_names_the_odd_host():
    # gpu004's /etc/hosts maps gpu007 to a stale address
    stale = edit(BASE, "resolve", "name gpu007 rc=0 10.12.4.27 ", "name gpu007 rc=0 10.12.9.27 ")
    facts = {h: parse(BASE) for h in ("gpu001", "gpu002", "gpu003")}
    facts["gpu004"] = parse(stale)
    [f] = PROBE.check_fleet(facts, context())
    assert f.code == "name-resolution-inconsistent" and f.hosts == ("gpu004",)
    assert f.evidence["names"]["gpu007"] == {"majority": "10.12.4.27",
                                             "odd": {"gpu004": "10.12.9.27"}}


def test_inconsistent_names_grouped_per_odd_hosts():
    # two names wrong on the same host make one finding, not two
    stale = edit(BASE, "resolve", "name gpu007 rc=0 10.12.4.27 ", "name gpu007 rc=0 10.12.9.27 ")
    stale = edit(stale, "resolve", "name gpu008 rc=0 10.12.4.28 ", "name gpu008 rc=0 10.12.9.28 ")
    facts = {h: parse(BASE) for h in ("gpu001", "gpu002")}
    facts["gpu003"] = parse(stale)
    [f] = PROBE.check_fleet(facts, context())
    assert f.evidence["names_count"] == 2
