"""The nccl probe: allow-listed env of the training processes, interfaces, HCAs, NCCL log."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from probes.base import get_probe
from probes.nccl import (
    ALLOWED_ENV,
    ALLOWED_ENV_ERE,
    command,
    glob_word,
    parse,
    setting_findings,
)
from probes.nccl_env import (
    hca_problems,
    ifname_selection,
    list_misreadings,
    nccl_list,
    selects,
    value_misreadings,
)
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    edit,
    output,
    real,
    replace,
    sections_of,
    sh_accepts,
)

PROBE = get_probe("nccl")
BASE = baseline("nccl")


def run(text: str, host: str = "gpu001", **params):
    """Parse one host's output and run the per-host checks (with the device settings, judged
    in check_fleet: setting_findings)."""
    facts = parse(text)
    return facts, PROBE.check(host, facts, context(params=params)) + setting_findings(host, facts)


def fleet(outputs: dict[str, str], **params):
    ctx = context(params=params)
    return PROBE.check_fleet({h: parse(t) for h, t in outputs.items()}, ctx)


def without_log(text: str) -> str:
    specs = sections_of(text)
    specs.pop("log")
    specs.pop("logfiles")
    return output(specs)


# --- the script ------------------------------------------------------------------------------

def test_command_is_valid_sh():
    # the script with and without a log glob is accepted by sh -n
    assert sh_accepts(command({})).returncode == 0
    assert sh_accepts(command({"log": "/shared/jobs/*/logs/train-[0-9]*.log"})).returncode == 0


def test_command_quotes_hostile_params():
    # a pattern or log path from outside cannot inject shell syntax
    script = command({"process_pattern": "x'; reboot; '", "log": "/tmp/$(reboot)/`id`;*.log"})
    assert sh_accepts(script).returncode == 0
    assert "'x'\"'\"'; reboot; '\"'\"''" in script
    assert glob_word("/tmp/$(reboot)/*.log") == "'/tmp/$(reboot)/'*.log"


def test_glob_word_expands_only_glob_characters(tmp_path):
    # *, ? and [..] stay live, everything else is literal (a file named with $(..) included)
    for name in ("train-1.log", "train-2.log", "eval.log", "x$(id).log"):
        (tmp_path / name).write_text("")
    def expand(pattern: str) -> list[str]:
        word = glob_word(str(tmp_path) + "/" + pattern)
        out = subprocess.run(["sh", "-c", f'for f in {word}; do echo "${{f##*/}}"; done'],
                             capture_output=True, text=True, timeout=10).stdout
        return sorted(out.split())
    assert expand("train-*.log") == ["train-1.log", "train-2.log"]
    assert expand("train-[2].log") == ["train-2.log"]
    assert expand("x$(id).log") == ["x$(id).log"]
    assert expand("?val.log") == ["eval.log"]


def test_allow_list_is_the_same_on_host_and_in_parse():
    # the grep -E on the host and the regex parse() applies are one allow-list
    assert ALLOWED_ENV.pattern == ALLOWED_ENV_ERE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_script_on_this_host_keeps_only_allow_listed_variables(tmp_path):
    # run for real: a fake training process's secret variables never reach the output
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NCCL_DEBUG": "INFO",
           "NCCL_SOCKET_IFNAME": "eth0", "SECRET_TOKEN": "hunter2", "AWS_SECRET_ACCESS_KEY": "k",
           "MASTER_PORT": "29500"}
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time, sys; time.sleep(30)  # diagtestmarker_train"],
                            env=env)
    try:
        time.sleep(0.3)
        out = subprocess.run(["sh", "-c", command({"process_pattern": "diagtestmarker_train"})],
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        proc.kill()
        proc.wait()
    assert "hunter2" not in out and "SECRET" not in out
    facts = parse(out)
    assert facts["processes"] >= 1
    assert f"--- pid {proc.pid} " in out
    assert "NCCL_SOCKET_IFNAME=eth0" in out


# --- parse -----------------------------------------------------------------------------------

def test_parse_baseline():
    # the healthy node: 9 processes, env merged, 8 active HCAs, IB chosen by NCCL 2.21.5
    f = parse(BASE)
    assert f["processes"] == 9 and f["processes_unreadable"] == 0
    assert f["commands"] == ["python3", "torchrun"]
    assert f["socket_ifname"] == "eno1"
    assert f["ib_hca"] == ",".join(f"mlx5_{i}" for i in range(8))
    assert f["env"]["NCCL_DEBUG"] == "INFO" and f["env"]["WORLD_SIZE"] == "16"
    assert f["env_varying"] == ["LOCAL_RANK", "RANK"]
    assert f["nccl_version"] == "2.21.5" and f["networks"] == ["IB"]
    assert f["watchdog_timeouts"] == 0 and f["debug_enabled"] is True
    assert [h["name"] for h in f["hcas"]] == [f"mlx5_{i}" for i in range(8)]
    assert all(h["state"] == "ACTIVE" for h in f["hcas"])
    up = {i["name"] for i in f["interfaces"] if i["up"]}
    assert "eno1" in up and "docker0" not in up and "eno2" not in up and "lo" in up
    assert f["log_files"] == ["/shared/jobs/llama3-70b/logs/train-4471.log"]


def test_parse_drops_variables_outside_the_allow_list():
    # a replayed/edited output with a foreign variable: parse keeps only the allow-list
    text = edit(BASE, "procs", "NCCL_DEBUG=INFO\n", "NCCL_DEBUG=INFO\nHF_TOKEN=hf_abc\n")
    assert "HF_TOKEN" not in parse(text)["env"]


def test_baseline_raises_nothing():
    # healthy node alone and as part of a fleet of identical nodes: no finding at all
    _, findings = run(BASE)
    assert findings == []
    assert fleet({"gpu001": BASE, "gpu002": BASE, "gpu003": BASE}) == []


def test_garbage_is_a_parse_error():
    # foreign text, and another probe's output, are refused
    with pytest.raises(ParseError):
        parse("Segmentation fault (core dumped)\n")
    with pytest.raises(ParseError):
        parse(baseline("host"))


# --- per-host findings -----------------------------------------------------------------------

def test_socket_transport_with_hcas_present():
    # the real "NET/Socket : Using lo" log on a node that has 8 HCAs
    text = replace(BASE, log=real("nccl-debug__init-socket-loopback-no-ib-nccl2.5-mpirun-prefix-"
                                  "excerpt"))
    f, findings = run(text)
    assert f["networks"] == ["Socket"]
    assert codes(findings) == ["nccl-socket-transport"]


def test_socket_transport_not_raised_without_hcas():
    # no /sys/class/infiniband: Socket is the only choice, not a misconfiguration
    text = replace(BASE, hcas="no /sys/class/infiniband\n",
                   log=real("nccl-debug__init-socket-loopback-no-ib-nccl2.5-mpirun-prefix-"
                            "excerpt"))
    _, findings = run(text)
    assert "nccl-socket-transport" not in codes(findings)
    assert "nccl-hca-mismatch" in codes(findings)  # NCCL_IB_HCA still names absent HCAs


def test_ifname_names_missing_interface():
    # NCCL_SOCKET_IFNAME=eth0 on a host whose interfaces are eno1/ib*
    text = edit(BASE, "procs", "NCCL_SOCKET_IFNAME=eno1", "NCCL_SOCKET_IFNAME=eth0", count=-1)
    _, findings = run(text)
    assert codes(findings) == ["nccl-ifname-mismatch"]
    assert "eno1" in by_code(findings, "nccl-ifname-mismatch")[0].evidence["interfaces_up"]


def test_an_ifname_no_host_has_is_the_jobs_setting_not_every_hosts_fault():
    # NCCL_SOCKET_IFNAME=eth0 in the job's environment, on hosts whose interfaces are eno1/ib*:
    # every host fails the same way; one finding of the job, no host accused
    bad = edit(BASE, "procs", "NCCL_SOCKET_IFNAME=eno1", "NCCL_SOCKET_IFNAME=eth0", count=-1)
    found = [f for f in fleet({f"gpu00{n}": bad for n in range(1, 5)})
             if f.code == "nccl-ifname-mismatch"]
    assert len(found) == 1 and found[0].hosts == ()
    assert found[0].evidence["job_wide"] and found[0].evidence["socket_ifname"] == "eth0"
    assert found[0].evidence["hosts_raised"] == 4
    # one host of four with it is that host's own (its interfaces are named differently)
    found = [f for f in fleet({"gpu001": bad, **{f"gpu00{n}": BASE for n in range(2, 5)}})
             if f.code == "nccl-ifname-mismatch"]
    assert [f.hosts for f in found] == [("gpu001",)]


def test_an_hca_no_host_has_is_the_jobs_setting():
    bad = edit(BASE, "procs", "mlx5_6,mlx5_7", "mlx5_6,mlx5_7,mlx5_8", count=-1)
    found = [f for f in fleet({f"gpu00{n}": bad for n in range(1, 4)})
             if f.code == "nccl-hca-mismatch"]
    assert [f.hosts for f in found] == [()]


def test_ifname_interface_down():
    # the named interface lost its carrier
    text = edit(BASE, "links", "eno1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP",
                "eno1: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc mq state DOWN")
    _, findings = run(text)
    assert codes(findings) == ["nccl-ifname-mismatch"]


@pytest.mark.parametrize("spec, selected", [
    ("eno1", True),              # exact name
    ("eno", True),               # a prefix, NCCL's default matching
    ("=eno", False),             # '=' asks for the exact name eno
    ("=eno1", True),
    ("^docker,lo", True),        # exclusion leaves eno1 and ib*
    ("^eno,ib,docker", False),   # exclusion leaves only loopback
    ("eth0,ib", True),           # a list: one entry matching is enough
    ("docker0", False),          # exists but down
    ("eno2", False),             # exists, no carrier, no address
])
def test_ifname_nccl_syntax(spec, selected):
    # NCCL_SOCKET_IFNAME prefix/^/= semantics against the baseline interfaces
    interfaces = parse(BASE)["interfaces"]
    assert bool(ifname_selection(spec, interfaces)) is selected


def test_ifname_without_ip_tool_is_not_measured():
    # ip missing: the interface check cannot run, and says so
    text = replace(BASE, links=None, addrs=None)
    f, findings = run(text)
    assert f["interfaces"] is None and f["missing"] == ["links", "addrs"]
    assert codes(findings) == ["not-measured"]


def test_hca_port_down():
    # mlx5_3's port went Down: the NCCL_IB_HCA entry mlx5_3 has no usable port
    text = edit(BASE, "hcas", "mlx5_3 1 4: ACTIVE", "mlx5_3 1 1: DOWN")
    _, findings = run(text)
    assert codes(findings) == ["nccl-hca-mismatch"]
    assert by_code(findings, "nccl-hca-mismatch")[0].evidence["problems"] == [
        "mlx5_3: port mlx5_3:1 DOWN"]


def test_hca_names_absent_device():
    # NCCL_IB_HCA lists mlx5_8, which this node does not have
    text = edit(BASE, "procs", "mlx5_6,mlx5_7", "mlx5_6,mlx5_7,mlx5_8", count=-1)
    _, findings = run(text)
    assert codes(findings) == ["nccl-hca-mismatch"]


@pytest.mark.parametrize("spec, problems", [
    ("mlx5", 0),                 # prefix matching every HCA
    ("mlx5_1", 0),               # prefix: also would match mlx5_10.. if present
    ("=mlx5_0:1,=mlx5_1:1", 1),  # '=' only at the start; "=mlx5_1" as a name is absent
    ("=mlx5_0:1,mlx5_1:1", 0),   # exact names with ports
    ("mlx5_0:2", 1),             # port 2 does not exist
    ("^mlx5", 1),                # excludes everything
    ("^mlx5_0,mlx5_1", 0),       # excludes two, six remain active
])
def test_hca_nccl_syntax(spec, problems):
    # NCCL_IB_HCA prefix/^/=/:port semantics against the baseline HCAs
    assert len(hca_problems(spec, parse(BASE)["hcas"])) == problems


def test_hca_prefix_with_a_down_sibling_is_fine():
    # prefix mlx5 while one port is down: NCCL uses the active ones
    text = edit(BASE, "procs", "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,"
                "mlx5_7", "NCCL_IB_HCA=mlx5", count=-1)
    text = edit(text, "hcas", "mlx5_3 1 4: ACTIVE", "mlx5_3 1 1: DOWN")
    _, findings = run(text)
    assert findings == []


def test_ib_disabled_with_hcas():
    # a leftover NCCL_IB_DISABLE=1 on a node with active HCAs
    text = edit(BASE, "procs", "NCCL_IB_GID_INDEX=0\n", "NCCL_IB_GID_INDEX=0\nNCCL_IB_DISABLE=1\n",
                count=-1)
    _, findings = run(text)
    assert codes(findings) == ["nccl-ib-disabled"]


def test_watchdog_timeouts_in_log():
    # the real old-torch watchdog excerpt: 5 timeouts, ALLREDUCE SeqNum 469508
    text = replace(BASE, log=real("nccl-debug__watchdog-timeout-old-torch-8xv100-excerpt"))
    f, findings = run(text)
    assert f["watchdog_timeouts"] == 5
    [w] = by_code(findings, "nccl-watchdog-timeout")
    assert w.evidence["count"] == 5 and w.evidence["timeouts"][0]["seq"] == 469508


def test_no_training_process_is_not_measured():
    # nothing matches the pattern: not a silent pass
    text = replace(BASE, procs="")
    f, findings = run(without_log(text))
    assert f["processes"] == 0 and f["debug_enabled"] is None
    assert codes(findings) == ["not-measured"]


def test_unreadable_environ_is_not_measured():
    # processes of another user: environ unreadable
    text = replace(BASE, procs="--- pid 48230 comm python3\n--- unreadable\n")
    f, findings = run(text)
    assert f["processes_unreadable"] == 1
    assert codes(findings) == ["not-measured"]


def test_log_glob_matches_nothing():
    # a log param whose glob matches no file on the host
    text = replace(BASE, logfiles="", log="")
    _, findings = run(text, log="/shared/jobs/x/*.log")
    assert codes(findings) == ["not-measured"]


# --- fleet findings --------------------------------------------------------------------------

def test_env_drift_names_the_odd_host():
    # one host launched with NCCL_IB_GID_INDEX=3 while the others use 0
    odd = edit(BASE, "procs", "NCCL_IB_GID_INDEX=0", "NCCL_IB_GID_INDEX=3", count=-1)
    findings = fleet({"gpu001": BASE, "gpu002": BASE, "gpu003": odd})
    [drift] = findings
    assert drift.code == "nccl-env-drift" and drift.hosts == ("gpu003",)
    assert drift.evidence["key"] == "NCCL_IB_GID_INDEX" and drift.evidence["majority"] == "0"


def test_env_drift_unset_on_one_host():
    # a variable set on two hosts and missing on the third is drift too
    odd = edit(BASE, "procs", "NCCL_NVLS_ENABLE=1\n", "", count=-1)
    findings = fleet({"gpu001": BASE, "gpu002": BASE, "gpu003": odd})
    assert [(f.code, f.hosts, f.evidence["odd"]) for f in findings] == [
        ("nccl-env-drift", ("gpu003",), {"gpu003": "<unset>"})]


def test_per_rank_values_are_not_drift():
    # RANK/LOCAL_RANK differ by design, and a NCCL_ value varying between ranks is ignored
    other = edit(BASE, "procs", "RANK=0\n", "RANK=8\n")
    varying = edit(BASE, "procs", "NCCL_IB_GID_INDEX=0", "NCCL_IB_GID_INDEX=3", count=2)
    assert fleet({"gpu001": BASE, "gpu002": other, "gpu003": varying}) == []


def test_debug_off_is_one_info_for_the_fleet():
    # NCCL_DEBUG unset on every host (and no NCCL INFO in the log): one info finding
    quiet = without_log(edit(BASE, "procs", "NCCL_DEBUG=INFO\n", "", count=-1))
    findings = fleet({"gpu001": quiet, "gpu002": quiet})
    assert [(f.code, f.severity, f.hosts) for f in findings] == [
        ("nccl-debug-off", "info", ("gpu001", "gpu002"))]


def test_debug_warn_counts_as_off():
    # NCCL_DEBUG=WARN does not print the transport chosen
    quiet = without_log(edit(BASE, "procs", "NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN", count=-1))
    assert parse(quiet)["debug_enabled"] is False


# --- NCCL's exact semantics (probes/nccl_env.py, nccl_env.yaml) ----------------------------

@pytest.mark.parametrize("spec, parsed", [
    ("^=docker0", (True, True, [("docker0", None)])),   # exclude, then exact: NCCL's order
    ("=^mlx5_8", (False, True, [("^mlx5_8", None)])),   # reversed: '^' is part of the name
    ("^^mlx5_8", (True, False, [("^mlx5_8", None)])),   # one '^' only
    ("mlx5_0:1,,mlx5_1", (False, False, [("mlx5_0", 1), ("mlx5_1", None)])),  # empty skipped
])
def test_nccl_list_prefix_order(spec, parsed):
    assert nccl_list(spec) == parsed


def test_reversed_exclude_prefix_matches_nothing_and_says_how_to_write_it():
    # '=^mlx5_8' (the old fix text's order) selects no HCA: NCCL falls back to sockets
    problems = hca_problems("=^mlx5_8", parse(BASE)["hcas"])
    assert problems and "'^=mlx5_8'" in problems[0]
    assert not selects("=^mlx5_8", "mlx5_0")
    assert selects("^=mlx5_8", "mlx5_0") and not selects("^=mlx5_8", "mlx5_8")


@pytest.mark.parametrize("var, spec, names, note", [
    # a prefix that also selects the storage NICs mlx5_10, mlx5_11
    ("NCCL_IB_HCA", "mlx5_0,mlx5_1", ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11"],
     "also selects mlx5_10, mlx5_11"),
    # an exclude list that leaves lo eligible
    ("NCCL_SOCKET_IFNAME", "^docker0", ["lo", "eno1", "docker0"], "leaves lo eligible"),
    # one character: ignored
    ("NCCL_SOCKET_IFNAME", "e", ["lo", "eno1"], "ignores a value of one character"),
    # '=' before '^': the reversed order of the old fix text
    ("NCCL_SOCKET_IFNAME", "=^lo,docker", ["lo", "eno1", "docker0"], "puts '=' before '^'"),
])
def test_list_misreadings(var, spec, names, note):
    notes = list_misreadings(var, spec, names)
    assert any(note in n for n in notes), notes


@pytest.mark.parametrize("var, spec, names", [
    ("NCCL_IB_HCA", "=mlx5_0,mlx5_1", ["mlx5_0", "mlx5_1", "mlx5_10"]),  # exact: no overmatch
    ("NCCL_IB_HCA", "mlx5", ["mlx5_0", "mlx5_1"]),                       # prefix on purpose
    ("NCCL_SOCKET_IFNAME", "^docker,lo", ["lo", "eno1", "docker0"]),      # lo excluded
    ("NCCL_SOCKET_IFNAME", "eno1", ["lo", "eno1"]),
])
def test_list_read_as_written_says_nothing(var, spec, names):
    assert list_misreadings(var, spec, names) == []


@pytest.mark.parametrize("env, note", [
    ({"NCCL_P2P_LEVEL": "PCI"}, "NCCL_P2P_LEVEL=PCI is not a level NCCL knows"),
    ({"NCCL_P2P_LEVEL": "nvl"}, "did you mean NVL?"),          # strcmp: case matters
    ({"NCCL_NET_GDR_LEVEL": "GPU"}, "NCCL ignores it"),
    ({"NCCL_IB_DISABLE": "true"}, "NCCL_IB_DISABLE=true is not a number: NCCL reads it as 0"),
    ({"NCCL_IB_TIMEOUT": "22s"}, "reads it as 22"),
    ({"NCCL_SOCKET_FAMILY": "ipv4"}, "not one of AF_INET, AF_INET6"),
])
def test_values_nccl_ignores_or_misreads(env, note):
    assert any(note in n for n in value_misreadings(env)), value_misreadings(env)


@pytest.mark.parametrize("env", [
    {"NCCL_P2P_LEVEL": "PIX"}, {"NCCL_P2P_LEVEL": "3"}, {"NCCL_NET_GDR_LEVEL": "SYS"},
    {"NCCL_IB_DISABLE": "1"}, {"NCCL_IB_GID_INDEX": "-1"}, {"NCCL_BUFFSIZE": "0x400000"},
    {"NCCL_SOCKET_FAMILY": "AF_INET6"}, {"NCCL_DEBUG": "INFO"},
])
def test_values_nccl_reads_as_written(env):
    assert value_misreadings(env) == []


def test_probe_raises_env_invalid_for_a_p2p_level_nccl_ignores():
    # NCCL_P2P_LEVEL=PCI in the processes' env: nccl-env-invalid (warning), nothing else
    text = edit(BASE, "procs", "NCCL_NVLS_ENABLE=1", "NCCL_NVLS_ENABLE=1\nNCCL_P2P_LEVEL=PCI",
                count=-1)
    _, findings = run(text)
    assert codes(findings) == ["nccl-env-invalid"]
    assert findings[0].severity == "warning"
    assert "NCCL_P2P_LEVEL=PCI" in findings[0].message


def test_baseline_env_is_read_as_written():
    # the healthy baseline (mlx5_0..mlx5_7 by prefix, eno1, GID index 0) raises nothing
    _, findings = run(BASE)
    assert [f for f in findings if f.code == "nccl-env-invalid"] == []


def test_ib_disabled_in_the_jobs_environment_on_every_host_accuses_none():
    # NCCL_IB_DISABLE=1 exported by the job script: every host runs on sockets; one finding of
    # the job (the drift check names a host that differs from the rest, not this)
    text = edit(BASE, "procs", "NCCL_IB_GID_INDEX=0\n", "NCCL_IB_GID_INDEX=0\nNCCL_IB_DISABLE=1\n",
                count=-1)
    found = [f for f in fleet({f"gpu00{n}": text for n in range(1, 5)})
             if f.code == "nccl-ib-disabled"]
    assert [f.hosts for f in found] == [()]
    assert found[0].evidence["ib_disable"] == "1" and "each host" in found[0].message
