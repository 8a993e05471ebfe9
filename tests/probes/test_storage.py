"""The storage probe: mount type and space, a bounded write+fsync+read test, ioping."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from probes.base import get_probe
from probes.parsers import ParseError
from probes.storage import command, parse
from tests.probes.probe_outputs import (
    baseline,
    by_code,
    codes,
    context,
    edit,
    real,
    replace,
    sh_accepts,
)

PROBE = get_probe("storage")
BASE = baseline("storage")
T0 = 1737368306118402117


def run(text: str, host: str = "gpu001", **params):
    facts = parse(text)
    return facts, PROBE.check(host, facts, context(params={"path": "/checkpoints", **params}))


def test_command_is_valid_sh():
    # default path, a runbook path, and a hostile path are all accepted by sh -n
    assert sh_accepts(command({})).returncode == 0
    assert sh_accepts(command({"path": "/checkpoints"})).returncode == 0
    script = command({"path": "/data/my ckpt/$(reboot)"})
    assert sh_accepts(script).returncode == 0 and "'/data/my ckpt/$(reboot)'" in script


def test_test_size_is_bounded():
    # whatever storage_test_bytes says, at most 1 GiB is written
    assert "bs=1048576 count=1024 " in command({"storage_test_bytes": 10**12})
    assert "bs=1048576 count=64 " in command({})


@pytest.mark.skipif(not all(shutil.which(t) for t in ("dd", "mktemp", "df", "timeout")),
                    reason="needs dd, mktemp, df and timeout")
def test_script_on_this_host_measures_and_cleans_up(tmp_path):
    # run for real in a temp dir: numbers come back and the test file is gone afterwards
    (tmp_path / "keep.txt").write_text("x")
    out = subprocess.run(["sh", "-c", command({"path": str(tmp_path),
                                               "storage_test_bytes": 4 << 20})],
                         capture_output=True, text=True, timeout=120).stdout
    facts = parse(out)
    assert facts["path_exists"] and facts["tmpfile_removed"] is True
    assert facts["write_bytes_per_s"] > 0 and facts["fsync_latency_us"] > 0
    assert facts["fs_type"] and facts["free_bytes"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


@pytest.mark.skipif(not all(shutil.which(t) for t in ("dd", "mktemp", "timeout")),
                    reason="needs dd, mktemp and timeout")
def test_script_on_a_missing_path_writes_nothing(tmp_path):
    # a path that does not exist: no directory is created, nothing is written
    target = tmp_path / "absent"
    out = subprocess.run(["sh", "-c", command({"path": str(target)})],
                         capture_output=True, text=True, timeout=60).stdout
    assert not target.exists() and list(tmp_path.iterdir()) == []
    assert parse(out)["path_exists"] is False


def test_parse_baseline():
    # Lustre /checkpoints: ~1.15 GB/s write, ~1.2 ms fsync, 405 us read latency from ioping
    f = parse(BASE)
    assert f["path"] == "/checkpoints" and f["fs_type"] == "lustre"
    assert f["mount_point"] == "/checkpoints"
    assert f["free_bytes"] == 558873956352 * 1024 and f["free_pct"] == 47.72
    assert f["write_bytes_per_s"] == pytest.approx(67108864 / 0.058214331, rel=1e-3)
    assert f["fsync_latency_us"] == pytest.approx(19681529 / 1000 / 16, rel=1e-3)
    assert f["read_latency_us"] == 405.3 and f["read_latency_source"] == "ioping"
    assert f["read_mode"] == "direct" and f["tmpfile_removed"] is True


def test_baseline_raises_nothing():
    # healthy host alone, expecting shared storage, and in a fleet of identical hosts
    _, findings = run(BASE, expect_shared=True)
    assert findings == []
    facts = parse(BASE)
    assert PROBE.check_fleet({f"gpu{i:03d}": facts for i in range(1, 9)}, context()) == []


def test_garbage_is_a_parse_error():
    # foreign text and another probe's output are refused
    with pytest.raises(ParseError):
        parse("df: /checkpoints: Stale file handle\n")
    with pytest.raises(ParseError):
        parse(baseline("host"))


def test_path_absent_is_not_measured():
    # the path does not exist on the host: one not-measured, nothing else
    text = replace(BASE, exists="absent\n", df="", io="path absent\n", ioping="")
    f, findings = run(text)
    assert f["path_exists"] is False
    assert codes(findings) == ["not-measured"]


def test_mktemp_refused_is_not_measured():
    # read-only or foreign-owned path: no temp file, the write test is not measured
    text = replace(BASE, io="mktemp: failed to create file via template "
                            "'/checkpoints/.diag-storage.XXXXXX': Permission denied\n")
    f, findings = run(text)
    assert "Permission denied" in f["write_error"]
    assert codes(findings) == ["not-measured"]


def test_fsync_latency_high():
    # 16 O_DSYNC writes took 1.6 s: 100 ms per fsync
    text = edit(BASE, "io", f"sync_ns {T0 + 61230877} {T0 + 80912406}",
                f"sync_ns {T0 + 61230877} {T0 + 61230877 + 1_600_000_000}")
    text = edit(text, "io", "65536 bytes (66 kB, 64 KiB) copied, 0.0176203 s, 3.7 MB/s",
                "65536 bytes (66 kB, 64 KiB) copied, 1.59871 s, 41.0 kB/s")
    f, findings = run(text)
    assert f["fsync_latency_us"] == pytest.approx(100000, rel=1e-3)
    assert codes(findings) == ["storage-latency-high"]


def test_read_latency_high_from_ioping():
    # ioping reports 35 ms average reads (a struggling NFS server)
    text = edit(BASE, "ioping", "min/avg/max/mdev = 352.1 us / 405.3 us / 471.8 us / 44.9 us",
                "min/avg/max/mdev = 21.2 ms / 35.1 ms / 48.9 ms / 9.8 ms")
    f, findings = run(text)
    assert f["read_latency_us"] == 35100
    assert codes(findings) == ["storage-latency-high"]


def test_real_ioping_sample_parses_inside_the_section():
    # the real virtiofs ioping output (per-request lines + stats) as the ioping section
    text = replace(BASE, ioping=real("ioping__c10-virtiofs-volume-per-request-and-stats"))
    f, findings = run(text)
    assert f["read_latency_us"] == 334.5 and findings == []


def test_bandwidth_low():
    # the 64 MiB write with fsync took 1.2 s: 56 MB/s
    text = edit(BASE, "io", f"write_ns {T0} {T0 + 58214331}", f"write_ns {T0} {T0 + 1_200_000_000}")
    f, findings = run(text)
    assert f["write_bytes_per_s"] == pytest.approx(55924053, rel=1e-3)
    assert codes(findings) == ["storage-bandwidth-low"]


def test_bandwidth_from_dd_when_date_has_no_nanoseconds():
    # busybox date prints %N literally: dd's own seconds are used instead
    text = edit(BASE, "io", f"write_ns {T0} {T0 + 58214331}", "write_ns 1737368306%N 1737368306%N")
    f, _ = run(text)
    assert f["write_bytes_per_s"] == pytest.approx(67108864 / 0.0521412, rel=1e-3)


def test_space_low():
    # the checkpoint filesystem is 97% full
    df = ("Filesystem                      Type      1024-blocks         Used     Available "
          "Capacity Mounted on\n"
          "10.12.0.10@o2ib:10.12.0.11@o2ib:/ckpt lustre 1171263676416 1136125765120 "
          "35137911296      98% /checkpoints\n")
    f, findings = run(replace(BASE, df=df))
    assert f["free_pct"] == 3.0
    assert codes(findings) == ["storage-space-low"]


def test_local_disk_when_shared_expected():
    # /checkpoints turned out to be the node's NVMe (the shared mount did not come up)
    df = ("Filesystem     Type 1024-blocks      Used Available Capacity Mounted on\n"
          "/dev/nvme0n1p2 ext4  3702595064 912430212 2601797588      26% /\n")
    _, findings = run(replace(BASE, df=df), expect_shared=True)
    [f] = findings
    assert f.code == "storage-local-disk" and f.severity == "warning"
    assert f.evidence["device"] == "/dev/nvme0n1p2"
    _, findings = run(replace(BASE, df=df))  # nobody said it should be shared
    assert findings == []


def test_ioping_missing_is_fine_when_dd_measured_reads():
    # no ioping: the 4 KiB direct reads give the read latency, no not-measured
    text = replace(BASE, ioping=None)
    f, findings = run(text)
    assert f["missing"] == ["ioping"]
    assert f["read_latency_us"] == pytest.approx(7477655 / 1000 / 16, rel=1e-3)
    assert f["read_latency_source"] == "dd 4k direct"
    assert findings == []


def test_outlier_fsync_among_peers():
    # one host's fsync is 30 ms (under the 50 ms limit) while its peers take ~1.2 ms
    slow = edit(BASE, "io", f"sync_ns {T0 + 61230877} {T0 + 80912406}",
                f"sync_ns {T0 + 61230877} {T0 + 61230877 + 480_000_000}")
    facts = {f"gpu{i:03d}": parse(BASE) for i in range(1, 8)}
    facts["gpu008"] = parse(slow)
    assert PROBE.check("gpu008", facts["gpu008"], context(params={"path": "/checkpoints"})) == []
    [f] = PROBE.check_fleet(facts, context())
    assert f.code == "storage-outlier" and f.hosts == ("gpu008",)
    assert by_code([f], "storage-outlier")[0].evidence["outliers"] == {"gpu008": 30000.0}
