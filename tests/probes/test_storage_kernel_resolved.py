"""Storage lines that say the fault is over, and automounted paths, judged as a walk does.

- ``resolved_by`` (docs/fault-format.md): an NFS server that answered again ("nfs: server X
  OK", net/sunrpc/clnt.c call_decode) and a Lustre import restored ("Connection restored to",
  lustre/ptlrpc/import.c) no longer count, for that server / device only;
- autofs(5) / systemd.automount(5): which map entries are mounted differs between hosts
  configured alike, so the fleet comparison of network mounts reads the triggers instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from probes import kernel, mounts
from probes.faults.apply import attach_log_lines, judge
from probes.faults.catalogue import FaultCatalogueError, read_files
from tests.probes.probe_outputs import baseline, block, edit, section_text

THRESHOLDS = {"fault_log_window_minutes": 120, "local_disk_used_pct_max": 95,
              "network_fs_used_pct_max": 95}


def _kernel_facts(*lines: str) -> dict[str, Any]:
    base = baseline("kernel")
    text = edit(base, "kernel", section_text(base, "kernel"),
                section_text(base, "kernel") + "".join(line + "\n" for line in lines))
    facts = kernel.parse(text)
    attach_log_lines(text, {"kernel": "kernel"}, facts)
    return facts


def _kernel_codes(*lines: str) -> set[str]:
    fleet = {"h1": _kernel_facts(*lines), **{f"h{i}": _kernel_facts() for i in (2, 3, 4)}}
    return {f.code for f in judge("kernel", fleet, THRESHOLDS) if "h1" in f.hosts}


NFS_DOWN = "[1208011.402113] nfs: server {} not responding, still trying"
NFS_OK = "[1208093.771950] nfs: server {} OK"
LOST = ("[1207822.001142] Lustre: ckpt-{0}-osc-ffff9f2b4e6c1000: Connection to ckpt-{0} (at "
        "10.12.0.11@o2ib) was lost; in progress operations using this service will wait for "
        "recovery to complete")
RESTORED = ("[1207903.118023] Lustre: ckpt-{0}-osc-ffff9f2b4e6c1000: Connection restored to "
            "10.12.0.12@o2ib (at 10.12.0.12@o2ib)")


def test_nfs_server_that_answered_again_is_not_a_fault() -> None:
    assert "storage-nfs-not-responding" in _kernel_codes(NFS_DOWN.format("nfs01"))
    assert _kernel_codes(NFS_DOWN.format("nfs01"), NFS_OK.format("nfs01")) == set()
    # another server's OK, or an OK before the outage, resolves nothing
    assert "storage-nfs-not-responding" in _kernel_codes(
        NFS_DOWN.format("nfs01"), NFS_OK.format("nfs02"))
    assert "storage-nfs-not-responding" in _kernel_codes(
        NFS_OK.format("nfs01").replace("1208093", "1207093"), NFS_DOWN.format("nfs01"))


def test_lustre_connection_restored_is_not_a_fault() -> None:
    assert "storage-lustre-connection-lost" in _kernel_codes(LOST.format("OST0003"))
    assert _kernel_codes(LOST.format("OST0003"), RESTORED.format("OST0003")) == set()
    assert "storage-lustre-connection-lost" in _kernel_codes(
        LOST.format("OST0003"), LOST.format("OST0004"), RESTORED.format("OST0003"))


def test_the_host_greps_the_resolving_lines_too() -> None:
    from probes import faults

    ere = faults.stream_ere("kernel")
    for line in (NFS_OK.format("nfs01"), RESTORED.format("OST0003")):
        done = subprocess.run(["grep", "-E", "-e", ere], input=line + "\n", text=True,
                              capture_output=True, check=False)
        assert done.stdout.strip() == line


def _catalogue(resolved_by: str) -> None:
    raw = {"family": "t", "title": "t", "signatures": [{
        "id": "t-sig", "probe": "kernel", "scope": "host", "severity": "error",
        "action": "reboot", "summary": "s", "cause": "c", "source": "s", "twin": "t",
        "log": {"streams": ["kernel"], "pattern": "a ([a-z]+) down",
                "resolved_by": resolved_by}}]}
    read_files([("t.yaml", raw)])


def test_resolved_by_is_checked_as_posix_ere() -> None:
    _catalogue("a ([a-z]+) up")
    with pytest.raises(FaultCatalogueError, match="resolved_by"):
        _catalogue(r"a (\w+) up")


# --- autofs -----------------------------------------------------------------------------

ROOT = "28 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
CKPT = ("1318 28 0:63 / /checkpoints rw,relatime shared:656 - lustre 10.12.0.10@o2ib:"
        "10.12.0.11@o2ib:/ckpt rw,flock,lazystatfs\n")
HOME_MAP = ("1300 28 0:61 / /home rw,relatime shared:639 - autofs /etc/auto.home rw,fd=7,"
            "pgrp=2113,timeout=600,minproto=5,maxproto=5,indirect,pipe_ino=40112\n")
DATA_TRIGGER = ("1330 28 0:70 / /data rw,relatime shared:700 - autofs systemd-1 rw,fd=51,"
                "pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=21432\n")


def _home(user: str, mount_id: int) -> str:
    return (f"{mount_id} 1300 0:{mount_id} / /home/{user} rw,relatime - nfs4 "
            f"nfs01:/export/home/{user} rw,vers=4.2,hard,addr=10.12.0.5\n")


DATA_NFS = "1331 1330 0:71 / /data rw,relatime - nfs4 nfs02:/data rw,vers=4.2,hard\n"


def _mounts_facts(mountinfo: str) -> dict[str, Any]:
    base = baseline("mounts")
    return mounts.parse(edit(base, "mounts", section_text(base, "mounts"), mountinfo))


def _mount_codes(mine: str, others: str) -> set[str]:
    fleet = {"h1": _mounts_facts(mine), **{f"h{i}": _mounts_facts(others) for i in (2, 3, 4)}}
    return {f.code for f in judge("mounts", fleet, THRESHOLDS) if "h1" in f.hosts}


def test_automounted_entries_are_read_as_their_trigger() -> None:
    facts = _mounts_facts(ROOT + HOME_MAP + _home("alice", 1402) + DATA_TRIGGER + DATA_NFS
                          + CKPT)
    assert facts["network_mountpoints"] == ["/checkpoints", "/data", "/home"]
    points = {m["mountpoint"]: m for m in facts["mounts"]}
    assert points["/home/alice"]["automount"] == "/home"
    assert points["/data"]["automount"] == "/data" and points["/checkpoints"]["automount"] is None
    assert "/home" not in points  # the trigger itself is not a mount of the list


def test_user_homes_mounted_on_one_host_only_accuse_nobody() -> None:
    others = ROOT + HOME_MAP + _home("alice", 1402) + CKPT
    mine = ROOT + HOME_MAP + _home("alice", 1402) + _home("bob", 1403) + CKPT
    assert "storage-mount-missing-here" not in _mount_codes(mine, others)
    # a direct automount not mounted yet here, mounted on the others
    assert "storage-mount-missing-here" not in _mount_codes(
        ROOT + DATA_TRIGGER + CKPT, ROOT + DATA_TRIGGER + DATA_NFS + CKPT)
    # a host whose automounter is not running has no trigger: the path is missing here
    assert "storage-mount-missing-here" in _mount_codes(
        ROOT + CKPT, ROOT + HOME_MAP + _home("alice", 1402) + CKPT)


def test_offset_triggers_and_local_automounts_are_not_configured_paths() -> None:
    # the -hosts map mounts offset triggers under /net/SERVER on access; /efi is the ESP
    net = ("1340 28 0:72 / /net rw,relatime - autofs -hosts rw,fd=9,indirect\n"
           "1341 1340 0:73 / /net/srv/export rw,relatime - autofs -hosts rw,fd=9,offset\n"
           "1342 1341 0:74 / /net/srv/export rw,relatime - nfs srv:/export rw,vers=3\n"
           "1350 28 0:75 / /efi rw,relatime - autofs systemd-1 rw,fd=52,direct\n")
    facts = _mounts_facts(ROOT + net + CKPT)
    assert facts["network_mountpoints"] == ["/checkpoints", "/net"]
    assert {m["mountpoint"]: m["automount"] for m in facts["mounts"]}["/net/srv/export"] == "/net"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs sh and awk")
def test_the_hosts_awk_prints_triggers_and_never_asks_them(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text(ROOT + HOME_MAP + _home("alice", 1402) + DATA_TRIGGER
                    + "1350 28 0:75 / /efi rw,relatime - autofs systemd-1 rw,fd=52,direct\n"
                    + "20 23 0:5 / /proc/sys/fs/binfmt_misc rw - autofs systemd-1 rw,fd=3\n")
    printed = subprocess.run(["sh", "-c", mounts._MOUNTS.replace("/proc/self/mountinfo",
                                                                   str(info))],
                             capture_output=True, text=True, timeout=30).stdout
    assert [line.split()[4] for line in printed.splitlines()] == [
        "/", "/home", "/home/alice", "/data"]
    asked = subprocess.run(["sh", "-c", mounts._TARGETS.replace("/proc/self/mountinfo",
                                                                  str(info))],
                           capture_output=True, text=True, timeout=30).stdout
    assert asked.split() == ["259:2|/", "0:1402|/home/alice"]
    facts = mounts.parse(block("mounts", printed))
    assert facts["network_mountpoints"] == ["/data", "/home"]


def test_a_read_only_map_entry_mounted_here_only_is_not_drift() -> None:
    # auto.datasets "imagenet -ro nfs03:/export/imagenet": read-only by its map, mounted on
    # the hosts that read it
    datasets = ("1360 28 0:76 / /datasets rw,relatime - autofs /etc/auto.datasets rw,fd=11,"
                "indirect\n"
                "1361 1360 0:77 / /datasets/imagenet ro,relatime - nfs4 nfs03:/export/imagenet"
                " ro,vers=4.2,hard\n")
    others = ROOT + datasets.splitlines(keepends=True)[0] + CKPT
    assert _mount_codes(ROOT + datasets + CKPT, others) == set()


def _hung(mountinfo: str, *hung_devs: str) -> dict[str, Any]:
    """The facts of *mountinfo* with every network mount asked, those of *hung_devs* hung."""
    base = baseline("mounts")
    text = edit(base, "mounts", section_text(base, "mounts"), mountinfo)
    parsed = mounts.parse(text)
    lines = []
    for i, m in enumerate(parsed["mounts"], 1):
        lines.append(f"stat {i} {m['dev']} {m['mountpoint']}")
        lines.append(f"result {i} 124 1 5000000001 diag:state=D" if m["dev"] in hung_devs
                     else f"result {i} 0 1 2 4096 1000 500 500 100 50")
    text = edit(text, "statfs", section_text(text, "statfs"), "\n".join(lines) + "\n")
    return mounts.parse(text)


def test_every_host_hung_on_its_own_automounted_homes_accuses_no_host() -> None:
    # nfs01 down: every host hangs on the homes it happens to have mounted (the job user's,
    # and on h1 an admin's too): the storage's fault, no host's
    a = _hung(ROOT + HOME_MAP + _home("alice", 1402) + _home("bob", 1403) + CKPT,
              "0:1402", "0:1403")
    b = _hung(ROOT + HOME_MAP + _home("alice", 1402) + CKPT, "0:1402")
    assert a["hung_mounts"] == b["hung_mounts"] == ["/home"]
    found = {f.code for f in judge("mounts", {"h1": a, "h2": b, "h3": b, "h4": b}, THRESHOLDS)
             if "h1" in f.hosts}
    assert "storage-mount-hung-here" not in found and "storage-mount-hung" in found
