"""The mounts component: network and local mounts, a bounded statfs of each, Lustre imports."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes import mounts
from probes.mounts import command, parse
from probes.mounts_facts import is_network
from probes.parsers import ParseError
from tests.probes.probe_outputs import (
    REAL,
    baseline,
    block,
    codes,
    context,
    edit,
    replace,
    section_text,
    sh_accepts,
)

PROBE = mounts.PROBE
BASE = baseline("mounts")
HOME_OK = ("result 4 0 1737368305900512337 1737368305903690158 1048576 60000000 41281004 "
           "41281004 1228800000 1204377911")


def run(text: str, host: str = "gpu001"):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context())


def by_point(facts: dict, point: str) -> dict:
    return next(m for m in facts["mounts"] if m["mountpoint"] == point)


def test_command_is_valid_sh() -> None:
    assert sh_accepts(command({})).returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_script_on_this_host() -> None:
    # run for real: / is listed and answers statfs; no Lustre here
    started = time.monotonic()
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True,
                         timeout=60).stdout
    assert time.monotonic() - started < 3
    facts, findings = run(out)
    root = by_point(facts, "/")
    assert root["network"] is False and root["hung"] is False and root["size_bytes"] > 0
    assert facts["lustre"] in ([], None) and codes(findings) in ([], ["not-measured"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs sh")
def test_a_hung_statfs_does_not_hold_the_script(tmp_path: Path) -> None:
    # a stat that never returns (a grandchild holds its output, as a process in D state on a
    # hard mount would): the section gives up after STATFS_WAIT_S, the other mounts answer,
    # and the script's output closes without waiting for it
    fake = tmp_path / "stat"
    fake.write_text('#!/bin/sh\ncase "$*" in *dev/shm*) (trap "" TERM INT HUP; exec sleep 30) ;;'
                    ' *) exec /usr/bin/stat "$@" ;; esac\n')
    fake.chmod(0o755)
    started = time.monotonic()
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    took = time.monotonic() - started
    # the stuck stat holds its output for 30 s: the script did not wait for it (it gives up
    # after STATFS_WAIT_S; the margin is for a machine the rest of the suite keeps busy)
    assert took < 25, took
    facts, _ = run(out)
    assert by_point(facts, "/dev/shm")["hung"] is True
    assert by_point(facts, "/")["hung"] is False
    assert facts["hung_mounts"] == ["/dev/shm"] and facts["hung_mount_count"] == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="runs sh, reads /proc")
def test_a_statfs_only_runnable_at_the_limit_is_not_a_hung_mount(tmp_path: Path) -> None:
    # A stat that spins on a CPU past the limit (what a statfs waiting for a CPU on a
    # saturated host looks like): runnable (R), so the mount is not measured, never "hung";
    # one asleep past the limit (waiting for its server) is hung.
    fake = tmp_path / "stat"
    fake.write_text('#!/bin/sh\ncase "$*" in *dev/shm*) while :; do :; done ;;'
                    ' */tmp*) exec sleep 30 ;; *) exec /usr/bin/stat "$@" ;; esac\n')
    fake.chmod(0o755)
    out = subprocess.run(["sh", "-c", command({})], capture_output=True, text=True, timeout=60,
                         env={"PATH": f"{tmp_path}:/usr/bin:/bin"}).stdout
    facts, _ = run(out)
    shm = by_point(facts, "/dev/shm")
    assert (shm["hung"], shm["stat_state"]) == (None, "R"), shm
    assert "waiting for a CPU" in shm["stat_error"]
    assert "/dev/shm" not in facts["hung_mounts"] and by_point(facts, "/")["hung"] is False
    tmp = [m for m in facts["mounts"] if m["mountpoint"] == "/tmp"]
    if tmp:  # /tmp is its own filesystem on this machine: asleep at the limit, so hung
        assert (tmp[0]["hung"], tmp[0]["stat_state"]) == (True, "S")


@pytest.mark.parametrize(("line", "hung", "state"), [
    ("result 4 124 1737368305900512337 1737368311911690158 diag:state=R", None, "R"),
    ("result 4 124 1737368305900512337 1737368311911690158 diag:state=D", True, "D"),
    ("result 4 124 1737368305900512337 1737368311911690158 diag:state=S", True, "S"),
    ("pending 4 R", None, "R"),
    ("pending 4 D", True, "D"),
    ("pending 4", True, None),  # no state: as every older diag's output reads
    ("result 4 124 1737368305900512337 1737368310911690158 ", True, None),
])
def test_a_statfs_left_at_the_limit_is_read_by_its_state(line: str, hung: bool | None,
                                                          state: str | None) -> None:
    home = by_point(parse(edit(BASE, "statfs", HOME_OK, line)), "/home")
    assert (home["hung"], home.get("stat_state")) == (hung, state)


def test_parse_baseline() -> None:
    # NVMe root, /raid, host /dev/shm, /home over NFS, /checkpoints on Lustre (2 OSCs idle)
    facts, findings = run(BASE)
    assert findings == []
    assert [m["mountpoint"] for m in facts["mounts"]] == [
        "/", "/dev/shm", "/raid", "/home", "/checkpoints"]
    assert facts["network_mount_count"] == 2
    assert facts["network_mountpoints"] == ["/checkpoints", "/home"]
    assert facts["hung_mounts"] == [] and facts["readonly_mounts"] == []
    home = by_point(facts, "/home")
    assert home["fstype"] == "nfs4" and home["source"] == "nfs01:/export/home"
    assert home["network"] and home["statfs_ms"] == pytest.approx(3.2) and not home["hung"]
    ckpt = by_point(facts, "/checkpoints")
    assert ckpt["used_pct"] == pytest.approx(52.3) and ckpt["size_bytes"] == 4096 * 292815919104
    assert len(facts["lustre"]) == 9 and facts["lustre_unhealthy"] == []
    assert facts["lustre"][0] == {"device": "ckpt-OST0000-osc-ffff9f2b4e6c1000", "type": "osc",
                                  "target": "ckpt-OST0000", "state": "FULL",
                                  "active": None}  # osc.*.active not in this recording
    assert facts["lustre"][-1]["type"] == "mdc" and facts["lustre"][6]["state"] == "IDLE"


def test_statfs_timed_out_pending_and_errors() -> None:
    # rc 124: timed out; pending: never came back; an answer with an error is not a hang
    statfs = section_text(BASE, "statfs")
    text = replace(BASE, statfs=statfs.replace(
        HOME_OK, "result 4 124 1737368305900512337 1737368310911690158 ").replace(
        "result 5 0 1737368305900648002 1737368305902511290 4096 292815919104 139718489088 "
        "139718489088 1601028096 1288841745", "pending 5"))
    facts, findings = run(text)
    home, ckpt = by_point(facts, "/home"), by_point(facts, "/checkpoints")
    assert home["hung"] is True and home["statfs_ms"] == pytest.approx(5011.2)
    assert ckpt["hung"] is True and ckpt["statfs_ms"] is None
    assert facts["hung_mounts"] == ["/checkpoints", "/home"] and findings == []
    stale = edit(BASE, "statfs", HOME_OK, "result 4 1 1737368305900512337 1737368305904690158 "
                 "stat: cannot read file system information for '/home': Stale file handle")
    home = by_point(parse(stale), "/home")
    assert home["hung"] is False and home["stat_error"] == "Stale file handle"


def test_stat_that_could_not_run_is_not_measured() -> None:
    text = edit(BASE, "statfs", HOME_OK, "result 4 127 1 2 sh: 1: timeout: not found")
    facts, findings = run(text)
    home = by_point(facts, "/home")
    assert home["hung"] is None and home["stat_error"] == "sh: 1: timeout: not found"
    assert codes(findings) == ["not-measured"] and "/home" in findings[0].message


def test_fuse_and_stacked_and_escaped_mounts() -> None:
    # FUSE daemons are network filesystems, lxcfs is not; the visible one of stacked mounts
    # counts; \040 in a mount point is a space
    lines = section_text(BASE, "mounts") + (
        "2301 28 0:91 / /mnt/data\\040sets rw,nosuid,nodev,relatime - fuse.juicefs "
        "JuiceFS:datasets rw,user_id=0,group_id=0\n"
        "2302 30 0:92 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k\n")
    facts = parse(replace(BASE, mounts=lines))
    data = by_point(facts, "/mnt/data sets")
    assert data["network"] is True and data["hung"] is None
    assert by_point(facts, "/dev/shm")["dev"] == "0:92"
    assert is_network("fuse.lxcfs", "lxcfs") is False and is_network("fuse", "sshfs#x") is True
    assert is_network("nfs4", "x:/y") and not is_network("ext4", "/dev/sda1")


def test_readonly_by_superblock() -> None:
    # ext4 remounted read-only after an error: "ro" only in the superblock options
    text = edit(BASE, "mounts", "- ext4 /dev/md0 rw,stripe=256", "- ext4 /dev/md0 ro,stripe=256")
    facts = parse(text)
    assert facts["readonly_mounts"] == ["/raid"] and facts["readonly_mount_count"] == 1


def test_lustre_states_and_tools() -> None:
    lustre = section_text(BASE, "lustre").replace(
        "osc.ckpt-OST0003-osc-ffff9f2b4e6c1000.state=\ncurrent_state: FULL",
        "osc.ckpt-OST0003-osc-ffff9f2b4e6c1000.state=\ncurrent_state: EVICTED")
    facts = parse(replace(BASE, lustre=lustre))
    assert facts["lustre_unhealthy"] == ["ckpt-OST0003-osc-ffff9f2b4e6c1000"]
    assert facts["lustre_unhealthy_count"] == 1
    facts, findings = run(replace(BASE, lustre="lctl missing\n"))
    assert "lctl" in facts["missing"] and facts["lustre"] is None
    assert codes(findings) == ["not-measured"] and "lctl" in findings[0].message
    facts, findings = run(replace(BASE, lustre=(
        "error: get_param: param_path 'osc/*/state': Permission denied\n", 0)))
    assert facts["lustre"] is None and "Permission denied" in facts["errors"]["lustre"]
    assert codes(findings) == ["not-measured"]
    facts = parse(replace(BASE, lustre="no lustre mounts\n"))
    assert facts["lustre"] == [] and facts["lustre_unhealthy_count"] == 0


def test_real_mountinfo_through_the_hosts_selection() -> None:
    # the real LXC GPU node's mountinfo through the script's own awk selection
    sample = (REAL / "proc-mountinfo__lxc-gpu-node-kubelet-juicefs-fuse-lxcfs-nvidia-devs.txt")
    select = mounts._MOUNTS.replace("/proc/self/mountinfo", str(sample))
    out = subprocess.run(["sh", "-c", select], capture_output=True, text=True, timeout=30).stdout
    facts = parse(block("mounts", out))
    points = {m["mountpoint"]: m for m in facts["mounts"]}
    assert "/" in points and "/dev/shm" in points and "/mnt/local-volume/vol-0" in points
    assert not any(p.startswith(("/proc", "/sys")) for p in points)
    assert points["/mnt/remote-volume/training"]["network"] is True
    assert not any(m["fstype"] == "fuse.lxcfs" for m in facts["mounts"])
    # the kubelet pod volume is listed but left out of the fleet comparison
    assert facts["network_mountpoints"] == [
        "/mnt/remote-volume/dev", "/mnt/remote-volume/training",
        "/var/lib/juicefs/volume/pv-ws-test-storage-rsync-training-by-lepton-0-rupytp"]
    assert any(p.startswith("/var/lib/kubelet/pods/") for p in points)


def test_missing_sections_and_garbage() -> None:
    facts, findings = run(replace(BASE, statfs=None))
    assert "statfs" in facts["missing"] and "not-measured" in codes(findings)
    facts, findings = run(replace(BASE, statfs="statfs_error cannot create a temporary "
                                               "directory\n"))
    assert facts["errors"]["statfs"] == "cannot create a temporary directory"
    assert codes(findings) == ["not-measured"]
    with pytest.raises(ParseError):
        parse("mount: permission denied\n")
    facts, findings = run(replace(BASE, mounts=("awk: cannot open /proc/self/mountinfo\n", 2)))
    assert facts["mounts"] == [] and codes(findings) == ["not-measured"]


def test_no_network_mounts_is_healthy_but_unusual() -> None:
    only_local = "\n".join(line for line in section_text(BASE, "mounts").splitlines()
                           if " - nfs4 " not in line and " - lustre " not in line) + "\n"
    facts, findings = run(replace(BASE, mounts=only_local, lustre="no lustre mounts\n"))
    assert facts["network_mount_count"] == 0 and facts["network_mountpoints"] == []
    assert findings == []


def test_a_raw_mountinfo_reads_as_the_probes_selection():
    # mounts read-only by design (squashfs snaps, ISO images, a read-only bind, /usr on
    # immutable distributions) and autofs triggers are not what the probe's awk prints; a raw
    # /proc/self/mountinfo pasted into the section reads the same
    raw = ("23 28 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
           "29 28 7:0 / /snap/core20/2264 ro,nodev,relatime shared:9 - squashfs /dev/loop0 ro\n"
           "33 28 259:3 / /usr ro,relatime shared:11 - ext4 /dev/nvme0n1p3 ro\n"
           "35 28 259:2 /var/lib/images /opt/images ro,relatime shared:13 - ext4 /dev/nvme0n1p2"
           " rw\n"
           "37 28 11:0 / /media/cdrom ro,relatime shared:14 - iso9660 /dev/sr0 ro\n"
           "1330 28 0:70 / /data rw,relatime shared:700 - autofs systemd-1 rw,fd=51,direct\n")
    facts, _ = run(replace(BASE, mounts=section_text(BASE, "mounts") + raw))
    assert facts["readonly_mounts"] == []
    assert [m["mountpoint"] for m in facts["mounts"]] == [
        "/", "/dev/shm", "/raid", "/home", "/checkpoints"]
    # a local data filesystem the kernel remounted read-only (super options ro) still counts
    facts, _ = run(edit(BASE, "mounts", "- ext4 /dev/md0 rw,stripe=256",
                        "- ext4 /dev/md0 ro,stripe=256"))
    assert facts["readonly_mounts"] == ["/raid"]


def test_a_filesystem_without_an_inode_limit_still_reports_its_space() -> None:
    # CephFS (fs/ceph/super.c ceph_statfs) answers f_ffree = -1 and coreutils' stat -f prints
    # %d signed: the space is measured, the inode use is unknown (not the answer unreadable)
    text = edit(BASE, "statfs", HOME_OK, "result 4 0 1737368305900512337 1737368305903690158 "
                "4194304 35651584 1069547 1069547 48213311 -1")
    home = by_point(parse(text), "/home")
    assert home["used_pct"] == 97.0 and home["size_bytes"] == 4194304 * 35651584
    assert home["inodes_used_pct"] is None
    # a total printed unsigned from -1 (no count at all) is no count either
    text = edit(BASE, "statfs", HOME_OK, "result 4 0 1737368305900512337 1737368305903690158 "
                "4096 1000 500 500 18446744073709551615 -1")
    home = by_point(parse(text), "/home")
    assert home["used_pct"] == 50.0 and home["inodes_used_pct"] is None
