"""The kernel component: the kernel log grepped with the catalogue's patterns, dated from boot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes import kernel
from probes.kernel import MAX_LINES, command, command_text, parse
from probes.parsers import ParseError
from tests.probes.probe_outputs import REAL, baseline, block, codes, context, edit, sh_accepts

PROBE = kernel.PROBE
BASE = baseline("kernel")
# What the script printed for a non-root user on a host with kernel.dmesg_restrict=1 and no
# journal files (run on the development machine: the dmesg and journalctl wording of
# util-linux and systemd).
RESTRICTED = """=== diag:section kernel
uptime 1852.08
dmesg_error dmesg: read kernel buffer failed: Operation not permitted
source none
journal_error No journal files were found.
=== diag:rc kernel 1
"""


def run(text: str, host: str = "gpu001"):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context())


def with_lines(*lines: str, source: str = "dmesg", uptime: str = "1209633.12") -> str:
    body = f"uptime {uptime}\nsource {source}\n" + "".join(line + "\n" for line in lines)
    return block("kernel", body)


def test_command_is_valid_sh() -> None:
    assert sh_accepts(command({})).returncode == 0


def test_command_greps_with_the_catalogue_ere(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ERE comes from the catalogue, quoted as one shell word, also when it holds quotes
    monkeypatch.setattr(kernel.faults, "stream_ere", lambda stream: "it's (a|b) [0-9]+")
    text = command({})
    assert "grep -aE -e 'it'\"'\"'s (a|b) [0-9]+'" in text
    assert sh_accepts(text).returncode == 0
    assert f"tail -n {MAX_LINES}" in text and "cut -c1-500" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and dmesg")
def test_script_on_this_host() -> None:
    # run for real: either the log was read, or it says why not (never an empty healthy log)
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True,
                         timeout=60).stdout
    facts, findings = run(out)
    assert facts["uptime_s"] and facts["uptime_s"] > 0
    if facts["readable"]:
        assert facts["source"] in ("dmesg", "journalctl") and codes(findings) == []
    else:
        assert facts["errors"]["kernel"] and codes(findings) == ["not-measured"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads dmesg")
def test_script_with_failing_dmesg_and_no_journal(tmp_path: Path) -> None:
    # dmesg refused, journalctl finds nothing: the reasons come back, the section fails
    for tool, body in (("dmesg", "echo 'dmesg: read kernel buffer failed: Operation not "
                                 "permitted' >&2; exit 1"),
                       ("journalctl", "echo 'No journal files were found.' >&2; "
                                      "echo '-- No entries --'; exit 0")):
        fake = tmp_path / tool
        fake.write_text(f"#!/bin/sh\n{body}\n")
        fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True, timeout=60,
                         env=env).stdout
    facts, findings = run(out)
    assert facts["readable"] is False and facts["source"] is None
    assert facts["errors"]["kernel"] == ("dmesg: read kernel buffer failed: Operation not "
                                         "permitted; journalctl: No journal files were found.")
    assert codes(findings) == ["not-measured"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs sh")
def test_script_falls_back_to_the_journal(tmp_path: Path) -> None:
    # dmesg refused; the journal readable: its short-monotonic lines, grepped
    (tmp_path / "dmesg").write_text("#!/bin/sh\necho 'dmesg: klogctl: Operation not "
                                    "permitted' >&2\nexit 1\n")
    (tmp_path / "journalctl").write_text(
        "#!/bin/sh\necho '[ 4274.052063] gpu001 kernel: INFO: task python3:4821 blocked for more "
        "than 120 seconds.'\necho '[ 4274.089861] gpu001 kernel: ACPI: EC: interrupt blocked'\n")
    for name in ("dmesg", "journalctl"):
        (tmp_path / name).chmod(0o755)
    out = subprocess.run(["sh", "-c", command_text("blocked for more than")], capture_output=True,
                         text=True, timeout=60, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    facts, _ = run(block("kernel", out))
    assert facts["source"] == "journalctl" and facts["readable"] is True
    assert [line["text"] for line in facts["lines"]] == [
        "INFO: task python3:4821 blocked for more than 120 seconds."]


def test_parse_baseline() -> None:
    # dmesg read; a boot-time corrected AER line and three harmless peermem lines, dated
    facts, findings = run(BASE)
    assert facts["source"] == "dmesg" and facts["readable"] is True
    assert facts["uptime_s"] == 1209633.12 and facts["line_count"] == 4
    assert facts["truncated"] is False
    assert facts["lines"][0] == {
        "age_s": 1209616.9,
        "text": "pcieport 0000:00:01.1: AER: Corrected error received: 0000:03:00.0"}
    assert facts["lines"][-1]["age_s"] == pytest.approx(10911.0)
    assert findings == []


def test_lines_without_uptime_stamps_have_no_age() -> None:
    # dmesg -T (wall-clock) and relative stamps give no age: the line still counts
    facts, _ = run(with_lines("[Mon Oct 16 10:06:17 2017] LustreError: 11-0: x: rc = -107",
                              "[  +0.000844] nvidia 0000:03:00.0: AER: can't recover"))
    assert [line["age_s"] for line in facts["lines"]] == [None, None]
    assert facts["lines"][0]["text"] == "LustreError: 11-0: x: rc = -107"


def test_journal_source_strips_host_and_dates_lines() -> None:
    facts, _ = run(with_lines("[1209000.500000] gpu001 kernel: nfs: server nfs01 not responding,"
                              " still trying", source="journalctl"))
    assert facts["lines"] == [{"age_s": 632.6,
                               "text": "nfs: server nfs01 not responding, still trying"}]


def test_real_samples_as_the_section_body() -> None:
    # real kernel logs pasted as what the host printed: every line kept, stamps read
    sample = (REAL / "kernel-log__hung-task-kworker-ntpd-snmpd-debian-4.19-dmesg-excerpt.txt"
              ).read_text(encoding="utf-8")
    facts, _ = run(with_lines(*sample.splitlines(), uptime="27000.0"))
    assert facts["line_count"] == 15
    assert facts["lines"][0]["age_s"] == pytest.approx(27000.0 - 26825.855448, abs=0.1)


def test_truncated_when_the_cap_is_reached() -> None:
    lines = [f"[{1209000 + i}.000000] nvme nvme0: I/O {i} QID 1 timeout, aborting"
             for i in range(MAX_LINES)]
    facts, _ = run(with_lines(*lines))
    assert facts["truncated"] is True and facts["line_count"] == MAX_LINES


def test_restricted_dmesg_and_no_journal_is_not_measured() -> None:
    facts, findings = run(RESTRICTED)
    assert facts["readable"] is False and facts["lines"] == []
    assert "Operation not permitted" in facts["errors"]["kernel"]
    assert codes(findings) == ["not-measured"]
    assert "kernel log not measured" in findings[0].message


def test_journal_that_prints_its_access_notice_is_not_read() -> None:
    # an old script, or a journal read by a user outside adm/systemd-journal
    text = with_lines("Hint: You are currently not seeing messages from other users and the "
                      "system.", source="journalctl")
    facts, findings = run(text)
    assert facts["readable"] is False and codes(findings) == ["not-measured"]


def test_missing_section_and_garbage() -> None:
    facts, findings = run("=== diag:missing kernel\n")
    assert facts["missing"] == ["kernel"] and codes(findings) == ["not-measured"]
    with pytest.raises(ParseError):
        parse("dmesg: command not found\n")
    with pytest.raises(ParseError):
        parse(block("other", "x"))


def test_section_cut_before_the_source_line() -> None:
    # a section whose command failed before saying which source it read
    facts, findings = run(block("kernel", "sh: 1: cut: not found\n", 127))
    assert facts["readable"] is False and facts["errors"]["kernel"].startswith("sh: 1: cut")
    assert codes(findings) == ["not-measured"]


def test_healthy_but_unusual_empty_log() -> None:
    # a readable log with no matching line: measured, nothing to report
    facts, findings = run(edit(BASE, "kernel", "[   16.204117] pcieport 0000:00:01.1: AER: "
                               "Corrected error received: 0000:03:00.0\n", ""))
    assert facts["readable"] is True and facts["line_count"] == 3 and findings == []


def test_storage_waiting_is_an_unanswered_storage_server_in_the_window() -> None:
    # a server not answering now (by the storage family's fabric signatures), not one that
    # answered again, nor one from before the window
    waiting = parse(with_lines("[1209201.118003] nfs: server nfs01 not responding, still trying"))
    answered = parse(with_lines("[1209201.118003] nfs: server nfs01 not responding, still trying",
                                "[1209260.330119] nfs: server nfs01 OK"))
    old = parse(with_lines("[1100000.118003] nfs: server nfs01 not responding, still trying"))
    ceph = parse(with_lines("[1209388.104221] ceph: [c3d3a9f2-5b1e 4231]: mds1 hung"))
    assert waiting["storage_waiting"] is True and ceph["storage_waiting"] is True
    assert answered["storage_waiting"] is False and old["storage_waiting"] is False
    assert parse(BASE)["storage_waiting"] is False


def test_edac_counters_summed_over_controllers_and_none_without_a_driver() -> None:
    edac = block("edac", "mc mc0 0 12\nmc mc1 2 0\nedac read\n")
    facts = parse(BASE + edac)
    assert (facts["edac_mc_count"], facts["edac_ue_count"], facts["edac_ce_count"]) == (2, 2, 12)
    for body in ("no edac\n", "edac read\n", "mc mc0 0 1\n"):  # no driver, none found, cut off
        facts = parse(BASE + block("edac", body))
        assert facts["edac_ue_count"] is None and facts["edac_mc_count"] is None
    assert parse(BASE)["edac_ue_count"] is None  # an older recording without the section


def test_edac_section_reads_sysfs_counters(tmp_path: Path) -> None:
    # the section's shell over a copy of the sysfs layout (drivers/edac/edac_mc_sysfs.c)
    for mc, ue, ce in (("mc0", "0", "7"), ("mc1", "1", "0")):
        (tmp_path / mc).mkdir()
        (tmp_path / mc / "ue_count").write_text(ue + "\n")
        (tmp_path / mc / "ce_count").write_text(ce + "\n")
    (tmp_path / "power").mkdir()  # not a controller
    text = kernel.EDAC_TEXT.replace("/sys/devices/system/edac/mc", str(tmp_path))
    out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=30).stdout
    assert out.splitlines() == ["mc mc0 0 7", "mc mc1 1 0", "edac read"]
    empty = tmp_path / "none"
    empty.mkdir()
    text = kernel.EDAC_TEXT.replace("/sys/devices/system/edac/mc", str(empty))
    out = subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=30).stdout
    assert out.splitlines() == ["edac read"]
