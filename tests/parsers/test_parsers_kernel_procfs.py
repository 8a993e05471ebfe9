"""kernel-log, proc-limits and proc-mountinfo: every real sample, each shape, and garbage."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.parsers import ParseError, kernel_log, proc_limits, proc_mountinfo

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
KERNEL_SAMPLES = sorted(REAL.glob("kernel-log__*.txt"))
# the other kernel-log kinds' samples: same log, read line by line
OTHER_KERNEL_SAMPLES = sorted([*REAL.glob("dmesg-xid__*.txt"), *REAL.glob("dmesg-link__*.txt")])


@pytest.mark.parametrize("path", KERNEL_SAMPLES, ids=[p.name for p in KERNEL_SAMPLES])
def test_every_kernel_log_sample_parses(path: Path) -> None:
    # every line is kept, no message keeps a dmesg stamp or a journal prefix
    result = kernel_log.parse(path.read_text(encoding="utf-8"))
    assert result["lines"] and result["stamped"] >= 1
    for line in result["lines"]:
        assert set(line) == {"uptime_s", "timestamp", "text"}
        assert not line["text"].startswith("[") or line["text"].startswith("[<")
        assert " kernel: " not in line["text"][:40]


@pytest.mark.parametrize("path", OTHER_KERNEL_SAMPLES, ids=[p.name for p in OTHER_KERNEL_SAMPLES])
def test_dmesg_xid_and_link_samples_read_as_kernel_log(path: Path) -> None:
    # the same kernel log shapes, including lines published without their stamp
    lines = kernel_log.parse(path.read_text(encoding="utf-8"))["lines"]
    assert all(line["text"] for line in lines)


def _one(line: str) -> dict:
    return kernel_log.parse(line)["lines"][0]


def test_shapes_of_a_kernel_line() -> None:
    # each shape the probe or an operator's paste may give, message and stamps apart
    assert _one("[ 1366.830245] mce: [Hardware Error]: Machine check events logged") == {
        "uptime_s": 1366.830245, "timestamp": None,
        "text": "mce: [Hardware Error]: Machine check events logged"}
    assert _one("[ 4274.089861] fovo.local kernel: ACPI: EC: interrupt blocked")["text"] == \
        "ACPI: EC: interrupt blocked"
    raw = _one("<4>[  201.670809] Oops: 0002 [#1] SMP")
    assert raw["uptime_s"] == 201.670809 and raw["text"] == "Oops: 0002 [#1] SMP"
    kmsg = _one("6,3973,227996636,-;nvidia-peermem nv_get_p2p_free_callback:127 ERROR x")
    assert kmsg["uptime_s"] == pytest.approx(227.996636) and kmsg["text"].startswith("nvidia")
    pdsh = _one("b1360: [14280.445226] mlx5_core 0000:61:00.0: wait_func:1132: x")
    assert pdsh["uptime_s"] == 14280.445226 and pdsh["text"].startswith("mlx5_core")
    syslog = _one("Feb 14 05:03:41 gpu001 kernel: [ 12.5] nvme nvme0: I/O 5 QID 1 timeout")
    assert syslog["uptime_s"] == 12.5 and syslog["timestamp"] == "Feb 14 05:03:41"
    assert syslog["text"] == "nvme nvme0: I/O 5 QID 1 timeout"
    nohost = _one("Feb 23 03:28:16 kernel: EDAC MC1: 1 CE memory scrubbing error")
    assert nohost["text"] == "EDAC MC1: 1 CE memory scrubbing error"
    iso = _one("kern  :info  : 2025-01-17T15:37:28,650514+00:00 mlx5_core 0000:9d:00.1 x: "
               "Link down")
    assert iso["timestamp"] == "2025-01-17T15:37:28,650514+00:00" and iso["uptime_s"] is None
    ctime = _one("[wo jul 28 05:19:43 2021] EXT4-fs (sda1): Remounting filesystem read-only")
    assert ctime["timestamp"] == "[wo jul 28 05:19:43 2021]" and ctime["uptime_s"] is None
    rel = _one("[  +0.000844] nvidia 0000:03:00.0: AER: can't recover")
    assert rel["timestamp"] == "[  +0.000844]" and rel["uptime_s"] is None
    openwrt = _one("Tue Aug 12 16:40:43 2025 kern.crit kernel: [1317557.006117] eth0: NETDEV "
                   "WATCHDOG: CPU: 1: transmit queue 3 timed out 3685740 ms")
    assert openwrt["uptime_s"] == 1317557.006117 and openwrt["text"].startswith("eth0:")


def test_journal_notices_are_not_kernel_lines() -> None:
    # "-- No entries --" and boot separators are journalctl's, not the kernel's
    lines = kernel_log.parse("-- Boot 1a2b --\n[ 1.0] host kernel: x86: Booting SMP\n"
                             "-- No entries --\n")["lines"]
    assert [line["text"] for line in lines] == ["x86: Booting SMP"]


@pytest.mark.parametrize("text", ["", "\n\n", '{"a": 1}\n', "hello world\nfoo bar baz\n",
                                  "abc\x00def\n"])
def test_kernel_log_refuses_what_is_not_a_kernel_log(text: str) -> None:
    with pytest.raises(ParseError):
        kernel_log.parse(text)


# --- /proc/PID/limits ------------------------------------------------------------------------

def test_limits_samples() -> None:
    # a container's PID 1 (trailing spaces kept) and a 16.04 shell (trailing spaces lost)
    docker = proc_limits.parse((REAL / "proc-limits__container-pid1-memlock-65536-nofile-1024-"
                                "trailing-spaces.txt").read_text(encoding="utf-8"))["limits"]
    assert docker["max_locked_memory"] == {"soft": 65536, "hard": 65536, "soft_unlimited": False,
                                           "hard_unlimited": False, "units": "bytes"}
    assert docker["max_open_files"]["soft"] == 1024 and docker["max_open_files"]["hard"] == 4096
    assert docker["max_nice_priority"]["units"] is None
    assert docker["max_cpu_time"]["soft"] is None and docker["max_cpu_time"]["soft_unlimited"]
    plain = proc_limits.parse((REAL / "proc-limits__ubuntu-16.04-self-no-trailing-spaces.txt")
                              .read_text(encoding="utf-8"))["limits"]
    assert len(plain) == 16 and plain["max_processes"]["soft"] == 30442


def test_limits_unlimited_memlock_and_garbage() -> None:
    row = "Max locked memory         unlimited            unlimited            bytes     \n"
    memlock = proc_limits.parse(row)["limits"]["max_locked_memory"]
    assert memlock["soft"] is None and memlock["soft_unlimited"] is True
    with pytest.raises(ParseError):
        proc_limits.parse("Limit Soft Limit Hard Limit Units\nnothing here\n")


# --- /proc/PID/mountinfo ---------------------------------------------------------------------

def test_mountinfo_sample_lxc_gpu_node() -> None:
    # 171 mounts of a GPU node's LXC container: fuse.lxcfs, a FUSE volume, kubelet tmpfs
    mounts = proc_mountinfo.parse((REAL / "proc-mountinfo__lxc-gpu-node-kubelet-juicefs-fuse-"
                                   "lxcfs-nvidia-devs.txt").read_text(encoding="utf-8"))["mounts"]
    assert len(mounts) == 171
    shm = next(m for m in mounts if m["mountpoint"] == "/dev/shm")
    assert shm["fstype"] == "tmpfs" and shm["optional"] == [] and not shm["readonly"]
    root = mounts[0]
    assert root["root"] == "/var/lib/lxc/ny2g2r14hh2-lxc/rootfs" and root["mountpoint"] == "/"
    assert root["optional"] == ["shared:518", "master:1"]
    fuse = [m for m in mounts if m["fstype"] == "fuse.testfs"]
    assert fuse and fuse[0]["source"] == "TestFS:test-us-east-training"
    boot_id = next(m for m in mounts if m["mountpoint"] == "/proc/sys/kernel/random/boot_id")
    assert boot_id["readonly"] is True  # "ro" in the per-mount options


def test_mountinfo_escapes_and_superblock_readonly() -> None:
    # a space in a path is \040; ext4 remounted read-only shows "ro" in its superblock only
    line = "45 44 259:3 / /home/data\\040set rw,relatime - ext4 /dev/data ro,errors=remount-ro"
    mount = proc_mountinfo.parse_line(line)
    assert mount is not None and mount["mountpoint"] == "/home/data set" and mount["readonly"]
    assert proc_mountinfo.parse_line("36 35 98:0 / /x rw - ext3") is None
    with pytest.raises(ParseError):
        proc_mountinfo.parse("rootfs / rootfs rw 0 0\n")
