"""The connectivity probe: peer name resolution and TCP reachability of MASTER_ADDR:PORT.

diag's own limits are never a host's fault: lookups are bounded for the fleet as a whole, a
lookup that timed out is "not measured", and a verdict against a host needs a result that
differs from what the other hosts got.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections import Counter

import pytest

from probes.base import get_probe
from probes.connectivity import LOOKUP_BUDGET, NEIGHBOURS, command, lookup_plan, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import baseline, by_code, codes, context, edit, replace, sh_accepts

PROBE = get_probe("connectivity")
BASE = baseline("connectivity")
PEERS = [f"gpu{i:03d}" for i in range(1, 17)]
HOSTS8 = PEERS[:8]
REFUSED = ("_: connect: Connection refused\n"
           "_: line 1: /dev/tcp/gpu001/29500: Connection refused\ntcp_rc 1")


def run(text: str, host: str = "gpu001", **params):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context(params=params))


def fleet(outputs: dict[str, str]):
    """Parse each host's output and run the fleet checks."""
    facts = {h: parse(t) for h, t in outputs.items()}
    return PROBE.check_fleet(facts, context())


def healthy(hosts=HOSTS8) -> dict[str, str]:
    return {h: BASE for h in hosts}


def lookup_timed_out(text: str, name: str, addr: str) -> str:
    return edit(text, "resolve", f"name {name} rc=0 tries=1 {addr} {name}",
                f"name {name} rc=124 tries=1 ")


def moved(text: str, name: str, old: str, new: str) -> str:
    """*name* resolves to *new* instead of *old* in this output."""
    return edit(text, "resolve", f"rc=0 tries=1 {old} {name}", f"rc=0 tries=1 {new} {name}")


def not_found(text: str, name: str, addr: str) -> str:
    return edit(text, "resolve", f"name {name} rc=0 tries=1 {addr} {name}",
                f"name {name} rc=2 tries=2 ")


# --- the script --------------------------------------------------------------------------------

def test_command_is_valid_sh():
    # with no params, and with peers, a host and a master, the script is accepted by sh -n
    assert sh_accepts(command({})).returncode == 0
    script = command({"peers": PEERS, "host": "gpu003", "master_addr": "gpu001",
                      "master_port": 29500})
    assert sh_accepts(script).returncode == 0
    assert "getent ahosts" in script and "getent hosts" not in script


def test_command_drops_names_that_are_not_host_names():
    # a peer "name" carrying shell syntax never reaches the script
    script = command({"peers": ["gpu001", "x;reboot", "$(id)"], "host": "gpu001",
                      "master_addr": "gpu001"})
    assert "reboot" not in script and "$(id)" not in script
    assert sh_accepts(script).returncode == 0


def test_probe_builds_one_script_per_host():
    # the names a host resolves depend on which host it is
    assert PROBE.per_host is True
    assert command({"peers": PEERS, "host": "gpu001"}) != command({"peers": PEERS,
                                                                   "host": "gpu009"})


def test_each_host_resolves_master_itself_and_its_neighbours():
    # MASTER_ADDR first, then the host, then its neighbours in the sorted list (wrapping)
    names, parallel, hosts = lookup_plan({"peers": PEERS[::-1], "host": "gpu001",
                                          "master_addr": "gpu009"})
    assert names == ["gpu009", "gpu001", "gpu002", "gpu016", "gpu003", "gpu015"]
    assert hosts == 16 and parallel == LOOKUP_BUDGET // 16
    # an address is not looked up
    assert lookup_plan({"peers": PEERS, "host": "gpu001", "master_addr": "10.0.0.1"})[0][0] \
        == "gpu001"


@pytest.mark.parametrize("size", [1, 2, 8, 64, 512, 4096])
def test_lookups_are_bounded_for_the_whole_fleet(size):
    # the old script resolved every name 16 at a time on every host: 8 hosts kept 64 lookups
    # in flight, 512 hosts 8,192 against the site's DNS, and size**2 lookups in all
    peers = [f"n{i:04d}" for i in range(size)]
    plans = [lookup_plan({"peers": peers, "host": h, "master_addr": peers[0]}) for h in peers]
    in_flight = sum(min(p, len(n)) for n, p, _ in plans)
    assert in_flight <= max(LOOKUP_BUDGET, size)  # one at a time per host beyond the budget
    total = sum(len(n) for n, _, _ in plans)
    assert total <= size * (NEIGHBOURS + 2)  # linear in the fleet's size
    # every name is looked up by itself and its neighbours: enough hosts for a majority
    asked = Counter(name for n, _, _ in plans for name in n)
    assert all(asked[p] >= min(size, NEIGHBOURS + 1) for p in peers)


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
                                  "host": "localhost", "master_addr": "127.0.0.1",
                                  "master_port": port})],
            capture_output=True, text=True, timeout=60).stdout
    facts = parse(out)
    assert facts["master_reachable"] is True and facts["method"] == "bash /dev/tcp"
    assert facts["master_result"] == "connected" and facts["tcp_tries"] == 1
    assert facts["unresolved_peers"] == ["no-such-host.invalid"]
    assert facts["retried_names"] == ["no-such-host.invalid"]  # a 2 is asked twice
    assert "127.0.0.1" in facts["resolved"]["localhost"]
    assert facts["lookups"] == {"hosts": 2, "names": 2, "parallel": LOOKUP_BUDGET // 2}
    with socket.socket() as closed:  # bound, not listening: connection refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        out = subprocess.run(["sh", "-c", command({"master_addr": "127.0.0.1",
                                                   "master_port": port})],
                             capture_output=True, text=True, timeout=60).stdout
    facts = parse(out)
    assert facts["master_reachable"] is False and facts["master_result"] == "refused"


# --- parse -------------------------------------------------------------------------------------

def test_parse_baseline():
    # gpu001 of a 16-host job: master, itself and 4 neighbours; master gpu001:29500 from the
    # training processes' environment
    f = parse(BASE)
    assert f["master_addr"] == "gpu001" and f["master_port"] == 29500
    assert f["master_source"] == "environ" and f["method"] == "bash /dev/tcp"
    assert f["master_reachable"] is True and f["master_result"] == "connected"
    assert f["unresolved_peers"] == [] and f["unmeasured_names"] == {}
    assert f["resolved"] == {"gpu001": "10.12.4.21", "gpu002": "10.12.4.22",
                             "gpu003": "10.12.4.23", "gpu015": "10.12.4.35",
                             "gpu016": "10.12.4.36"}
    assert f["lookups"] == {"hosts": 16, "names": 5, "parallel": 2}


def test_parse_getent_ahosts_words_keeps_addresses():
    # ahosts prints each address three times (STREAM, DGRAM, RAW) with the canonical name
    text = replace(BASE, resolve="name gpu007 rc=0 tries=1 10.12.4.27 STREAM gpu007 "
                   "10.12.4.27 DGRAM 10.12.4.27 RAW fd00::27 STREAM fd00::27 DGRAM\n")
    assert parse(text)["resolved"] == {"gpu007": "10.12.4.27,fd00::27"}


def test_parse_older_output_without_tries():
    # outputs recorded before the lookup plan (addresses only, no tries) still read
    text = replace(BASE, resolve="name gpu007 rc=0 10.12.4.27 \nname gpu008 rc=2  \n")
    f = parse(text)
    assert f["resolved"] == {"gpu007": "10.12.4.27", "gpu008": None}
    assert f["lookups"] is None and f["retried_names"] == []


def test_baseline_raises_nothing():
    # healthy host alone and in a fleet of identical hosts
    _, findings = run(BASE, peers=PEERS)
    assert findings == []
    assert fleet(healthy(PEERS[:4])) == []


def test_garbage_is_a_parse_error():
    # foreign text and another probe's output are refused
    with pytest.raises(ParseError):
        parse("ssh: connect to host gpu001 port 22: Connection refused\n")
    with pytest.raises(ParseError):
        parse(baseline("nccl"))


# --- names -------------------------------------------------------------------------------------

def test_lookup_timeout_is_not_measured_not_unresolved():
    # getent killed by timeout (124): slow, not measured. Before, this was "gpu003 does not
    # resolve" and the runbook concluded "peer names resolve differently" on a healthy host.
    text = lookup_timed_out(BASE, "gpu003", "10.12.4.23")
    f, findings = run(text)
    assert f["unresolved_peers"] == [] and "gpu003" not in f["resolved"]
    assert f["unmeasured_names"] == {"gpu003": "no answer within 3 s (timeout)"}
    assert findings == []
    outputs = healthy()
    outputs["gpu004"] = text
    [slow] = fleet(outputs)
    assert slow.code == "name-resolution-slow" and slow.hosts == ("gpu004",)
    assert "not evidence that a name does not resolve" in slow.message


@pytest.mark.parametrize("rc", [1, 125, 126, 137])
def test_other_getent_failures_are_not_measured(rc):
    # only exit status 2 means "not found" (getent(1)); anything else is not an answer
    text = edit(BASE, "resolve", "name gpu003 rc=0 tries=1 10.12.4.23 gpu003",
                f"name gpu003 rc={rc} tries=1 ")
    f = parse(text)
    assert "gpu003" in f["unmeasured_names"] and f["unresolved_peers"] == []
    assert codes(fleet({**healthy(), "gpu004": text})) == ["name-resolution-slow"]


def test_fleet_wide_dns_outage_blames_no_host():
    # every lookup on every host timed out: the name service, not any host (before: each
    # host got name-resolution-failed for every name)
    dead = replace(BASE, resolve="lookups hosts=8 names=5 parallel=4 timeout=3\n" + "".join(
        f"name {n} rc=124 tries=1 \n" for n in ("gpu001", "gpu002", "gpu008", "gpu003",
                                                 "gpu007")))
    [slow] = fleet({h: dead for h in HOSTS8})
    assert slow.code == "name-resolution-slow" and slow.severity != "critical"
    assert "no host got any answer" in slow.message
    assert not by_code(fleet({h: dead for h in HOSTS8}), "name-resolution-failed")


def test_peer_does_not_resolve_on_one_host():
    # getent exits 2 (twice) for gpu003 on gpu004 while the other hosts resolve it
    outputs = healthy()
    outputs["gpu004"] = not_found(BASE, "gpu003", "10.12.4.23")
    assert parse(outputs["gpu004"])["unresolved_peers"] == ["gpu003"]
    [f] = fleet(outputs)
    assert f.code == "name-resolution-failed" and f.hosts == ("gpu004",)
    assert f.evidence["names"] == ["gpu003"]
    assert f.evidence["resolved_elsewhere"] == {"gpu003": "resolves on 7 of 8"}


def test_name_no_host_resolves_is_the_jobs_configuration():
    # a misspelt MASTER_ADDR: no host resolves it, so no host is named
    typo = "gpu0001"
    text = edit(BASE, "resolve", "name gpu001 rc=0", f"name {typo} rc=2 tries=2 \nname gpu001 rc=0")
    [f] = fleet({h: text for h in HOSTS8})
    assert f.code == "name-resolution-failed" and f.hosts == ()
    assert f.evidence["scope"] == "job" and f.evidence["names"] == [typo]
    assert "not any host's" in f.message
    # alone, a host cannot be told apart from the fleet either
    assert fleet({"gpu001": text})[0].hosts == ()


def test_split_without_majority_names_no_host():
    # 2 hosts resolve gpu003, 2 do not: no norm to fall short of
    missing = not_found(BASE, "gpu003", "10.12.4.23")
    [f] = fleet({"gpu001": BASE, "gpu002": BASE, "gpu003": missing, "gpu004": missing})
    assert f.code == "name-resolution-failed" and f.hosts == ()
    assert f.evidence["does_not"] == ["gpu003", "gpu004"]


def test_a_timeout_elsewhere_does_not_make_a_majority():
    # gpu003 timed out on 5 hosts, resolved on 2 and not found on 1: 2 of 3 answers resolve
    slow = lookup_timed_out(BASE, "gpu003", "10.12.4.23")
    outputs = {h: slow for h in HOSTS8[:5]}
    outputs |= {"gpu006": BASE, "gpu007": BASE, "gpu008": not_found(BASE, "gpu003",
                                                                     "10.12.4.23")}
    found = fleet(outputs)
    assert codes(found) == ["name-resolution-failed", "name-resolution-slow"]
    assert by_code(found, "name-resolution-failed")[0].hosts == ("gpu008",)


def test_inconsistent_resolution_names_the_odd_host():
    # gpu004's /etc/hosts maps gpu003 to a stale address
    stale = moved(BASE, "gpu003", "10.12.4.23", "10.12.9.23")
    outputs = {h: BASE for h in ("gpu001", "gpu002", "gpu003")}
    outputs["gpu004"] = stale
    [f] = fleet(outputs)
    assert f.code == "name-resolution-inconsistent" and f.hosts == ("gpu004",)
    assert f.evidence["names"]["gpu003"] == {"majority": "10.12.4.23",
                                             "odd": {"gpu004": "10.12.9.23"}}


def test_inconsistent_names_grouped_per_odd_hosts():
    # two names wrong on the same host make one finding, not two
    stale = moved(BASE, "gpu003", "10.12.4.23", "10.12.9.23")
    stale = moved(stale, "gpu002", "10.12.4.22", "10.12.9.22")
    [f] = fleet({"gpu001": BASE, "gpu002": BASE, "gpu003": stale})
    assert f.evidence["names_count"] == 2


def test_inconsistent_needs_a_real_address_not_a_timeout():
    # a host whose lookup timed out has no address to differ with
    outputs = healthy()
    outputs["gpu004"] = lookup_timed_out(BASE, "gpu003", "10.12.4.23")
    assert not by_code(fleet(outputs), "name-resolution-inconsistent")


def test_inconsistent_without_majority_names_no_host():
    # one host each way: which one is stale cannot be told
    stale = moved(BASE, "gpu003", "10.12.4.23", "10.12.9.23")
    [f] = fleet({"gpu001": BASE, "gpu002": stale})
    assert f.code == "name-resolution-inconsistent" and f.hosts == ()


def test_loopback_self_mapping_is_inconsistent_on_that_host():
    # gpu003 maps its own name to 127.0.1.1 (Debian's installer line) while its neighbours
    # see its data address: the store of a rank there listens on loopback
    own = moved(BASE, "gpu003", "10.12.4.23", "127.0.1.1")
    [f] = fleet({"gpu001": BASE, "gpu002": BASE, "gpu004": BASE, "gpu003": own})
    assert f.code == "name-resolution-inconsistent" and f.hosts == ("gpu003",)


# --- master ------------------------------------------------------------------------------------

def test_master_refused_on_one_host():
    # gpu004 is refused while the other hosts connect: gpu004's path (its firewall, a route)
    outputs = healthy()
    outputs["gpu004"] = edit(BASE, "master", "tcp_rc 0", REFUSED)
    f = parse(outputs["gpu004"])
    assert f["master_reachable"] is False and f["master_result"] == "refused"
    assert run(outputs["gpu004"])[1] == []  # no verdict from one host alone
    [m] = fleet(outputs)
    assert m.code == "master-unreachable" and m.severity == "critical"
    assert m.hosts == ("gpu004",)
    assert m.evidence["results"] == {"gpu004": "refused"} and m.evidence["connected"] == 7
    assert m.evidence["master_addr"] == "gpu001" and m.evidence["rc"] == {"gpu004": 1}


def test_master_silent_on_one_host_is_still_its_path():
    # no answer within 5 s, twice, from gpu004 while the others connect
    outputs = healthy()
    outputs["gpu004"] = edit(BASE, "master", "tcp_rc 0",
                             "tcp_rc 124\nmethod bash /dev/tcp\ntcp_rc 124")
    assert parse(outputs["gpu004"])["tcp_tries"] == 2
    [m] = fleet(outputs)
    assert m.hosts == ("gpu004",) and "124" in m.message


def test_master_answers_on_second_try():
    # one slow moment: the first connection timed out, the second connected
    text = edit(BASE, "master", "tcp_rc 0", "tcp_rc 124\nmethod bash /dev/tcp\ntcp_rc 0")
    f = parse(text)
    assert f["master_reachable"] is True and f["tcp_tries"] == 2
    assert fleet({**healthy(), "gpu004": text}) == []


def test_master_silent_everywhere_names_no_host():
    # every host timed out: nothing listening yet, or a firewall in front of the master
    silent = edit(BASE, "master", "tcp_rc 0", "tcp_rc 124\nmethod bash /dev/tcp\ntcp_rc 124")
    [m] = fleet({h: silent for h in HOSTS8})
    assert m.code == "master-unreachable" and m.hosts == ()
    assert "firewall" in m.message and m.evidence["scope"] == "job"


def test_master_refused_everywhere_names_no_host():
    # nothing listens on MASTER_PORT: rank 0 has not started its store
    refused = edit(BASE, "master", "tcp_rc 0", REFUSED)
    [m] = fleet({h: refused for h in HOSTS8})
    assert m.hosts == () and "nothing listens" in m.message


def test_master_reached_by_a_minority_names_no_host():
    # 2 of 8 connect: the master's side, not 6 hosts' paths
    refused = edit(BASE, "master", "tcp_rc 0", REFUSED)
    outputs = {h: refused for h in HOSTS8[2:]} | {h: BASE for h in HOSTS8[:2]}
    [m] = fleet(outputs)
    assert m.hosts == () and "2 of 8" in m.message


def test_master_checked_with_nc():
    # no bash on the host: nc -v -z is used; its error text says refused
    text = edit(BASE, "master", "method bash /dev/tcp\ntcp_rc 0",
                "nc: connect to gpu001 port 29500 (tcp) failed: Connection refused\n"
                "method nc -z\ntcp_rc 1")
    f, findings = run(text)
    assert f["method"] == "nc -z" and f["master_result"] == "refused" and findings == []
    ok = edit(BASE, "master", "method bash /dev/tcp", "method nc -z")
    assert parse(ok)["master_reachable"] is True


def test_master_name_not_resolving_is_not_a_tcp_verdict():
    # bash could not resolve MASTER_ADDR: no connection was tried, the lookups decide
    text = edit(BASE, "master", "tcp_rc 0",
                "_: line 1: gpu001: Name or service not known\n"
                "_: line 1: /dev/tcp/gpu001/29500: Invalid argument\ntcp_rc 1")
    f, findings = run(text)
    assert f["master_result"] == "name-unresolved" and f["master_reachable"] is None
    assert codes(findings) == ["not-measured"]
    assert fleet({h: text for h in HOSTS8}) == []


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
