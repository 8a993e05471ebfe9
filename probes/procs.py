"""procs: the training processes' own limits, cgroup, /dev/shm and devices, as they see them.

A job launched from the wrong place inherits the wrong world: a ``Max locked memory`` of 64 KiB
or 8 MiB (RDMA memory registration fails, NCCL falls back to sockets or aborts), a container's
64 MB ``/dev/shm`` (NCCL cannot create its shared-memory segments), a container without
``/dev/infiniband`` or ``/dev/nvidia*``, a cgroup memory limit it keeps hitting (ranks killed by
the cgroup OOM killer while the host has memory to spare). None of it shows from the operator's
shell: it is read here from ``/proc/PID`` of the training processes themselves (the PIDs of
``probes.nccl.training_pids_sh``, at most ``MAX_PROCESSES``), never from their environment.

Sections: ``host`` (the probing shell's mount and user namespaces, the host's RDMA and GPU
device nodes, where cgroup v2 is mounted), ``procs`` (one block per process: its limits, its
cgroup lines, its /dev/shm mount and statfs, its device nodes, namespaces and effective
capabilities) and ``cgroups`` (the memory and pids files of each process's cgroup and of its
ancestors, each directory once). The facts are told in ``procs_facts.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.base import Context, Probe, guard_parse, not_measured, script
from probes.model import Finding
from probes.nccl import training_pids_sh
from probes.procs_facts import parse as _parse

NAME = "procs"
MAX_PROCESSES = 16  # ranks and their launcher; data-loader workers share their limits
MAX_CGROUP_DEPTH = 12

_HOST = (
    "echo \"mntns $(readlink /proc/$$/ns/mnt 2>/dev/null || echo unreadable)\"; "
    "echo \"userns $(readlink /proc/$$/ns/user 2>/dev/null || echo unreadable)\"; "
    "n=0; for f in /dev/infiniband/uverbs*; do [ -e \"$f\" ] && n=$((n+1)); done; "
    "echo \"uverbs $n\"; "
    "n=0; for f in /dev/nvidia[0-9]*; do [ -e \"$f\" ] && n=$((n+1)); done; "
    "echo \"nvidia $n\"; "
    "if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo 'cgroup2 /sys/fs/cgroup'; "
    "elif [ -f /sys/fs/cgroup/unified/cgroup.controllers ]; then "
    "echo 'cgroup2 /sys/fs/cgroup/unified'; else echo 'cgroup2 none'; fi; "
    "[ -d /sys/fs/cgroup/memory ] && echo 'cgroup1 memory /sys/fs/cgroup/memory'; "
    "[ -d /sys/fs/cgroup/pids ] && echo 'cgroup1 pids /sys/fs/cgroup/pids'; true"
)

# One block per process. Shell builtins where a file is small (limits, cgroup, device globs),
# so 16 processes cost a few dozen forks; the cgroup directories to read are gathered in
# $diag_cg for the cgroups section (sections share the shell).
_PROC_BLOCK = (
    "diag_cg=; diag_v2=; "
    "[ -f /sys/fs/cgroup/cgroup.controllers ] && diag_v2=/sys/fs/cgroup; "
    "[ -z \"$diag_v2\" ] && [ -f /sys/fs/cgroup/unified/cgroup.controllers ] && "
    "diag_v2=/sys/fs/cgroup/unified; "
    "for p in $diag_pids; do [ -d /proc/$p ] || continue; "
    "echo \"--- pid $p comm $(cat /proc/$p/comm 2>/dev/null)\"; "
    "while IFS= read -r l; do case \"$l\" in 'Max locked memory'*|'Max open files'*|"
    "'Max processes'*) echo \"limit $l\";; esac; true; done 2>/dev/null </proc/$p/limits "
    "|| echo 'limit_error unreadable'; "
    "while IFS= read -r l; do echo \"cgroup $l\"; r=${l#*:}; c=${r%%:*}; d=${r#*:}; "
    "case \"$l\" in 0::*) [ -n \"$diag_v2\" ] && diag_cg=\"$diag_cg v2|$diag_v2|$d\";; "
    "*) case \",$c,\" in *,memory,*) [ -d /sys/fs/cgroup/memory ] && "
    "diag_cg=\"$diag_cg memory|/sys/fs/cgroup/memory|$d\";; esac; "
    "case \",$c,\" in *,pids,*) [ -d /sys/fs/cgroup/pids ] && "
    "diag_cg=\"$diag_cg pids|/sys/fs/cgroup/pids|$d\";; esac;; esac; true; "
    "done 2>/dev/null </proc/$p/cgroup || echo 'cgroup_error unreadable'; "
    "awk '$5==\"/dev/shm\"{l=$0} END{if(l!=\"\")print \"shm_mount \" substr(l,1,500)}' "
    "/proc/$p/mountinfo "
    "2>/dev/null; "
    "if [ -d /proc/$p/root/dev ]; then "
    "timeout 5 stat -f -c 'shm_statfs %S %b %f' /proc/$p/root/dev/shm 2>/dev/null "
    "|| echo 'shm_statfs_error'; "
    "u=0; for f in /proc/$p/root/dev/infiniband/uverbs*; do [ -e \"$f\" ] && u=$((u+1)); done; "
    "v=0; for f in /proc/$p/root/dev/nvidia[0-9]*; do [ -e \"$f\" ] && v=$((v+1)); done; "
    "c=0; [ -e /proc/$p/root/dev/nvidiactl ] && c=1; "
    "echo \"devices uverbs=$u nvidia=$v nvidiactl=$c\"; "
    "else echo 'devices unreadable'; fi; "
    "echo \"mntns $(readlink /proc/$p/ns/mnt 2>/dev/null || echo unreadable)\"; "
    "echo \"userns $(readlink /proc/$p/ns/user 2>/dev/null || echo unreadable)\"; "
    "while read -r a b; do case \"$a\" in CapEff:) echo \"capeff $b\";; esac; "
    "done 2>/dev/null </proc/$p/status; "
    "done; true"
)

# The memory/pids files of every cgroup gathered above and of its ancestors, once each: a
# limit is often set on the job (Slurm's job_N, a pod) and not on the task's own leaf.
_CGROUPS = (
    "set -f; diag_seen='|'; "
    "for e in $diag_cg; do l=${e%%|*}; r=${e#*|}; m=${r%%|*}; d=${r#*|}; k=0; "
    f"while [ -n \"$d\" ] && [ \"$d\" != / ] && [ $k -lt {MAX_CGROUP_DEPTH} ]; do "
    "case \"$diag_seen\" in *\"|$l:$d|\"*) break;; esac; diag_seen=\"$diag_seen$l:$d|\"; "
    "echo \"--- cgroup $l $d\"; "
    "if [ -d \"$m$d\" ]; then "
    "for f in memory.max memory.high memory.current memory.limit_in_bytes "
    "memory.usage_in_bytes memory.failcnt pids.max pids.current; do "
    "[ -r \"$m$d/$f\" ] && read -r v 2>/dev/null <\"$m$d/$f\" && echo \"$f $v\"; done; "
    "for f in memory.events memory.oom_control pids.events; do [ -r \"$m$d/$f\" ] && "
    "while read -r a b; do echo \"$f.$a $b\"; done 2>/dev/null <\"$m$d/$f\"; done; "
    "[ -r \"$m$d/memory.stat\" ] && while read -r a b; do case \"$a\" in "
    "anon|file|rss|cache|total_rss|total_cache) echo \"memory.stat.$a $b\";; esac; "
    "done 2>/dev/null <\"$m$d/memory.stat\"; "
    "else echo 'absent'; fi; d=${d%/*}; k=$((k+1)); done; done; set +f; true"
)


def command(params: Mapping[str, Any]) -> str:
    pids = training_pids_sh(params.get("process_pattern"), limit=MAX_PROCESSES)
    sections = [("host", _HOST), ("procs", f"diag_pids=$({pids}); {_PROC_BLOCK}"),
                ("cgroups", _CGROUPS)]
    return script(sections)


parse = guard_parse(NAME, _parse)


def check(host: str, facts: dict[str, Any], ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for section in facts.get("missing", []):
        findings.append(not_measured(NAME, host, f"training processes ({section})",
                                     f"the {section} section did not run"))
    for proc in facts.get("processes") or []:
        unread = [what for what, key in (("limits", "memlock_unlimited"),
                                         ("cgroup", "cgroup"),
                                         ("root filesystem (devices, /dev/shm)",
                                          "has_nvidia_dev"))
                  if proc.get(key) is None]
        if unread:
            findings.append(not_measured(
                NAME, host, f"{', '.join(unread)} of pid {proc.get('pid')} "
                f"({proc.get('comm') or '?'})",
                "not readable by the probing user (reading another user's /proc/PID/root "
                "needs the same user or root)"))
    return findings


PROBE = Probe(NAME, command, parse, check, timeout_s=30.0)
