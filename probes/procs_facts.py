"""The procs probe's facts: its script's output read into one entry per training process.

Per process (``processes``):

- ``pid``, ``comm``;
- ``memlock_unlimited`` (bool; None when /proc/PID/limits was not read) and
  ``memlock_soft_bytes`` (int; None when unlimited or not read): a predicate compares
  ``memlock_unlimited eq false`` and ``memlock_soft_bytes lt N``; ``memlock_hard_bytes`` alike;
  ``nofile_soft`` / ``nofile_hard``; ``nproc_soft`` (None when unlimited) and ``nproc_unlimited``;
- ``cgroup``: the process's cgroup path (the v2 line ``0::PATH``, else the v1 memory
  controller's), ``cgroup_version`` (2 or 1);
- the effective memory limit over the cgroup and its ancestors: ``mem_max_bytes`` (the
  smallest ``memory.max`` / v1 ``memory.limit_in_bytes``; None when there is none),
  ``mem_unlimited`` (True when no level sets one), ``mem_limit_cgroup`` (the level that sets
  it), ``mem_current_bytes`` (``memory.current`` / ``memory.usage_in_bytes`` of that level, of
  the leaf when unlimited), ``mem_used_pct``; ``mem_anon_bytes`` / ``mem_anon_pct`` (anonymous
  memory of that level, ``memory.stat`` ``anon`` / v1 ``total_rss``: what cannot be reclaimed,
  unlike the page cache ``memory.current`` also counts); ``mem_high_bytes`` (smallest
  ``memory.high``);
- ``cgroup_oom_kills`` (v2 ``memory.events`` ``oom_kill`` of the limiting level, which counts
  its descendants, the pod's when that level is the kubelet's node-wide one; v1
  ``memory.oom_control`` ``oom_kill``, local to each cgroup, summed from the leaf up to the
  limiting level; of the leaf when unlimited),
  ``cgroup_oom_events`` (``oom``: times the limit was hit and the OOM killer ran),
  ``mem_failcnt`` (v1);
- ``pids_max`` (smallest finite ``pids.max``; None when unlimited), ``pids_current`` (of that
  level), ``pids_used_pct``;
- ``shm_fstype``, ``shm_size_bytes``, ``shm_used_bytes``, ``shm_used_pct``: the /dev/shm the
  process sees (statfs through /proc/PID/root, else the ``size=`` of its mount);
- ``has_uverbs`` / ``uverbs_count``, ``has_nvidia_dev`` / ``nvidia_dev_count``,
  ``has_nvidiactl``: device nodes inside the process's root (None when /proc/PID/root was not
  readable);
- ``cap_ipc_lock``: the process holds CAP_IPC_LOCK in the probing shell's user namespace
  (``CapEff`` bit 14 of /proc/PID/status; the kernel's ``ib_umem_get`` lets such a process pin
  past RLIMIT_MEMLOCK); False without the bit or in another user namespace (a rootless
  container: ``capable()`` asks the initial one); None when not read;
- ``mnt_ns_differs`` (its mount namespace is not the probing shell's), ``container`` (bool),
  ``container_hint`` (docker, containerd, kubepods, crio, podman, lxc, from the cgroup path;
  ``mount-namespace`` for enroot/pyxis/apptainer, which keep the job's cgroup).

Host: ``process_count``, ``host_uverbs_count``, ``host_nvidia_dev_count``, ``cgroup_v2``.
"""

from __future__ import annotations

import re
from typing import Any

from probes.base import split_sections
from probes.parsers import ParseError
from probes.parsers.proc_limits import parse as parse_limits
from probes.parsers.proc_mountinfo import parse_line

# memory.limit_in_bytes (v1) prints PAGE_COUNTER_MAX rounded to a page for "no limit"
# (9223372036854771712 on 4 KiB pages); anything this large is no limit.
_V1_UNLIMITED = 1 << 62
_PROC = re.compile(r"^--- pid (\d+) comm ?(.*)$")
_CGROUP = re.compile(r"^--- cgroup (v2|memory|pids) (.+)$")
# The kubelet's node-wide levels (Kubernetes "Node Allocatable": the kubepods cgroup; QoS classes
# burstable and besteffort), systemd (kubepods-burstable.slice) or cgroupfs (/kubepods/burstable)
# driver; a pod's level (kubepods-burstable-pod<uid>.slice, pod<uid>) is not one of them.
_NODE_WIDE = re.compile(r"/kubepods(?:-burstable|-besteffort)?(?:\.slice)?$|"
                        r"^/kubepods(?:/burstable|/besteffort)?$")
_SIZE = re.compile(r"(?:^|,)size=(\d+)([kKmMgG%]?)(?:,|$)")
_HINTS = (("kubepods", "kubepods"), ("docker", "docker"), ("cri-containerd", "containerd"),
          ("containerd", "containerd"), ("crio", "crio"), ("libpod", "podman"),
          ("lxc.payload", "lxc"), ("/lxc/", "lxc"), ("machine.slice", "machine"))


def _int(value: str | None) -> int | None:
    value = (value or "").strip()
    return int(value) if value.isdecimal() else None


def _host(text: str, facts: dict[str, Any]) -> tuple[str | None, str | None]:
    """(mount namespace, user namespace) of the probing shell."""
    ns: dict[str, str | None] = {"mntns": None, "userns": None}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key in ns:
            ns[key] = None if value in ("", "unreadable") else value
        elif key == "uverbs":
            facts["host_uverbs_count"] = _int(value)
        elif key == "nvidia":
            facts["host_nvidia_dev_count"] = _int(value)
        elif key == "cgroup2":
            facts["cgroup_v2"] = value != "none"
    return ns["mntns"], ns["userns"]


def _cgroups(text: str) -> dict[tuple[str, str], dict[str, str]]:
    dirs: dict[tuple[str, str], dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if m := _CGROUP.match(line):
            current = dirs.setdefault((m.group(1), m.group(2).strip()), {})
        elif current is not None and line.strip() and line.strip() != "absent":
            key, _, value = line.strip().partition(" ")
            current[key] = value.strip()
    return dirs


def _limit(value: str | None) -> tuple[int | None, bool | None]:
    """(bytes, unlimited) of a memory.max / limit_in_bytes / pids.max value."""
    if value is None:
        return None, None
    if value.strip() == "max":
        return None, True
    number = _int(value)
    if number is None:
        return None, None
    return (None, True) if number >= _V1_UNLIMITED else (number, False)


def _ancestors(path: str) -> list[str]:
    out = []
    while path and path != "/":
        out.append(path)
        path = path.rsplit("/", 1)[0]
    return out


def _kills(levels: list[tuple[str, dict[str, str]]], binding: str | None,
           key: str, v2: bool) -> int | None:
    """The job's OOM kills. v2's memory.events count a cgroup's descendants too (cgroup-v2.rst
    "memory.events"): the limiting level's count, unless that level is the kubelet's node-wide
    cgroup (kubepods, its burstable/besteffort QoS levels: a pod without a memory limit), which
    counts every pod's kills; then the pod's own level below it. v1's memory.oom_control
    oom_kill counts the cgroup's own processes only (include/linux/memcontrol.h memcg_memory_event
    propagates events up on the v2 hierarchy alone): the sum from the leaf up to that level.
    Unlimited everywhere: the leaf."""
    names = [p for p, _ in levels]
    shared = next((i for i, p in enumerate(names) if _NODE_WIDE.search(p)), None)
    at = names.index(binding) if binding in names else 0
    if shared is not None and at >= shared > 0:
        at = shared - 1
    if v2:
        return _int(levels[at][1].get(key))
    counts = [n for n in (_int(f.get(key)) for _, f in levels[:at + 1]) if n is not None]
    return sum(counts) if counts else None


def _memory(proc: dict[str, Any], dirs: dict[tuple[str, str], dict[str, str]],
            label: str, path: str) -> None:
    levels = [(p, dirs[(label, p)]) for p in _ancestors(path) if (label, p) in dirs]
    if not levels:
        return
    v2 = label == "v2"
    max_key, cur_key = ("memory.max", "memory.current") if v2 else \
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
    kills_key = "memory.events.oom_kill" if v2 else "memory.oom_control.oom_kill"
    best: tuple[int, str] | None = None
    seen_any = False
    for level, files in levels:
        value, unlimited = _limit(files.get(max_key))
        seen_any = seen_any or unlimited is not None
        if value is not None and (best is None or value < best[0]):
            best = (value, level)
    highs = [v for v in (_limit(f.get("memory.high"))[0] for _, f in levels) if v is not None]
    proc["mem_high_bytes"] = min(highs) if highs else None
    binding = dirs[(label, best[1])] if best else levels[0][1]
    if best:
        proc.update(mem_max_bytes=best[0], mem_unlimited=False, mem_limit_cgroup=best[1])
    elif seen_any:
        proc.update(mem_unlimited=True)
    proc["mem_current_bytes"] = _int(binding.get(cur_key))
    if best and proc["mem_current_bytes"] is not None and best[0] > 0:
        proc["mem_used_pct"] = round(100.0 * proc["mem_current_bytes"] / best[0], 1)
    anon = _int(binding.get("memory.stat.anon" if v2 else "memory.stat.total_rss"))
    proc["mem_anon_bytes"] = anon
    if best and anon is not None and best[0] > 0:
        proc["mem_anon_pct"] = round(100.0 * anon / best[0], 1)
    proc["cgroup_oom_kills"] = _kills(levels, best[1] if best else None, kills_key, v2)
    proc["cgroup_oom_events"] = _int(binding.get("memory.events.oom")) if v2 else None
    proc["mem_failcnt"] = None if v2 else _int(binding.get("memory.failcnt"))


def _pids(proc: dict[str, Any], dirs: dict[tuple[str, str], dict[str, str]],
          label: str, path: str) -> None:
    levels = [dirs[(label, p)] for p in _ancestors(path) if (label, p) in dirs]
    best: tuple[int, dict[str, str]] | None = None
    for files in levels:
        value, _ = _limit(files.get("pids.max"))
        if value is not None and (best is None or value < best[0]):
            best = (value, files)
    if best:
        proc["pids_max"] = best[0]
        proc["pids_current"] = _int(best[1].get("pids.current"))
        if proc["pids_current"] is not None and best[0] > 0:
            proc["pids_used_pct"] = round(100.0 * proc["pids_current"] / best[0], 1)
    elif levels:
        proc["pids_current"] = _int(levels[0].get("pids.current"))


def _shm_size(super_options: str) -> int | None:
    m = _SIZE.search(super_options)
    if not m or m.group(2) == "%" or int(m.group(1)) == 0:  # size=0: no limit (tmpfs.rst)
        return None
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(m.group(1)) * scale


def _new(pid: int, comm: str) -> dict[str, Any]:
    keys = ("memlock_unlimited", "memlock_soft_bytes", "memlock_hard_bytes", "nofile_soft",
            "nofile_hard", "nproc_soft", "nproc_unlimited", "cgroup", "cgroup_version",
            "mem_max_bytes", "mem_unlimited", "mem_limit_cgroup", "mem_current_bytes",
            "mem_used_pct", "mem_anon_bytes", "mem_anon_pct", "mem_high_bytes",
            "cgroup_oom_kills", "cgroup_oom_events", "cap_ipc_lock",
            "mem_failcnt", "pids_max", "pids_current", "pids_used_pct", "shm_fstype",
            "shm_size_bytes", "shm_used_bytes", "shm_used_pct", "has_uverbs", "uverbs_count",
            "has_nvidia_dev", "nvidia_dev_count", "has_nvidiactl", "mnt_ns_differs",
            "container", "container_hint")
    proc: dict[str, Any] = {"pid": pid, "comm": comm, **dict.fromkeys(keys)}
    proc.update(_limits=[], _cgroup_lines=[], _ns=None, _userns=None, _capeff=None)
    return proc


def _process_line(proc: dict[str, Any], line: str) -> None:
    key, _, value = line.partition(" ")
    if key == "limit":
        proc["_limits"].append(value)
    elif key == "cgroup":
        proc["_cgroup_lines"].append(value.strip())
    elif key == "shm_mount":
        mount = parse_line(value.strip())
        if mount:
            proc["shm_fstype"] = mount["fstype"]
            proc["_shm_size_opt"] = _shm_size(mount["super_options"])
    elif key == "shm_statfs":
        nums = [n for n in (_int(v) for v in value.split()) if n is not None]
        # a tmpfs without a size limit (size=0) reports no blocks (mm/shmem.c shmem_statfs):
        # its size is not known here, and it is not 0
        if len(nums) == 3 == len(value.split()) and nums[1] > 0:
            bsize, blocks, free = nums
            proc["shm_size_bytes"] = bsize * blocks
            proc["shm_used_bytes"] = bsize * (blocks - free)
    elif key == "devices" and value.strip() != "unreadable":
        counts = dict(kv.partition("=")[::2] for kv in value.split())
        uverbs, nvidia = _int(counts.get("uverbs")), _int(counts.get("nvidia"))
        proc.update(uverbs_count=uverbs, nvidia_dev_count=nvidia,
                    has_uverbs=None if uverbs is None else uverbs > 0,
                    has_nvidia_dev=None if nvidia is None else nvidia > 0,
                    has_nvidiactl=counts.get("nvidiactl") == "1" if "nvidiactl" in counts
                    else None)
    elif key == "mntns":
        proc["_ns"] = None if value.strip() in ("", "unreadable") else value.strip()
    elif key == "userns":
        proc["_userns"] = None if value.strip() in ("", "unreadable") else value.strip()
    elif key == "capeff" and re.fullmatch(r"[0-9A-Fa-f]{1,16}", value.strip()):
        proc["_capeff"] = int(value.strip(), 16)


def _cap_ipc_lock(proc: dict[str, Any], own_userns: str | None) -> bool | None:
    """CAP_IPC_LOCK (bit 14, linux/capability.h) effective in the initial user namespace:
    drivers/infiniband/core/umem.c ib_umem_get pins past RLIMIT_MEMLOCK when
    capable(CAP_IPC_LOCK), and capable() asks the initial namespace, so a capability held in a
    rootless container's own namespace does not count."""
    if proc["_capeff"] is None:
        return None
    if not proc["_capeff"] >> 14 & 1:
        return False
    if proc["_userns"] is None or own_userns is None:
        return None
    return bool(proc["_userns"] == own_userns)


def _finish(proc: dict[str, Any], dirs: dict[tuple[str, str], dict[str, str]],
            own_ns: str | None, own_userns: str | None = None) -> dict[str, Any]:
    try:
        limits = parse_limits("\n".join(proc["_limits"]))["limits"] if proc["_limits"] else {}
    except ParseError:
        limits = {}
    if limits:
        memlock = limits.get("max_locked_memory")
        if memlock:
            proc.update(memlock_unlimited=memlock["soft_unlimited"],
                        memlock_soft_bytes=memlock["soft"], memlock_hard_bytes=memlock["hard"])
        nofile = limits.get("max_open_files")
        if nofile:
            proc.update(nofile_soft=nofile["soft"], nofile_hard=nofile["hard"])
        nproc = limits.get("max_processes")
        if nproc:
            proc.update(nproc_soft=nproc["soft"], nproc_unlimited=nproc["soft_unlimited"])
    v2 = next((ln[3:] for ln in proc["_cgroup_lines"] if ln.startswith("0::")), None)
    v1 = {}
    for ln in proc["_cgroup_lines"]:
        parts = ln.split(":", 2)
        if len(parts) == 3 and parts[0] != "0":
            for ctrl in parts[1].split(","):
                v1[ctrl] = parts[2]
    # A controller is bound to one hierarchy (cgroup-v2.rst, "Mounting"): on a hybrid host
    # (systemd's v1 controllers beside an empty v2 tree at /sys/fs/cgroup/unified, whose 0::
    # line and directories hold no memory or pids files) they are read where the v1 lines say.
    on_v2 = v2 is not None and any(k[0] == "v2" for k in dirs)
    if "memory" in v1 or (v1 and not on_v2):
        proc.update(cgroup=v1.get("memory") or next(iter(v1.values())), cgroup_version=1)
    elif v2 is not None:
        proc.update(cgroup=v2, cgroup_version=2)
    for ctrl, read in (("memory", _memory), ("pids", _pids)):
        if ctrl in v1:
            read(proc, dirs, ctrl, v1[ctrl])
        elif on_v2 and v2 is not None:
            read(proc, dirs, "v2", v2)
    proc["cap_ipc_lock"] = _cap_ipc_lock(proc, own_userns)
    if proc["shm_size_bytes"] is None and proc.get("_shm_size_opt") is not None:
        proc["shm_size_bytes"] = proc["_shm_size_opt"]
    if proc["shm_size_bytes"] and proc["shm_used_bytes"] is not None:
        proc["shm_used_pct"] = round(100.0 * proc["shm_used_bytes"] / proc["shm_size_bytes"], 1)
    if proc["_ns"] is not None and own_ns is not None:
        proc["mnt_ns_differs"] = proc["_ns"] != own_ns
    hint = next((name for needle, name in _HINTS if needle in (proc["cgroup"] or "")), None)
    if hint is None and proc["mnt_ns_differs"]:
        hint = "mount-namespace"
    proc["container_hint"] = hint
    if hint is not None:
        proc["container"] = True
    elif proc["mnt_ns_differs"] is False:
        proc["container"] = False
    return {k: v for k, v in proc.items() if not k.startswith("_")}


def parse(text: str) -> dict[str, Any]:
    sections = split_sections(text)
    if "procs" not in sections:
        raise ParseError("procs: no procs section (not the output of the procs probe)")
    facts: dict[str, Any] = {"processes": [], "process_count": None, "host_uverbs_count": None,
                             "host_nvidia_dev_count": None, "cgroup_v2": None, "missing": [],
                             "errors": {}}
    for name in ("host", "procs", "cgroups"):
        sec = sections.get(name)
        if sec is None or sec.missing:
            facts["missing"].append(name)
    host = sections.get("host")
    own_ns, own_userns = _host(host.text, facts) if host is not None and not host.missing \
        else (None, None)
    cg = sections.get("cgroups")
    dirs = _cgroups(cg.text) if cg is not None and not cg.missing else {}
    procs = sections["procs"]
    if procs.missing:
        return facts
    current: dict[str, Any] | None = None
    raw: list[dict[str, Any]] = []
    for line in procs.text.splitlines():
        if m := _PROC.match(line):
            current = _new(int(m.group(1)), m.group(2).strip())
            raw.append(current)
        elif current is not None:
            _process_line(current, line.rstrip())
    facts["processes"] = [_finish(p, dirs, own_ns, own_userns) for p in raw]
    facts["process_count"] = len(facts["processes"])
    if procs.rc not in (0, None):
        facts["errors"]["procs"] = f"exit status {procs.rc}"
    return facts
