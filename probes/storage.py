"""storage: is the checkpoint/data path fast enough, shared, and not full?

Checkpoint saves that take minutes (or hang ranks long enough to trip the NCCL watchdog) and
data loaders starving the GPUs usually come down to the filesystem behind one path. The probe
measures that path on every host: mount type and free space (df), a bounded write with fsync
and a direct read-back of ``storage_test_bytes`` into a temporary file that is always removed
(the only thing any probe writes, and only inside the given path), small synchronous writes for
the fsync latency, and ``ioping`` for read latency when it is installed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from probes.base import (
    Context,
    Probe,
    default_thresholds,
    finding,
    mad_outliers,
    not_measured,
    script,
    split_sections,
)
from probes.model import Finding
from probes.parsers import ParseError
from probes.parsers import parse as parse_kind

NAME = "storage"

MAX_TEST_BYTES = 1 << 30  # whatever the thresholds say, never write more than 1 GiB
SYNC_WRITES = 16  # 4 KiB O_DSYNC writes timed for the fsync latency
SMALL_READS = 16  # 4 KiB O_DIRECT reads timed for the read latency when ioping is absent
# Filesystems that live on the node itself (or in its container), never shared between hosts:
# the type column of `df -T` (the kernel's names, /proc/filesystems), and the names GNU
# coreutils' `stat -f -c %T` prints for the same magic numbers (its human_fstype table:
# "ext2/ext3" for every ext*, "overlayfs", "msdos"), read when df gives no line.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "vfat", "zfs", "tmpfs",
                      "overlay", "ramfs", "devtmpfs", "ext2/ext3", "overlayfs", "msdos"})


def _test_bytes(params: Mapping[str, Any]) -> int:
    try:
        value = int(params.get("storage_test_bytes") or default_thresholds()["storage_test_bytes"])
    except (TypeError, ValueError):
        value = int(default_thresholds()["storage_test_bytes"])
    return min(MAX_TEST_BYTES, max(4096, value))


def command(params: Mapping[str, Any]) -> str:
    path = shlex.quote(str(params.get("path") or "."))
    size = _test_bytes(params)
    mib = 1 << 20
    bs, count = (mib, max(1, size // mib)) if size >= mib else (size, 1)
    exists = f"if [ -d {path} ]; then echo \"present $(cd {path} && pwd -P)\"; else echo absent; fi"
    df = (f"if [ -d {path} ]; then df -PT {path}; "
          f"stat -f -c 'statfs type=%T bsize=%S blocks=%b bavail=%a' {path}; fi")
    # Everything in a subshell so its EXIT trap removes the file however the test ends.
    io = (
        f"if [ -d {path} ]; then ( f=$(mktemp {path}/.diag-storage.XXXXXX) || exit 0; "
        "c=; trap 'rm -f \"$f\"' EXIT; "
        "trap '[ -n \"$c\" ] && kill $c 2>/dev/null; exit 1' HUP INT TERM PIPE; "
        "diag_run() { \"$@\" & c=$!; wait $c; r=$?; c=; return $r; }; echo \"tmpfile created\"; "
        "t0=$(date +%s%N); "
        f"diag_run timeout 60 dd if=/dev/zero of=\"$f\" bs={bs} count={count} conv=fsync 2>&1; "
        "echo \"write_rc $?\"; t1=$(date +%s%N); echo \"write_ns $t0 $t1\"; "
        "t0=$(date +%s%N); "
        f"diag_run timeout 20 dd if=/dev/zero of=\"$f\" bs=4096 count={SYNC_WRITES} oflag=dsync "
        "conv=notrunc 2>&1; "
        "echo \"sync_rc $?\"; t1=$(date +%s%N); echo \"sync_ns $t0 $t1\"; "
        "d=direct; t0=$(date +%s%N); "
        f"diag_run timeout 30 dd if=\"$f\" of=/dev/null bs={bs} iflag=direct 2>&1 || "
        "{ d=cached; t0=$(date +%s%N); "
        f"diag_run timeout 30 dd if=\"$f\" of=/dev/null bs={bs} 2>&1; }}; "
        "echo \"read_rc $? $d\"; t1=$(date +%s%N); echo \"read_ns $t0 $t1\"; "
        "t0=$(date +%s%N); "
        f"diag_run timeout 10 dd if=\"$f\" of=/dev/null bs=4096 count={SMALL_READS} iflag=direct "
        "2>/dev/null; echo \"small_read_rc $? \"; t1=$(date +%s%N); "
        "echo \"small_read_ns $t0 $t1\"; "
        "rm -f \"$f\"; if [ -e \"$f\" ]; then echo 'tmpfile left'; else echo 'tmpfile removed'; "
        "fi ); else echo 'path absent'; fi"
    )
    ioping = f"if [ -d {path} ]; then timeout 15 ioping -c 5 -q {path}; fi"
    return script([("exists", exists), ("df", df), ("io", io), ("ioping", ioping)],
                  {"ioping": "ioping"})


_DF = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)%\s+(\S.*)$")
_STATFS = re.compile(r"statfs type=(\S+) bsize=(\d+) blocks=(\d+) bavail=(\d+)")
_NS = re.compile(r"^(write|sync|read|small_read)_ns (\d+) (\d+)\s*$", re.M)
_RC = re.compile(r"^(write|sync|read|small_read)_rc (\d+)(?: (\w+))?\s*$", re.M)


def _dd_blocks(text: str) -> list[str]:
    """The io section cut into the output of each dd run (the line before *_rc closes one)."""
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if _RC.match(line):
            blocks.append("\n".join(current))
            current = []
        elif not _NS.match(line) and not line.startswith("tmpfile"):
            current.append(line)
    return blocks


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "exists" not in sections or "io" not in sections:
        raise ParseError("storage: no exists/io section (not the output of the storage probe)")
    facts: dict[str, Any] = {
        "path": None, "fs_type": None, "free_bytes": None, "free_pct": None,
        "write_bytes_per_s": None, "fsync_latency_us": None, "read_latency_us": None,
        "path_exists": sections["exists"].text.startswith("present"), "device": None,
        "mount_point": None, "read_bytes_per_s": None, "read_mode": None, "write_error": None,
        "tmpfile_removed": None, "read_latency_source": None, "missing": []}
    if facts["path_exists"]:
        facts["path"] = sections["exists"].text.strip()[len("present"):].strip() or None
    df = sections.get("df")
    if df and not df.missing:
        for line in df.text.splitlines():
            if m := _DF.match(line.strip()):
                size_kb, avail_kb = int(m.group(3)), int(m.group(5))
                facts.update(device=m.group(1), fs_type=m.group(2), mount_point=m.group(7),
                             free_bytes=avail_kb * 1024,
                             free_pct=round(100.0 * avail_kb / size_kb, 2) if size_kb else None)
            elif (m := _STATFS.search(line)) and facts["free_bytes"] is None:
                bsize, total, bavail = (int(g) for g in m.groups()[1:])
                facts.update(fs_type=m.group(1), free_bytes=bsize * bavail,
                             free_pct=round(100.0 * bavail / total, 2) if total else None)
    io = sections["io"].text
    rcs = {m.group(1): (int(m.group(2)), m.group(3)) for m in _RC.finditer(io)}
    ns = {m.group(1): int(m.group(3)) - int(m.group(2)) for m in _NS.finditer(io)
          if int(m.group(3)) > int(m.group(2))}
    blocks = dict(zip([m.group(1) for m in _RC.finditer(io)], _dd_blocks(io), strict=False))
    if "tmpfile removed" in io:
        facts["tmpfile_removed"] = True
    elif "tmpfile left" in io:
        facts["tmpfile_removed"] = False

    def dd(kind: str) -> dict[str, Any] | None:
        if rcs.get(kind, (1,))[0] != 0:
            return None
        try:
            return parse_kind("dd", blocks.get(kind, ""))
        except ParseError:
            return None

    write = dd("write")
    if write and write.get("bytes"):
        seconds = ns["write"] / 1e9 if "write" in ns else write.get("seconds")
        if seconds:
            facts["write_bytes_per_s"] = round(write["bytes"] / seconds, 1)
    elif facts["path_exists"] and "tmpfile created" not in io:
        lines = [ln for ln in io.splitlines() if ln.strip()]
        facts["write_error"] = "could not create a temporary file" + (
            f": {lines[0][:200]}" if lines else "")
    elif facts["path_exists"]:
        lines = [ln for ln in blocks.get("write", "").splitlines() if ln.strip()]
        facts["write_error"] = "the write test failed" + (f": {lines[0][:200]}" if lines else "")
    sync = dd("sync")
    if sync:
        seconds = ns["sync"] / 1e9 if "sync" in ns else sync.get("seconds")
        if seconds:
            facts["fsync_latency_us"] = round(seconds * 1e6 / SYNC_WRITES, 1)
    read = dd("read")
    if read and read.get("bytes"):
        seconds = ns["read"] / 1e9 if "read" in ns else read.get("seconds")
        if seconds:
            facts["read_bytes_per_s"] = round(read["bytes"] / seconds, 1)
        facts["read_mode"] = rcs["read"][1]
    if rcs.get("small_read", (1,))[0] == 0 and "small_read" in ns:
        facts["read_latency_us"] = round(ns["small_read"] / 1e3 / SMALL_READS, 1)
        facts["read_latency_source"] = "dd 4k direct"
    ioping = sections.get("ioping")
    if ioping is not None and ioping.missing:
        facts["missing"].append("ioping")
    elif ioping is not None and ioping.text.strip():
        try:
            avg = parse_kind("ioping", ioping.text).get("avg_us")
        except ParseError:
            avg = None
        if avg is not None:
            facts["read_latency_us"], facts["read_latency_source"] = avg, "ioping"
    return facts


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    path = ctx.params.get("path") or facts.get("path") or "."
    if not facts.get("path_exists"):
        return [not_measured(NAME, host, f"storage at {path}",
                             f"{path} does not exist (or is not a directory) on {host}")]
    findings: list[Finding] = []
    if facts.get("write_error"):
        findings.append(not_measured(NAME, host, f"write test on {path}",
                                     facts["write_error"]))
    if facts.get("tmpfile_removed") is False:  # never expected; said loudly if it happens
        findings.append(not_measured(NAME, host, f"cleanup of the test file in {path}",
                                     "the temporary .diag-storage.* file could not be removed"))
    fsync, read = facts.get("fsync_latency_us"), facts.get("read_latency_us")
    fsync_max, read_max = ctx.threshold("storage_fsync_latency_us"), \
        ctx.threshold("storage_read_latency_us")
    if (fsync is not None and fsync > fsync_max) or (read is not None and read > read_max):
        findings.append(finding(
            "storage-latency-high", [host],
            f"{path} on {host}: fsync {_ms(fsync)} (limit {_ms(fsync_max)}), "
            f"read {_ms(read)} (limit {_ms(read_max)})",
            NAME, path=path, fs_type=facts.get("fs_type"), fsync_latency_us=fsync,
            read_latency_us=read))
    write = facts.get("write_bytes_per_s")
    if write is not None and write < ctx.threshold("storage_write_bytes_per_s"):
        findings.append(finding(
            "storage-bandwidth-low", [host],
            f"{path} on {host} writes {write / 1e6:.0f} MB/s with fsync "
            f"(limit {ctx.threshold('storage_write_bytes_per_s') / 1e6:.0f} MB/s)",
            NAME, path=path, fs_type=facts.get("fs_type"), write_bytes_per_s=write))
    free_pct = facts.get("free_pct")
    if free_pct is not None and free_pct < ctx.threshold("storage_free_pct"):
        findings.append(finding(
            "storage-space-low", [host],
            f"{facts.get('mount_point') or path} on {host} has {free_pct:.1f}% free "
            f"({(facts.get('free_bytes') or 0) / 2**30:.1f} GiB)",
            NAME, path=path, free_pct=free_pct, free_bytes=facts.get("free_bytes")))
    if ctx.params.get("expect_shared") and (facts.get("fs_type") or "") in LOCAL_FS:
        findings.append(finding(
            "storage-local-disk", [host],
            f"{path} on {host} is {facts['fs_type']} on {facts.get('device')} "
            f"(mounted at {facts.get('mount_point')}): node-local, not shared storage",
            NAME, path=path, fs_type=facts["fs_type"], device=facts.get("device"),
            mount_point=facts.get("mount_point")))
    return findings


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000:.1f} ms"


def check_fleet(facts_by_host: dict[str, dict[str, Any]], ctx: Context) -> list[Finding]:
    values = {h: f["fsync_latency_us"] for h, f in facts_by_host.items()
              if f.get("fsync_latency_us") is not None}
    # A tenth of the absolute limit as the least spread that counts: a few hundred us of
    # jitter between healthy peers is not an outlier.
    floor = ctx.threshold("storage_fsync_latency_us") / 10
    outliers = mad_outliers(values, k=ctx.threshold("outlier_mad_k"), min_spread=floor)
    if not outliers:
        return []
    median = sorted(values.values())[len(values) // 2]
    return [finding(
        "storage-outlier", outliers,
        f"fsync latency on {len(outliers)} host(s) is far above its peers' "
        f"(median {_ms(median)}): "
        + ", ".join(f"{h} {_ms(v)}" for h, v in sorted(outliers.items())[:8]),
        NAME, median_us=median, outliers=dict(sorted(outliers.items())[:20]))]


# The dd timeouts add up to 150 s, ioping 15 s: the whole script ends within the probe timeout.
PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=180.0)
