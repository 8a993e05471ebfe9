"""IBM Storage Scale (GPFS) health read by the mounts probe (``mmhealth node show -Y``), and the
filesystem errors of an NVMe-oF namespace that lost every path (probes/storage_paths.py).

mmhealth -Y formats: hpcugent/vsc-filesystems test/gpfs.py (no laststatuschange field; with
it, %3A-escaped colons), treydock/gpfs_exporter collectors/mmhealth_test.go, and 5.2 output with
the lastcheck / message fields and unescaped colons in its timestamps.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from probes.base import Context
from probes.mounts import check, command, parse
from probes.storage_paths import namespace
from tests.probes.test_storage_kernel_resolved import _kernel_codes, _kernel_facts

BASE = (Path(__file__).parents[2] / "fixtures/scenarios/_baseline/mounts.txt").read_text()

V52 = "".join([
    "mmhealth:Event:HEADER:version:reserved:reserved:node:component:entityname:entity"
    "type:event:arguments:activesince:identifier:ishidden:message:eventtype:severity:"
    "fullidentifier:\n",
    "mmhealth:State:HEADER:version:reserved:reserved:node:component:entityname:entity"
    "type:status:laststatuschange:lastcheck:\n",
    "mmhealth:State:0:1:::ec01:NODE:ec01:NODE:FAILED:2025-12-31 12:13:53:-:\n",
    "mmhealth:State:0:1:::ec01:GPFS:ec01:NODE:HEALTHY:2025-12-31 12:13:53:2026-01-04 "
    "13:12:27:\n",
    "mmhealth:State:0:1:::ec01:FILESYSTEM:ec01:NODE:FAILED:2025-07-21 08:58:15:2026-0"
    "1-04 13:12:27:\n",
    "mmhealth:State:0:1:::ec01:FILESYSTEM:data:FILESYSTEM:FAILED:2025-07-21 08:58:15:"
    "2026-01-04 13:12:27:\n",
    "mmhealth:Event:0:1:::ec01:FILESYSTEM:data:FILESYSTEM:stale_mount:data:2025-07-21"
    " 08:58:15:data:no:Found stale mounts for the file system data.:STATE_CHANGE:ERRO"
    "R:1/data/:\n",
    "mmhealth:State:0:1:::ec01:FILESYSTEM:home:FILESYSTEM:HEALTHY:2025-07-21 08:58:15"
    ":2026-01-04 13:12:27:\n",
    "mmhealth_rc 0\n",
])


def _with_gpfs(body: str) -> str:
    return BASE + "=== diag:section gpfs\n" + body + "=== diag:rc gpfs 0\n"


def _check(facts: dict) -> list:
    return check("h1", facts, Context())


def test_no_gpfs_is_not_applicable_and_an_old_recording_is_not_measured_quietly() -> None:
    for text in (_with_gpfs("no gpfs\n"), BASE):
        facts = parse(text)
        assert facts["gpfs_daemon_status"] is None and facts["gpfs_filesystems"] is None
        assert "gpfs" not in facts["errors"]
        assert not [f for f in _check(facts) if "mmhealth" in f.message]


@pytest.mark.parametrize(("body", "why"), [
    ("mmhealth_rc 124\n", "did not answer"),
    ("mmhealth missing\n", "not installed"),
    ("mmhealth: Permission denied\nmmhealth_rc 1\n", "Permission denied"),
])
def test_mmhealth_not_read_is_not_measured(body: str, why: str) -> None:
    facts = parse(_with_gpfs(body))
    assert why in facts["errors"]["gpfs"]
    assert facts["gpfs_daemon_status"] is None
    found = [f for f in _check(facts) if "mmhealth" in f.message]
    assert found and all(f.severity not in ("error", "critical") for f in found)


def test_fields_by_header_name_with_unescaped_colons_in_52_timestamps() -> None:
    facts = parse(_with_gpfs(V52))
    assert facts["gpfs_node_status"] == "FAILED" and facts["gpfs_daemon_status"] == "HEALTHY"
    by_name = {f["name"]: f for f in facts["gpfs_filesystems"]}
    assert by_name["data"]["status"] == "FAILED" and by_name["data"]["events"] == ["stale_mount"]
    assert by_name["home"]["unmounted"] is False
    assert facts["gpfs_unmounted"] == ["data"] and facts["gpfs_unmounted_count"] == 1


def test_a_degraded_optional_monitor_is_not_an_unmounted_file_system() -> None:
    body = V52.replace("data:FILESYSTEM:FAILED", "data:FILESYSTEM:DEGRADED").replace(
        ":stale_mount:", ":pool-data_high_warn:")
    facts = parse(_with_gpfs(body))
    assert facts["gpfs_unmounted"] == []


def test_command_asks_mmhealth_read_only_under_a_limit() -> None:
    script = command({})
    assert "node show -Y" in script and "timeout 10" in script
    assert "/usr/lpp/mmfs/bin/mmhealth" in script


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs sh")
def test_gpfs_section_on_a_host_without_gpfs() -> None:
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True,
                         timeout=60).stdout
    facts = parse(out)
    if "no gpfs" in out:
        assert facts["gpfs_daemon_status"] is None and "gpfs" not in facts["errors"]


# --- NVMe-oF: every path lost, then the filesystem on the namespace fails ------------------

NO_PATH = "[1209580.602118] block nvme1n1: no available path - failing I/O"


def test_namespace_names() -> None:
    assert namespace("nvme1c2n1") == "nvme1n1" and namespace("nvme1n1p3") == "nvme1n1"
    assert namespace("sda") == "sda"


def test_errors_after_all_paths_lost_are_the_storages() -> None:
    lines = [NO_PATH,
             "[1209580.610221] Buffer I/O error on dev nvme1n1p1, logical block 9, lost async "
             "page write",
             "[1209580.611230] EXT4-fs (nvme1n1p1): Remounting filesystem read-only"]
    assert _kernel_facts(*lines)["nvmeof_lost_errors_only"] is True
    codes = _kernel_codes(*lines)
    assert "storage-nvmeof-no-path" in codes
    assert not codes & {"kernel-block-io-error", "kernel-fs-readonly", "kernel-fs-corruption"}


def test_errors_before_the_path_loss_or_on_another_disk_stay_the_hosts() -> None:
    before = ["[1209570.610221] Buffer I/O error on dev nvme1n1, logical block 9, async page read",
              NO_PATH]
    assert "kernel-block-io-error" in _kernel_codes(*before)
    other = [NO_PATH, "[1209580.710221] EXT4-fs error (device sda2): ext4_find_entry:1455: "
             "inode #2: comm ls: reading directory lblock 0"]
    assert "kernel-fs-corruption" in _kernel_codes(*other)
    assert _kernel_facts(NO_PATH)["nvmeof_lost_errors_only"] is False


# --- WEKA client containers (weka local ps --json) -----------------------------------------

def _with_weka(body: str) -> str:
    return BASE + "=== diag:section weka\n" + body + "=== diag:rc weka 0\n"


def test_weka_containers_by_run_status() -> None:
    facts = parse(_with_weka('[{"name": "client", "runStatus": "Stopped"}, '
                             '{"name": "s3", "runStatus": "Stopped"}]\nweka_rc 0\n'))
    assert facts["weka_stopped"] == ["client"] and facts["weka_stopped_count"] == 1
    assert facts["weka_containers"][1] == {"name": "s3", "run_status": "Stopped"}


@pytest.mark.parametrize(("body", "why"), [
    ("weka_rc 124\n", "did not answer"),
    ("weka missing\n", "not installed"),
    ("error: Failed connecting to http://127.0.0.1:14000/api/v1.\nweka_rc 1\n",
     "Failed connecting"),
])
def test_weka_not_read_is_not_measured(body: str, why: str) -> None:
    facts = parse(_with_weka(body))
    assert why in facts["errors"]["weka"] and facts["weka_stopped_count"] is None
    found = [f for f in _check(facts) if "weka" in f.message]
    assert found and all(f.severity not in ("error", "critical") for f in found)


def test_no_wekafs_mount_is_not_applicable() -> None:
    facts = parse(_with_weka("no wekafs mounts\n"))
    assert facts["weka_containers"] is None and "weka" not in facts["errors"]


def test_a_failed_file_system_for_a_corruption_event_is_not_an_unmount() -> None:
    body = V52.replace(":stale_mount:data:", ":fserrallocblock:data,5,alloc:")
    facts = parse(_with_gpfs(body))
    assert facts["gpfs_unmounted"] == []
    data = next(f for f in facts["gpfs_filesystems"] if f["name"] == "data")
    assert data["corrupt"] is True and data["unmounted"] is False


def test_corruption_event_is_the_storage_teams_and_names_no_host() -> None:
    from probes.faults import load_faults

    sig = load_faults().signatures["storage-gpfs-fs-corruption"]
    assert (sig.scope, sig.action) == ("fabric", "call-storage-team")
    body = V52.replace(":stale_mount:data:", ":fserrinvalid:data:")
    found = parse(_with_gpfs(body))["gpfs_filesystems"]
    assert [f["name"] for f in found if f["corrupt"]] == ["data"]
    tips = V52.replace("data:FILESYSTEM:FAILED", "data:FILESYSTEM:DEGRADED").replace(
        ":stale_mount:", ":pool-data_high_warn:")
    assert not any(f["corrupt"] for f in parse(_with_gpfs(tips))["gpfs_filesystems"])
